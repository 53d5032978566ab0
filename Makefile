# ssdgnn — see README.md. Every target works on a fresh machine with Go.
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := bin/ssdgnn
DEMO    := demo-data
# Packages that run goroutines: tested with the race detector.
RACE_PKGS := ./storage/... ./internal/extsort/... ./partition/... ./featurecache/... ./histcache/...

.PHONY: all build test vet fmt-check demo bench bench-import bench-gen bench-partition clean

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
	$(GO) test -count=1 -race $(RACE_PKGS)

# The main job on embedded data: generate a graph, import the bundled Cora,
# and show both.
demo: build
	@mkdir -p $(DEMO)
	$(BIN) gen $(DEMO)/synth --nodes 100000 --avg-degree 20 --feat-dim 64 --classes 8 --seed 1 --force
	$(BIN) info $(DEMO)/synth
	$(BIN) validate $(DEMO)/synth
	$(BIN) import ogb testdata/cora $(DEMO)/cora --force
	$(BIN) info $(DEMO)/cora

bench: bench-import bench-gen

bench-import:
	$(GO) test -run '^$$' -bench 'Import' -benchtime 1x ./storage/importer/

bench-gen:
	$(GO) test -run '^$$' -bench 'Generate' -benchtime 1x ./storage/synth/

bench-partition:
	$(GO) test -run '^$$' -bench 'Partition' -benchtime 1x -timeout 60m ./partition/

clean:
	rm -rf bin $(DEMO)
