#!/usr/bin/env bash
# Runs the whole GPU suite on a GPU machine from a build made elsewhere (e.g. on a machine
# without a GPU): every ctest test labelled `gpu` (tests/gpu/*), with output teed to a log.
# The last line is the summary: "gpu suite: N passed, M failed (<machine>)".
#
# Usage: scripts/gpu-tests.sh [build dir (default ${KERN_BUILD_DIR:-build})] [log file]
# The log defaults to ${KERN_GPU_LOG:-<build dir>/gpu-tests.log}. Extra ctest arguments can
# be passed in KERN_CTEST_ARGS (e.g. "-R RuntimeGpu").
# The timing reports (PerfGpu*, PerfGpuGemm*: they print figures and assert nothing about speed) take
# about half the suite's time; they run only with KERN_GPU_PERF=1, and the summary line says so.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)
build=${1:-${KERN_BUILD_DIR:-build}}
log=${2:-${KERN_GPU_LOG:-$build/gpu-tests.log}}
mkdir -p "$(dirname "$log")"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  say "gpu-tests: no build at $build (build first: scripts/build.sh, then carry the build dir here)"
  say "gpu suite: 0 passed, 0 failed (no build)"
  exit 1
fi

# ctest files and compiled-in fixture paths name the source tree where the build was made.
# If that path does not exist here, point it at this checkout.
src_then=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -n "$src_then" ] && [ "$src_then" != "$root" ] && [ ! -e "$src_then" ]; then
  mkdir -p "$(dirname "$src_then")" && ln -s "$root" "$src_then" && say "gpu-tests: linked $src_then -> $root"
fi

# gtest test lists were discovered where the build was made; the ctest include files name
# that machine's CMake module dir. Keep the lists fresh (no rediscovery) and, if the module
# dir is absent here, point it at this machine's CMake modules.
find "$build/" -name '*_tests.cmake' -exec touch {} + 2>/dev/null
mod_then=$(sed -n 's/.*include("\(.*\)\/GoogleTestAddTests.cmake").*/\1/p' $(find "$build/" -name '*_include.cmake' | head -1) 2>/dev/null | head -1)
if [ -n "$mod_then" ] && [ ! -e "$mod_then" ]; then
  mod_here=$(dirname "$(find / -name GoogleTestAddTests.cmake -path '*Modules*' 2>/dev/null | head -1)")
  if [ -n "$mod_here" ] && [ "$mod_here" != "." ]; then
    mkdir -p "$(dirname "$mod_then")" && ln -s "$mod_here" "$mod_then" && say "gpu-tests: linked $mod_then -> $mod_here"
  fi
fi

# cuBLASLt / cuBLAS: use the system's, else the CUDA toolkit's or a pip wheel's.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.13'; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import sys,glob; print(" ".join(p for s in sys.path for p in glob.glob(s+"/nvidia/cu13/lib")+glob.glob(s+"/nvidia/cublas/lib")))' 2>/dev/null); do
    if [ -e "$d/libcublasLt.so.13" ]; then
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      say "gpu-tests: cuBLASLt from $d"
      break
    fi
  done
fi

machine=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
[ -n "$machine" ] || machine="no nvidia-smi"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
say "gpu-tests: $(date -u +%FT%TZ) on $(hostname): ${ngpu} GPU(s): $machine"
say "gpu-tests: build $build, log $log"

perf_args=(); perf_note=""
if [ "${KERN_GPU_PERF:-0}" != 1 ]; then
  perf_args=(-E '^PerfGpu')
  nperf=$(ctest --test-dir "$build" -N -L gpu -R '^PerfGpu' 2>/dev/null | sed -n 's/^Total Tests: //p')
  perf_note="; ${nperf:-0} timing reports not run (KERN_GPU_PERF=1 runs them)"
fi
# shellcheck disable=SC2086
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 900 "${perf_args[@]}" ${KERN_CTEST_ARGS:-} 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}

summary=$(grep -E '[0-9]+% tests passed' "$log" | tail -1)
total=$(echo "$summary" | sed -n 's/.*out of \([0-9]*\).*/\1/p')
failed=$(echo "$summary" | sed -n 's/.*, \([0-9]*\) tests\{0,1\} failed out of.*/\1/p')
[ -n "$failed" ] || failed=0
if [ -z "$total" ]; then
  say "gpu suite: 0 passed, 0 failed (no gpu tests ran; ctest exit $rc) ($machine)"
  exit 1
fi
say "gpu suite: $((total - failed)) passed, $failed failed ($machine)$perf_note"
[ "$failed" -eq 0 ] && [ "$rc" -eq 0 ]
