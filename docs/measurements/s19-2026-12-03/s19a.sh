#!/usr/bin/env bash
# Session 19, device round 1: the cuBLASLt choice sweep for batch-invariant decode GEMMs (which
# m_ref serves every m), the engine GPU tests (penalties, seeded sampling among 63 others), and the
# 4B load at concurrency 1 and 64 with the engine's phase split.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
for d in /usr/local/cuda/lib64 $(python3 -c 'import sys,glob; print(" ".join(p for s in sys.path for p in glob.glob(s+"/nvidia/cu13/lib")+glob.glob(s+"/nvidia/cublas/lib")))' 2>/dev/null); do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
done
timeout 240 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='PerfGpuGemm.*:RuntimeGpuGemmInvariance.*' > $out/gemm-sweep.log 2>&1; echo "gemm sweep rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/decode step/,$p' $out/gemm-sweep.log | grep -v "^\[" >> $R
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED" $out/serve-gpu.log | grep -v "first difference" >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
port=8020
build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 > $out/serve.out 2> $out/serve.err &
pid=$!
for i in $(seq 1 300); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
echo "server ready after $(( $(date +%s) - t0 )) s" >> $R
timeout 200 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps 4228 --prefill-tok-s 54700 --input-len 1024 --output-len 128 --concurrency 1 64 > $out/load.log 2>&1; echo "load rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -v "^json" $out/load.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
