#!/usr/bin/env bash
# gpu-checklist.sh PHASE...: docs/cuda.md's GPU checklist, the GPU-vs-CPU
# training comparison and the PyG peer, on a GPU machine with no Go
# toolchain. Build bin/ first on the development machine (make gpu-bundle),
# carry bin/ and run from the repository root. Timeouts and sizes are set
# by environment variables named below (BUDGET, MORE_STEPS, BENCH,
# BENCHTIME, SAN_S, RACE_S, BENCH_S, DIAG_SAN_S, KSEED, PEER_*, PYG_*,
# PART_S, CAP_S, RES).
#
# Phases, run in the order given:
#   env      nvidia-smi, tools present, PyG's sampling extensions
#   core     checklist steps 2, 3 (seed 1), 4 and 9's tests
#   more     steps 3 (seed 2), 5, 6 and 7 (MORE_STEPS: seed2 race memcheck
#            racecheck bench), each skipped once BUDGET seconds have passed;
#            step 7 runs each pattern of BENCH (space-separated) on its own
#   gat      GAT on the generated graph, cpu and cuda
#   zc       zero-copy on/off on the generated graph (bit-identical losses)
#   conf     the conformance suite once (KSEED)
#   train    Cora and a 200k-node generated graph, --device cpu and cuda,
#            same seed; zero-copy on/off on the generated graph
#   diag     the zero-copy training path under blocking launches and
#            compute-sanitizer
#   oocdata  bench ooc's dataset recipe at PEER_NODES nodes, partitioned,
#            probed
#   peer     PyG+mmap, then ssdgnn-cuda, on that dataset, each in a fresh
#            memory cgroup: the first size of PEER_CAPS that PyG runs in
#   ceil     the card's float32 matmul and copy ceilings, through torch
#   bg-NAME  phase NAME in the background; wait: wait for those
#
# Logs go to $OUT (default /tmp/gpu-out): checklist.log, and results.tgz
# with every --json report. Nothing here changes the card's settings.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
RES=${RES:-$(mktemp -d)}
mkdir -p "$RES"
W=${W:-/tmp/gpu-work}
mkdir -p "$W"
exec > >(tee -a "$OUT/checklist.log") 2>&1
exec 3>&1
T0=$(date +%s)
say() { echo "=== [$(( $(date +%s) - T0 ))s] $*" >&3; }
# run NAME SECONDS CMD...: one step under a timeout, its status logged.
run() {
  local name=$1 secs=$2; shift 2
  say "$name: $*"
  local s=$(date +%s)
  timeout -k 5 "$secs" "$@"
  local rc=$?
  say "$name: rc $rc in $(( $(date +%s) - s ))s"
  echo "$name rc=$rc s=$(( $(date +%s) - s ))" >> "$RES/steps.txt"
  return $rc
}
pack() { tar -C "$RES" -czf "$OUT/results.tgz" . ; }
trap pack EXIT

B=${B:-bin/ssdgnn-cuda}
GPUDEV=${GPUDEV:-cuda}
G=${G:-bin/gputest.test}

phase_env() {
  say env
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
  nproc; free -g | head -2; df -h /tmp | tail -1
  cat /proc/self/cgroup; ls /sys/fs/cgroup | head -30
  command -v compute-sanitizer nvcc python3 /usr/bin/time
  python3 - <<'EOF'
import torch, torch_geometric, torch_geometric.typing as t
print("torch", torch.__version__, "pyg", torch_geometric.__version__, "pyg-lib", t.WITH_PYG_LIB, "torch-sparse", t.WITH_TORCH_SPARSE)
EOF
}

# over: true once BUDGET seconds (default: none) have passed; later
# optional steps are skipped and say so.
over() {
  case " ${MORE_STEPS:-seed2 race memcheck racecheck bench} " in *" $1 "*) ;; *) say "not asked for (MORE_STEPS): $1"; return 0;; esac
  if [ $(( $(date +%s) - T0 )) -ge "${BUDGET:-999999}" ]; then say "skipped (budget ${BUDGET}s spent): $*"; return 0; fi
  return 1
}

