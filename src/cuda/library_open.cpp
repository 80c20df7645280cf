#include "cuda/library_open.hpp"

#include <dlfcn.h>

#include <string>

#include <fmt/format.h>

#include "kern/base/error.hpp"

namespace kern::cuda::detail {

void* open_first_library(std::initializer_list<const char*> names, const char* what) {
  std::string tried;
  for (const char* n : names) {
    if (void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", n, why ? why : "?");
  }
  fail(ErrorKind::Driver, "{} could not be loaded: tried {}", what, tried);
}

}  // namespace kern::cuda::detail
