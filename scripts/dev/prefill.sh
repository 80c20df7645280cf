#!/usr/bin/env bash
# GPU round of the tensor-core prefill attention (kernels/attention_prefill.cu): its correctness,
# row-invariance and repeatability tests, then its timings (PerfGpu.PrefillMma), within 120 s.
# Usage (repo root): bash scripts/dev/prefill.sh <build dir> <out dir>   -> <out dir>/prefill.log
. "$(dirname "$0")/common.sh"
dev_round prefill out "$@"
dev_kernel_tests
{
  echo "prefill: $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  ls -l "$KERN_KERNELS_DIR"/attention_prefill.fatbin
  sha256sum "$KERN_KERNELS_DIR"/attention_prefill.fatbin
} >>"$log" 2>&1
timeout 100 "$exe" --gtest_filter='AttentionPrefillMmaGpu.*:PerfGpu.PrefillMma*' 2>&1 | tee -a "$log" | tail -60
echo "prefill: exit ${PIPESTATUS[0]} at $(date -u +%FT%TZ)" | tee -a "$log"
