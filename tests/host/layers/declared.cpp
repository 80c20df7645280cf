// Control for layers.undeclared_include_fails: the driver declares core, so this compiles.
#include "kern/core/manifest.hpp"
int main() { return 0; }