phase_core() {
  run step2-device 60 $G -test.v -test.count=1 -test.run '^TestDevice$'
  run step3-conformance-seed1 150 $G -test.v -test.count=1 -test.run '^TestConformance$' -kerneltest.seed=1 -seed=1 > "$RES/conf1.log" 2>&1
  grep -E -- '--- FAIL|^FAIL|^ok|^PASS|panic|_test.go' "$RES/conf1.log" | head -60
  run step4-gathers 90 $G -test.v -test.count=1 -test.run 'TestGatherHost|TestDeviceRange|TestScatterMatchesCPU|TestCloseReleases|TestPoolReuse|TestMaxBytes|Example' -seed=3 > "$RES/step4.log" 2>&1
  grep -E -- '--- |^FAIL|^ok|^PASS|panic' "$RES/step4.log" | head -40
  run step9-hostgatherer 90 bin/cudapkg.test -test.v -test.count=1 -test.run 'TestHostGathererInterface' > "$RES/step9.log" 2>&1
  run step9-conformance-hostgather 90 $G -test.v -test.count=1 -test.run 'TestConformance/.*/HostGather' >> "$RES/step9.log" 2>&1
  grep -E -- '--- |^FAIL|^ok|^PASS|panic' "$RES/step9.log" | head -30
}

phase_conf() {
  run conformance-seed${KSEED:-5} 150 $G -test.v -test.count=1 -test.run '^TestConformance$' -kerneltest.seed=${KSEED:-5} -seed=${KSEED:-5} > "$RES/conf${KSEED:-5}.log" 2>&1
  grep -E -- '--- FAIL|^FAIL|^ok|^PASS|panic|_test.go|FreeAfterUse' "$RES/conf${KSEED:-5}.log" | head -40
}

phase_more() {
  over seed2 || { run step3-conformance-seed2 150 $G -test.count=1 -test.run '^TestConformance$' -kerneltest.seed=2 -seed=2 > "$RES/conf2.log" 2>&1
    grep -E -- '--- FAIL|^FAIL|^ok|^PASS|panic|_test.go' "$RES/conf2.log" | head -40; }
  [ -x bin/gputest-race.test ] && { over race || { run step5-race ${RACE_S:-120} bin/gputest-race.test -test.count=1 -seed=4 > "$RES/step5.log" 2>&1
    grep -E -- '--- FAIL|^FAIL|^ok|^PASS|DATA RACE|panic' "$RES/step5.log" | head -20; }; }
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      over $tool || { run step6-$tool ${SAN_S:-90} compute-sanitizer --tool $tool --print-limit 20 $G -test.count=1 -test.run 'TestConformance/default' -kerneltest.seed=1 > "$RES/step6-$tool.log" 2>&1
        tail -6 "$RES/step6-$tool.log"; }
    done
  fi
  # BENCH: space-separated patterns, each its own run under BENCH_S (so a
  # slow one cannot starve the ones after it).
  local pat
  for pat in ${BENCH:-.}; do
    over bench || { run "step7-bench-$pat" ${BENCH_S:-120} $G -test.run '^$' -test.bench "$pat" -test.benchtime ${BENCHTIME:-1s} >> "$RES/step7-bench.log" 2>&1
      grep -E '^Benchmark|FAIL|panic' "$RES/step7-bench.log" | tail -20; }
  done
}

phase_gat() {
  if [ $(( $(date +%s) - T0 )) -ge "${BUDGET:-999999}" ]; then say "skipped (budget ${BUDGET}s spent): gat"; return; fi
  [ -d "$W/synth" ] || synth
  train_pair synth-gat "$W/synth" --model gat --epochs 2 --fanouts 10,10 --batch-size 1000
}

synth() {
  run gen-synth 120 $B gen "$W/synth" --nodes 200000 --avg-degree 20 --feat-dim 128 --classes 16 --seed 1 -q
  run partition-synth 120 $B partition "$W/synth" --parts 100 -q
}

