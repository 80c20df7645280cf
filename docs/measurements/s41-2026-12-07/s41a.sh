#!/usr/bin/env bash
# Session 41, device call: session 40's s40e.sh (the key-major decode attention: its float64 and
# batch-invariance checks, timing beside the production kernels, kern bench and kern serve at
# concurrency 64 with --decode-attn-key-major and without, ncu on the two warp kinds), without its
# repeat server and with ncu only before 400 s (device time was short).
# Run (carry [".devrun"], after bash scripts/dev/pack.sh build .devrun/pack.txz):
#   bash docs/measurements/s41-2026-12-07/s41a.sh $OUT
REPEAT=0 NCU_UNTIL=400 exec bash "$(dirname "$0")/../s40-2026-12-07/s40e.sh" "$@"
