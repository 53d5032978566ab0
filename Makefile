# ssdgnn — see README.md. Every target works on a fresh machine with Go.
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := bin/ssdgnn
DEMO    := demo-data
# Packages that run goroutines: tested with the race detector, and with the
# invariants assertions on (internal/invariants).
RACE_PKGS := ./storage/... ./internal/... ./partition/... ./featurecache/... ./histcache/... ./sample/... ./neighborcache/... ./kernels/... ./planner/... ./train/...

.PHONY: all build test test-peers test-scripts vet fmt-check fuzz-short demo bench bench-import bench-gen bench-storage bench-partition bench-kernels bench-train bench-ooc clean build-cuda vet-cuda ptx ptx-check test-cuda bench-cuda gpu-bundle

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ssdgnn

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test: fmt-check vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race -tags invariants -timeout 30m $(RACE_PKGS)
	@$(MAKE) --no-print-directory test-peers
	@$(MAKE) --no-print-directory test-scripts

# The PyG peer's own sampler (bench/peers/sampler.py) against brute force;
# needs a python3 with NumPy (Debian: python3-numpy), skipped without one.
PY_NUMPY := $(shell for p in python3 /usr/bin/python3; do $$p -c 'import numpy' >/dev/null 2>&1 && { echo $$p; break; }; done)
test-peers:
	@if [ -z "$(PY_NUMPY)" ]; then echo "test-peers: no python3 with NumPy, skipped"; else $(PY_NUMPY) -B bench/peers/sampler_test.py; fi