# train_pair NAME DIR FLAGS...: the same training on cpu and cuda.
train_pair() {
  local name=$1 dir=$2; shift 2
  for dev in cpu $GPUDEV; do
    run "train-$name-$dev" 200 $B train "$dir" --device $dev --seed 1 -q --json "$@" > "$RES/$name-$dev.json" 2> "$RES/$name-$dev.err"
    tail -3 "$RES/$name-$dev.err"
  done
  python3 - "$RES/$name-cpu.json" "$RES/$name-$GPUDEV.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("%-5s %-8s %-8s %-8s %-8s %-7s %-7s %-7s %-7s" % ("epoch", "loss cpu", "loss gpu", "val cpu", "val gpu", "wall c", "wall g", "Co c", "Co g"))
for x, y in zip(a["epochs"], b["epochs"]):
    print("%-5d %-8.4f %-8.4f %-8.4f %-8.4f %-7.3f %-7.3f %-7.3f %-7.3f" % (x["epoch"], x["loss"], y["loss"], x.get("valid_acc", -1), y.get("valid_acc", -1), x["wall_s"], y["wall_s"], x["stages"]["compute_s"], y["stages"]["compute_s"]))
print("final valid/test cpu", a["final_valid_acc"], a["final_test_acc"], "cuda", b["final_valid_acc"], b["final_test_acc"], "zero_copy", b.get("zero_copy"))
EOF
}

# zc: zero-copy on and off on the generated graph, whole graph cached.
phase_zc() {
  [ -d "$W/synth" ] || synth
  for zc in on off; do
    run "zerocopy-$zc" 200 $B train "$W/synth" --device $GPUDEV --feat-cache 1GiB --feat-policy degree --epochs 3 --seed 1 --zero-copy $zc -q --json > "$RES/zc-$zc.json" 2> "$RES/zc-$zc.err"
    tail -2 "$RES/zc-$zc.err"
  done
  python3 - "$RES/zc-on.json" "$RES/zc-off.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("zero_copy on:", a.get("zero_copy"), "off:", b.get("zero_copy"))
for x, y in zip(a["epochs"], b["epochs"]):
    print(x["epoch"], "loss", x["loss"], y["loss"], "same" if x["loss"] == y["loss"] and x.get("valid_acc") == y.get("valid_acc") else "DIFFER",
          "zc rows", x.get("input_rows_zero_copy"), "wall", round(x["wall_s"], 3), round(y["wall_s"], 3),
          "transfer", round(x["stages"]["transfer_s"], 3), round(y["stages"]["transfer_s"], 3),
          "gather", round(x["stages"]["gather_s"], 3), round(y["stages"]["gather_s"], 3))
EOF
}

phase_train() {
  run import-cora 60 $B import ogb testdata/cora "$W/cora" -q
  train_pair cora-gcn "$W/cora" --model gcn --fanouts -1,-1 --normalize-features --epochs 100 --eval-every 10
  train_pair cora-sage "$W/cora" --epochs 30
  synth
  train_pair synth-sage "$W/synth" --epochs 10 --layers 3 --fanouts 10,10,10 --batch-size 1000
  phase_zc
  # The peer script on the small graph (no cgroup): does it run here?
  run peer-smoke 120 env PYTHONUNBUFFERED=1 python3 bench/peers/pyg_mmap.py "$W/synth" --epochs 1 --fanouts 10,10,10 --batch-size 1000 --hidden 128 > "$RES/peer-smoke.json" 2> "$RES/peer-smoke.err"
  cat "$RES/peer-smoke.json"; tail -5 "$RES/peer-smoke.err"
}

