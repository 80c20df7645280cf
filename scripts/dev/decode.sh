#!/usr/bin/env bash
# GPU round of the split-KV decode attention (kernels/attention.cu, kern_attn_decode_*): its
# correctness and repeatability tests, the composed pipeline test that ends in a decode step, then
# its timings (PerfGpu.DecodeAttention*: per-layer us, KV GB/s, ratio to cudaMemcpy), within 120 s.
# Usage (repo root): bash scripts/dev/decode.sh <build dir> <out dir>   -> <out dir>/decode.log
. "$(dirname "$0")/common.sh"
dev_round decode out "$@"
dev_kernel_tests
{
  echo "decode: $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null | head -1)"
  sha256sum "$KERN_KERNELS_DIR"/attention.fatbin
} >>"$log" 2>&1
timeout 60 "$exe" --gtest_filter='AttnDecodeGpu.*:PipelineGpu.*' 2>&1 | tee -a "$log" | grep -v '^\[figure\]' | tail -40
echo "decode: correctness exit ${PIPESTATUS[0]} at $(date -u +%FT%TZ)" | tee -a "$log"
timeout 50 "$exe" --gtest_filter='PerfGpu.DecodeAttention*' 2>&1 | tee -a "$log" | tail -80
echo "decode: perf exit ${PIPESTATUS[0]} at $(date -u +%FT%TZ)" | tee -a "$log"
