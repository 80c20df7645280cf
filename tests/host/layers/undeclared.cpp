// The driver declares no edge to the CUDA shell: compiled with the driver's include paths, this
// include must not be found (layers.undeclared_include_fails expects the compiler to fail).
#include "kern/cuda/cuda.hpp"
int main() { return 0; }
