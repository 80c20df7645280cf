#!/usr/bin/env bash
# One device round for a change that touches the whole tree: the GPU suite, the HF gate on the
# shapes given, and transformers' own RoPE source (the reference the yarn table follows), from a
# build made elsewhere. Usage (repo root): bash scripts/dev/check.sh <build dir> <out dir> "<shapes>"
# -> <out dir>/gpu-tests.log, gate.log, gate-report.json, rope-source.txt
set -uo pipefail
build=${1:-build}
out=${2:-out}
shapes=${3:-"tiny 4b"}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
python3 - >"$out/rope-source.txt" 2>&1 <<'PY'
import inspect, transformers, transformers.modeling_rope_utils as m
print("transformers", transformers.__version__)
print(inspect.getsource(m._compute_yarn_parameters))
PY
if [ "${SKIP_SUITE:-0}" != 1 ]; then
  timeout "${SUITE_TIMEOUT:-480}" bash scripts/gpu-tests.sh "$build" "$out/gpu-tests.log" >/dev/null 2>&1
  tail -3 "$out/gpu-tests.log"
  grep -E "^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|Not Run)" "$out/gpu-tests.log" | head -20
fi
bash scripts/gate/make_bundle.sh "$build" /tmp/gate-bundle >/dev/null
WORK=/tmp/kern-gate OUT="$out" SHAPES="$shapes" timeout "${GATE_TIMEOUT:-280}" \
  bash scripts/gate/run_gate.sh /tmp/gate-bundle >"$out/gate.log" 2>&1
echo "gate exit $?"
grep -E "PASS|FAIL|mean|mismatch|shape|failed" "$out/gate.log" | tail -40
