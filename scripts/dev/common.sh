# The shared preamble of scripts/dev/*.sh, sourced first thing:
#   . "$(dirname "$0")/common.sh"; dev_round <name> <default out dir> "$@"
# sets -uo pipefail, build (arg 1, default "build"), out (arg 2, created) and log ("$out/<name>.log").
set -uo pipefail
dev_round() {
  local name=$1 default_out=$2
  build=${3:-build}
  out=${4:-$default_out}
  mkdir -p "$out"
  log="$out/$name.log"
}
# For the GPU kernel tests: exe (the test binary) and KERN_KERNELS_DIR (exported, absolute); empties the log.
dev_kernel_tests() {
  : >"$log"
  exe="$build/tests/gpu/kernels/kern_kernels_gpu_test"
  export KERN_KERNELS_DIR
  KERN_KERNELS_DIR=$(cd "$build/kernels" && pwd -P)
}