# diag: the zero-copy training path's failure (run 1: "cuda: sync:
# IllegalAddress"), with launches made blocking so the failing operation is
# the one reported, then under compute-sanitizer, then narrowed down.
phase_diag() {
  [ -d "$W/synth" ] || synth
  local zc=(train "$W/synth" --device cuda --feat-policy degree --epochs 1 --seed 1 --zero-copy on -q --json)
  run diag-blocking 90 env CUDA_LAUNCH_BLOCKING=1 $B "${zc[@]}" --feat-cache 1GiB -v > "$RES/diag-blocking.json" 2> "$RES/diag-blocking.err"
  grep -v '^{' "$RES/diag-blocking.err" | tail -15
  run diag-partial-cache 60 $B "${zc[@]}" --feat-cache 32MiB > "$RES/diag-partial.json" 2> "$RES/diag-partial.err"
  tail -2 "$RES/diag-partial.err"
  run diag-no-dropout 60 $B "${zc[@]}" --feat-cache 1GiB --dropout 0 > "$RES/diag-nodrop.json" 2> "$RES/diag-nodrop.err"
  tail -2 "$RES/diag-nodrop.err"
  run diag-no-hist 60 $B "${zc[@]}" --feat-cache 1GiB --no-hist > "$RES/diag-nohist.json" 2> "$RES/diag-nohist.err"
  tail -2 "$RES/diag-nohist.err"
  run diag-in-flight-1 60 $B "${zc[@]}" --feat-cache 1GiB --in-flight 1 > "$RES/diag-if1.json" 2> "$RES/diag-if1.err"
  tail -2 "$RES/diag-if1.err"
  run diag-memcheck ${DIAG_SAN_S:-60} compute-sanitizer --tool memcheck --print-limit 10 $B "${zc[@]}" --feat-cache 1GiB > "$RES/diag-memcheck.json" 2> "$RES/diag-memcheck.err"
  grep -v '^{' "$RES/diag-memcheck.json" | head -40; tail -5 "$RES/diag-memcheck.err"
}

# oocdata: bench ooc's dataset recipe at PEER_NODES nodes (default the
# 3 GiB one, 5,368,709 nodes): train 0.25 % of nodes, valid and test half
# that each, 50 training nodes a part; then the disk probe (device.json).
phase_oocdata() {
  local n=${PEER_NODES:-5368709}
  local parts=$(( n / 400 / 50 ))
  run gen-ooc 200 $B gen "$W/ooc" --nodes "$n" --avg-degree 20 --feat-dim 128 --classes 16 --train-frac 0.0025 --valid-frac 0.00125 --test-frac 0.00125 --seed 1 -q
  run partition-ooc ${PART_S:-300} $B partition "$W/ooc" --parts "$parts" -q
  run probe-ooc 90 $B probe "$W/ooc" -q
  cat "$W/ooc/device.json"; du -sh "$W/ooc" "$W/ooc/features.npy"
}

# capped NAME LIMIT SECONDS CMD...: CMD in a fresh memory cgroup of LIMIT bytes,
# page cache dropped first; the cgroup's report goes to $RES/NAME-cap.json.
capped() {
  local name=$1 lim=$2 secs=$3; shift 3
  sync; echo 3 > /proc/sys/vm/drop_caches
  run "$name" "$secs" $B bench capped --limit "$lim" --allow-uncapped --report "$RES/$name-cap.json" -- "$@"
}

