#!/usr/bin/env bash
# Session 41, the short form of s41a.sh for a call with little device time left: the key-major decode
# attention's GPU tests, its timing beside the production kernels and kern bench with the flag and
# without; no servers, no ncu (s40e.sh with SERVE=0 NCU_UNTIL=0).
# Run (carry [".devrun"]): bash docs/measurements/s41-2026-12-07/s41b.sh $OUT
SERVE=0 NCU_UNTIL=0 exec bash "$(dirname "$0")/../s40-2026-12-07/s40e.sh" "$@"
