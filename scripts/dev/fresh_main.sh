#!/usr/bin/env bash
# The README's main job as a new user runs it: a copy of the tree's files (tracked and
# untracked-not-ignored; no build outputs, no .deps) in a fresh folder, then `bash scripts/main.sh`.
# Usage (repo root): bash scripts/dev/fresh_main.sh <out dir>  -> <out dir>/main-job.log
set -uo pipefail
out=${1:?usage: fresh_main.sh <out dir>}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fresh=$(mktemp -d /tmp/kern-fresh.XXXXXX)
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    if [ -L "$f" ] && [ -d "$f" ]; then continue; fi
    if [ -e "$f" ]; then printf '%s\0' "$f"; fi
  done | tar --null -T - -cf - | tar -xf - -C "$fresh"
cd "$fresh" || exit 1
s=$(date +%s)
bash scripts/main.sh >"$out/main-job.log" 2>&1
rc=$?
echo "main job: rc $rc in $(($(date +%s) - s)) s (fresh copy at $fresh)" | tee -a "$out/main-job.log"
