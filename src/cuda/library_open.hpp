// dlopen of the first of a library's names that loads (the CUDA libraries kern never links), with
// every name tried and dlerror()'s answer in the Error(Driver) when none does. Internal to kern_cuda.
#pragma once

#include <initializer_list>

namespace kern::cuda::detail {

// `what` names the library in the error ("cuBLAS"); the handle is never closed.
void* open_first_library(std::initializer_list<const char*> names, const char* what);

}  // namespace kern::cuda::detail
