// The catalogue of kern's own kernels (kernels/*.cu): one table per kernel family (the fatbin
// <family>.fatbin, the manifest module of that name) listing every `extern "C" __global__` entry of
// the production fatbin with its parameter list: each parameter's name (as in the kernel's source)
// and its type in the manifest's param-type spelling (docs/manifest.md: "in buffer<bf16>", "inout
// state", "i32", ...), the direction being how the kernel uses the pointer.
//
// The kernels' sources are the truth; the tables are in src/models/kernel_catalogue.cpp. kern gen
// takes every launch's module and `params` from here, and the GPU test
// tests/gpu/kernels/catalogue_test.cpp checks each list against the driver's cuFuncGetParamInfo
// layout and that each fatbin has no kern_* entry the catalogue lacks, so a signature change the
// tables miss fails there. Test-only entries (tests/gpu/kernels/test_*.cu) are not listed.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::models {

struct KernelParam {
  std::string_view name;  // the kernel's parameter name
  std::string_view type;  // manifest param type
};

struct KernelEntry {
  std::string_view name;  // the extern "C" symbol
  std::span<const KernelParam> params;
};

struct KernelFamily {
  std::string_view name;  // fatbin stem and manifest module name
  std::span<const KernelEntry> entries;
};

// Every production family, sorted by name.
std::span<const KernelFamily> kernel_catalogue();

struct CataloguedKernel {
  const KernelFamily* family = nullptr;
  const KernelEntry* entry = nullptr;
};
// The family and entry of symbol `entry`; Error(Api) naming it when no family has it.
CataloguedKernel catalogued_kernel(std::string_view entry);
// The entry's parameter types, in order, as a manifest launch's `params`.
std::vector<std::string> kernel_param_types(const KernelEntry& entry);

}  // namespace kern::models
