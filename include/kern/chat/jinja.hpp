// kern's own Jinja2 interpreter for chat templates: the subset real templates use, with the
// environment transformers renders them in (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loop controls, its tojson and raise_exception). Whatever it does not support
// fails when the template is parsed, naming the line and column; rendering either produces
// what transformers would or throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kern/chat/jinja_value.hpp"

namespace kern::chat::jinja {

struct Program;

// Bounds a render so hostile templates or requests cannot hang or exhaust memory.
struct RenderLimits {
  std::size_t max_output = std::size_t{64} << 20;  // bytes of output, and of any one string or list built
  std::uint64_t max_steps = 100'000'000;           // loop iterations, calls, and bytes/64 of strings built
  int max_call_depth = 64;                         // nested macro calls
};

class Template {
 public:
  // Throws Error(Template) naming `name`, the line and the column of what is wrong or unsupported.
  static Template parse(std::string_view source, std::string name = "template");

  // `globals` must be a Dict value: the template's variables. Throws Error(Template) on a render
  // failure (raise_exception, a Python type error, a limit).
  std::string render(const Value& globals, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace kern::chat::jinja
