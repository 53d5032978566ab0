#!/usr/bin/env bash
# scale.sh OUTDIR NODES...: the scale ladder of docs/benchmarks.md ("How cost
# grows with work"). For each node count it runs gen, partition (10,000
# parts), profile, plan and one training epoch (partition batches, about 20
# batches of 1000 training nodes, layer-wise evaluation after it) on a
# generated graph of degree 20 and 128 float32 features. Every step runs in
# its own memory cgroup of LIMIT (default 2GiB) through `ssdgnn bench capped`
# after the page cache is dropped, so the "read" it prints is what the step
# read from the disk; each step's JSON report goes to OUTDIR/NODES-STEP.json. The log goes to OUTDIR/scale.log.
#   LIMIT=2GiB BIN=bin/ssdgnn bench/scale.sh /data/scale 2700000 5400000 20000000
set -u
out=$1; shift
bin=${BIN:-bin/ssdgnn}
limit=${LIMIT:-2147483648}
mkdir -p "$out"
log="$out/scale.log"
step() {
  local n=$1 name=$2; shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "scale: cannot drop the page cache" >>"$log"
  echo "=== nodes $n step $name: $*" >>"$log"
  "$bin" bench capped --limit "$limit" --report "$out/$n-$name.json" -- "$@" >>"$log" 2>&1
  echo "exit $?" >>"$log"
}
for n in "$@"; do
  d="$out/g$n"
  tf=$(awk -v n="$n" 'BEGIN{printf "%.6f", 20000/n}')
  vf=$(awk -v n="$n" 'BEGIN{printf "%.6f", 2000/n}')
  step "$n" gen "$bin" gen "$d" --nodes "$n" --avg-degree 20 --feat-dim 128 --classes 16 \
    --train-frac "$tf" --valid-frac "$vf" --test-frac "$vf" --seed 7 --force --quiet
  step "$n" partition "$bin" partition "$d" --parts 10000 --force --quiet
  step "$n" profile "$bin" profile "$d" --quiet
  step "$n" plan "$bin" plan "$d" --mem "$limit"
  step "$n" train "$bin" train "$d" --epochs 1 --plan "$d/profile/default/plan.json" \
    --checkpoint "$out/ckpt-$n" --json --quiet
done
