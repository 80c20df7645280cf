#!/usr/bin/env bash
# Session 39, device call 5 (the H200 of calls 3-4, still warm): issue 17's load table again with the
# ceilings call 4 measured on this machine (s39c.sh's s37c.sh step lost its kern bench output to a
# missing directory, so its rooflines used the script's fallback of 3,000 GB/s): kern serve defaults
# (--max-seqs now 256 by default), then --no-batch-invariant at concurrency 64.
# Run (carry [".devrun"]): COPY=4253 PRE=69082 bash docs/measurements/s39-2026-12-07/s39d.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs39d; R=$out/results.log; mkdir -p $L
root=$(pwd -P); export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
echo "ceilings (call 4, this machine): copy $COPY GB/s, prefill $PRE tok/s" >> $R
serve() {
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $1 "${@:2}" > $L/serve-$1.out 2> $L/serve-$1.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$1/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server :$1 ${*:2} ready after $(el) s" >> $R
}
load() {
  timeout "$T" python3 bench/serve_load.py --url http://127.0.0.1:$1 --model m4b --model-dir /tmp/m4b --copy-gbps $COPY --prefill-tok-s $PRE --input-len 1024 --output-len 128 "${@:3}" > $L/$2.log 2>&1; echo "load $2 rc $? ($(el) s)" >> $R
  grep -v "^json" $L/$2.log >> $R; cp $L/$2.log $out/
}
stop() { kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; grep -E "\[error\]" $L/serve-$1.err | tail -3 >> $R; }
serve 8081
T=240 load 8081 load-table --concurrency 1 8 32 64 128 256 --rate 16 --prefix-test 14000
stop 8081
serve 8082 --no-batch-invariant
T=80 load 8082 load-noinv --concurrency 64
stop 8082
echo "total $(el) s" >> $R
cat $R