# peer: PyG+mmap and ssdgnn-cuda on the oocdata dataset, each in a fresh
# memory cgroup of the same size. PyG goes first, trying each size of
# PEER_CAPS (bytes) in turn until it is not OOM-killed (every try is kept);
# ssdgnn then trains in the size PyG ran in, with --mem set to it (what a
# bare train in that cgroup takes by default). The model is the peer's:
# SAGE, 3 layers, fanouts 10,10,10, batch 1000, hidden 32, no dropout
# (PyG's GraphSAGE applies none), sampled evaluation of the valid set last.
phase_peer() {
  [ -f "$W/ooc/dataset.json" ] || phase_oocdata
  local common=(--fanouts 10,10,10 --batch-size 1000 --hidden 32 --seed 1)
  local cap= lim rc
  for lim in ${PEER_CAPS:-2147483648 3221225472 4294967296}; do
    capped "pyg-$lim" "$lim" ${PYG_S:-200} env PYTHONUNBUFFERED=1 python3 bench/peers/pyg_mmap.py "$W/ooc" --epochs ${PYG_EPOCHS:-1} "${common[@]}" > "$RES/pyg-$lim.json" 2> "$RES/pyg-$lim.err"
    rc=$?
    cat "$RES/pyg-$lim.json"; tail -4 "$RES/pyg-$lim.err"
    # The summary line is the test: on 2026-11-27 both runs that printed it
    # were killed afterwards (rc 137), the harness hung in v2's
    # memory.reclaim (fixed since: cgroup.ForceEmpty).
    if grep -q '"epoch_s"' "$RES/pyg-$lim.json"; then cap=$lim; [ $rc = 0 ] || say "pyg-$lim: summary printed, then rc $rc"; break; fi
  done
  [ -n "$cap" ] || { say "PyG+mmap ran in none of PEER_CAPS; ssdgnn in the largest"; cap=$lim; }
  capped "ssdgnn-$cap" "$cap" ${CAP_S:-300} $B train "$W/ooc" --device $GPUDEV --mem "$cap" --eval sampled --eval-every ${PEER_EPOCHS:-2} --layers 3 --epochs ${PEER_EPOCHS:-2} --dropout 0 "${common[@]}" -q --json > "$RES/ssdgnn-$cap.json" 2> "$RES/ssdgnn-$cap.err"
  tail -6 "$RES/ssdgnn-$cap.err"
  python3 - "$RES/ssdgnn-$cap.json" <<'EOF2'
import json, sys
a = json.JSONDecoder().raw_decode(open(sys.argv[1]).read())[0]
for e in a["epochs"]:
    print("ssdgnn epoch", e["epoch"], "batches", e["batches"], "wall", round(e["wall_s"], 2), "stages", {k: round(v, 2) for k, v in e["stages"].items()}, "io_read_bytes", e.get("io_read_bytes"), "loss", round(e["loss"], 4), "valid", e.get("valid_acc"))
print("final valid", a.get("final_valid_acc"), "zero_copy", a.get("zero_copy"))
EOF2
}

# ceil: the card's ceilings through torch: a float32 matrix product on the
# CUDA cores (TF32 off), a device-to-device copy (bytes read plus written)
# and a pinned host-to-device copy; each the median of 20 runs after
# warm-up, timed with CUDA events.
phase_ceil() {
  run ceilings 120 env PYTHONUNBUFFERED=1 python3 - <<'EOF'
import torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
def med(f, n=20):
    for _ in range(3): f()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)[n // 2]
for n in (4096, 8192):
    x, y = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    t = med(lambda: x @ y)
    print("fp32 matmul %d^3: %.1f GFLOP/s (%.3f ms)" % (n, 2 * n**3 / t / 1e9, t * 1e3))
src = torch.randn(1 << 28, device="cuda"); dst = torch.empty_like(src)
t = med(lambda: dst.copy_(src))
print("d2d copy 1 GiB: %.1f GB/s (read + write)" % (2 * src.numel() * 4 / t / 1e9))
h = torch.randn(1 << 26).pin_memory(); d = torch.empty(1 << 26, device="cuda")
t = med(lambda: d.copy_(h, non_blocking=True))
print("h2d pinned 256 MiB: %.1f GB/s" % (h.numel() * 4 / t / 1e9))
EOF
}

# A phase named bg-NAME runs in the background; wait waits for those.
# (wait names the pids: a bare wait would wait for the tee above too.)
BG=()
for p in "$@"; do
  case $p in
    bg-*) "phase_${p#bg-}" & BG+=($!) ;;
    wait) [ ${#BG[@]} = 0 ] || wait "${BG[@]}"; BG=() ;;
    *) "phase_$p" ;;
  esac
done
say done
cat "$RES/steps.txt"
