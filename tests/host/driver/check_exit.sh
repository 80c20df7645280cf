#!/bin/sh
# check_exit.sh KERN CODE FRAGMENT ARGS...: runs KERN ARGS, expects exit CODE and FRAGMENT in stderr.
kern=$1; code=$2; fragment=$3; shift 3
err=$("$kern" "$@" 2>&1 >/dev/null); rc=$?
echo "$err"
if [ "$rc" -ne "$code" ]; then echo "expected exit $code, got $rc"; exit 1; fi
case "$err" in *"$fragment"*) exit 0 ;; esac
echo "stderr lacks: $fragment"; exit 1
