// Which vars a program's launches actually read, and graph keys over them (pure).
//
// A program reads a var when a launch's grid, shared_mem or `when` names it, or when a scalar
// launch argument or pack field takes it (directly or in an expression), forwarded from a
// call argument or written in the launch. Vars a program passes but no launch reads do not
// change what it does: its graph key ignores them, so callers may pass any value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kern/core/manifest.hpp"
#include "kern/runtime/vars.hpp"

namespace kern::runtime {

// Sorted, unique var indices.
std::vector<std::uint32_t> program_read_vars(const core::Manifest& m, const core::Program& p, const VarTable& vars);

// The values of `read` in `values` (a dense var table): the graph key.
std::vector<std::uint64_t> graph_key(std::span<const std::uint32_t> read, const std::uint64_t* values);

// "tokens=1, seqs=4" ("no vars" when empty).
std::string describe_key(std::span<const std::uint32_t> read, std::span<const std::uint64_t> key, const VarTable& vars);

}  // namespace kern::runtime