# The shell scripts parse, and the GPU checklist's dataset and peer phases
# run end to end on the CPU build with a tiny graph (the PyG peer fails
# at once without torch and is retried at the next size; ssdgnn must then
# train in the last one): a GPU session's scarce minutes are not the
# place to find a broken script.
test-scripts: build
	@for f in tools/*.sh bench/*.sh; do bash -n $$f || exit 1; done
	@d=$$(mktemp -d) && \
	if OUT=$$d/out RES=$$d/res W=$$d/w B=$(abspath $(BIN)) GPUDEV=cpu PEER_NODES=40000 \
		PEER_CAPS="402653184 536870912" PYG_S=60 CAP_S=120 \
		bash tools/gpu-checklist.sh bg-oocdata wait peer > $$d/log 2>&1 && \
		grep -q '^ssdgnn-536870912 rc=0' $$d/res/steps.txt; \
	then echo "test-scripts: ok"; rm -rf $$d; else cat $$d/log; rm -rf $$d; exit 1; fi

# Each corrupt-data fuzzer for FUZZTIME (make test runs only their seeds).
FUZZTIME ?= 30s
fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzParseCheckpoint$$' -fuzztime $(FUZZTIME) ./train/
	$(GO) test -run '^$$' -fuzz '^FuzzCorrupt$$' -fuzztime $(FUZZTIME) ./cmd/ssdgnn/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./storage/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./partition/
	$(GO) test -run '^$$' -fuzz '^FuzzReadFrom$$' -fuzztime $(FUZZTIME) ./histcache/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeArray$$' -fuzztime $(FUZZTIME) ./planner/
	$(GO) test -run '^$$' -fuzz '^FuzzParseMeta$$' -fuzztime $(FUZZTIME) ./planner/
	$(GO) test -run '^$$' -fuzz '^FuzzReadPlan$$' -fuzztime $(FUZZTIME) ./planner/

# The main job on embedded data, on the CPU, in a few minutes: generate a
# graph bigger than the memory budget it is then given, partition it, report
# its redundancy ratio, then profile, plan and train a 3-layer GraphSAGE with
# partition batches and all three caches inside --mem. Cora shows accuracy
# on real data.
DEMO_MEM ?= 80MiB
demo: build
	@mkdir -p $(DEMO)
	$(BIN) gen $(DEMO)/synth --nodes 300000 --avg-degree 20 --feat-dim 64 --classes 8 --seed 1 --force
	$(BIN) info $(DEMO)/synth
	$(BIN) validate $(DEMO)/synth
	$(BIN) partition $(DEMO)/synth --parts 300 --force
	$(BIN) rr $(DEMO)/synth --fanouts 5,5,5 --batch-size 250 --plot $(DEMO)/rr.png
	$(BIN) train $(DEMO)/synth --model sage --layers 3 --hidden 64 --fanouts 5,5,5 --batch-size 250 \
		--mem $(DEMO_MEM) --epochs 3 --seed 1 --plot $(DEMO)/train.png
	$(BIN) import ogb testdata/cora $(DEMO)/cora --force
	$(BIN) train $(DEMO)/cora --model gcn --layers 2 --hidden 64 --fanouts -1,-1 --batch-size 140 \
		--normalize-features --epochs 100 --seed 1

bench: bench-import bench-gen bench-storage

# End to end under a real memory cgroup (root): a 2.2 GiB dataset generated,
# and a 618 MB edge list imported, each with --mem 64MiB under an 80 MiB cap
# (--mem bounds the whole process; the rest is for the page cache).
BENCH_DIR ?= /tmp/ssdgnn-bench
bench-storage: build
	@mkdir -p $(BENCH_DIR)
	$(BIN) bench capped --limit 80MiB -- $(BIN) gen $(BENCH_DIR)/g4m --nodes 4000000 --avg-degree 20 --feat-dim 128 --mem 64MiB --seed 1 --force
	@[ -f $(BENCH_DIR)/edges40m.txt ] || awk 'BEGIN{srand(1); for(i=0;i<40000000;i++) printf "%d %d\n", int(rand()*4000000), int(rand()*4000000)}' > $(BENCH_DIR)/edges40m.txt
	$(BIN) bench capped --limit 80MiB -- $(BIN) import edgelist $(BENCH_DIR)/edges40m.txt $(BENCH_DIR)/el40m --mem 64MiB --force

bench-import:
	$(GO) test -run '^$$' -bench 'Import' -benchtime 1x ./storage/importer/

bench-gen:
	$(GO) test -run '^$$' -bench 'Generate' -benchtime 1x ./storage/synth/

# Epoch time and its Sa/Ga/Tr/Co breakdown: random + no cache vs partition +
# planned caches + history, at 2 and 3 layers (docs/train.md).
bench-train:
	$(GO) test -run '^$$' -bench 'Evaluate$$' -benchtime 5x -cpu 1 ./train/
	$(GO) test -v -run '^$$' -bench 'TrainConfigs' -benchtime 1x -timeout 60m ./train/ -args -bench-nodes 200000 -bench-dir $(BENCH_DIR)

# The out-of-core benchmark (docs/ooc.md): every configuration as a child in
# a memory cgroup; report under bench/results/<timestamp>/. Needs root.
bench-ooc: build
	$(BIN) bench ooc --check-resume --check-small-limit $(OOC_FLAGS)

# GFLOP/s of the CPU backend's GEMM kernels on the models' shapes, its
# aggregation, the row adds of layer-wise inference's push,
# and one GAT layer (docs/benchmarks.md, "CPU GEMM kernels", "Row adds",
# "GAT on the CPU").
bench-kernels:
	$(GO) test -run '^$$' -bench 'GEMM' -benchtime 20x ./kernels/cpu/
	$(GO) test -run '^$$' -bench 'Aggregate' -benchtime 300ms ./kernels/cpu/
	$(GO) test -run '^$$' -bench 'GAT' -benchtime 20x ./kernels/cpu/
	$(GO) test -run '^$$' -bench 'AddRows' ./internal/f32/

bench-partition:
	$(GO) test -run '^$$' -bench 'Partition|LookupByFilterSize' -benchtime 1x -timeout 60m ./partition/

# --- CUDA (docs/cuda.md). The cuda-tagged binary links libcuda.so.1 only and
# exits at start on a machine without a GPU (gorgonia.org/cu's init).
build-cuda: vet-cuda
	$(GO) build -tags cuda -o bin/ssdgnn-cuda ./cmd/ssdgnn

# Compile check of every cuda-tagged file, installing the CUDA 11.8 headers
# first when /usr/include/cuda.h is missing.
vet-cuda:
	@[ -f /usr/include/cuda.h ] || tools/install-cuda-dev.sh
	$(GO) build -tags cuda ./...
	$(GO) vet -tags cuda ./...
	$(GO) test -tags cuda -c -o /dev/null ./kernels/cuda/gputest/

# Regenerate the committed PTX (needs nvcc: tools/install-cuda-dev.sh --toolkit).
ptx:
	nvcc -arch=compute_80 -ptx -o kernels/cuda/kernels.ptx kernels/cuda/kernels.cu

# Fail if the committed PTX is stale (nvcc output is deterministic).
ptx-check:
	nvcc -arch=compute_80 -ptx -o /tmp/ssdgnn-kernels.ptx kernels/cuda/kernels.cu
	cmp /tmp/ssdgnn-kernels.ptx kernels/cuda/kernels.ptx

# GPU tests: skipped unless a device is visible (the tagged test binary
# exits at init without one).
test-cuda:
	@if ! nvidia-smi -L >/dev/null 2>&1; then echo "test-cuda: no GPU, skipped"; exit 0; fi; \
	$(GO) test -tags cuda -count=1 -v ./kernels/cuda/gputest/ ./kernels/cuda/

bench-cuda:
	@nvidia-smi -L
	$(GO) test -tags cuda -run '^$$' -bench . -benchtime 2s ./kernels/cuda/gputest/

# The GPU machine has no Go toolchain: build here everything the GPU
# checklist runs (docs/cuda.md) and carry bin/ there.
gpu-bundle: build-cuda
	$(GO) test -c -tags cuda -o bin/gputest.test ./kernels/cuda/gputest/
	$(GO) test -c -race -tags cuda -o bin/gputest-race.test ./kernels/cuda/gputest/
	$(GO) test -c -tags cuda -o bin/cudapkg.test ./kernels/cuda/

clean:
	rm -rf bin $(DEMO)
