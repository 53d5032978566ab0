package ooc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
	"github.com/ssdgnn/ssdgnn/train"
)

// TestCacheShareNamesTheLeast: a --mem-limit too small for the ssdgnn
// configuration is refused naming the least limit it trains in, and that
// limit is enough (before, the refusal said only "raise --mem-limit",
// after the dataset had been generated, partitioned and profiled).
func TestCacheShareNamesTheLeast(t *testing.T) {
	d := storagetest.Generate(t, synth.Config{Nodes: 20000, FeatDim: 128, Classes: 4, Seed: 3, TrainFrac: 0.2}, nil)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := partition.Run(d, &partition.Options{Parts: 20, Seed: 1, Name: PartitionName, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	pt, err := partition.Open(d.Dir(), PartitionName)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	// Batches of 100 targets: train --plan's minimum (43.4 MiB) is above
	// the least share (34.2 MiB), so a limit between them tests the
	// pre-flight below. With 1,000 targets the batches cover 0.76 of
	// their input rows with input-layer destinations, and the share's
	// working set, which takes that ratio, is the larger (69.3 against
	// 59.0 MiB).
	o := (&Options{Bin: "ssdgnn", Dir: d.Dir(), OutDir: t.TempDir(), BatchSize: 100, Fanouts: "10,10,10", Layers: 3}).withDefaults()
	p, err := planner.RunProfile(context.Background(), d, pf, &planner.ProfileOptions{Name: ProfileName, Fanouts: []int{10, 10, 10},
		BatchSize: o.BatchSize, Mode: sample.ModePartition, Part: pt.Part(), Partition: PartitionName, Seed: uint64(o.Seed), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Save(d.Dir()); err != nil {
		t.Fatal(err)
	}
	ds := &Dataset{Dir: d.Dir()}
	o.MemLimit = 8 << 20
	h := &harness{o: o}
	_, err = h.trainCacheShare(ds)
	if err == nil {
		t.Fatal("8 MiB: no error")
	}
	msg := err.Error()
	i := strings.Index(msg, "at least ")
	if i < 0 {
		t.Fatalf("8 MiB refused without naming the least limit: %v", err)
	}
	f := strings.Fields(msg[i+len("at least "):])
	least, perr := humanize.ParseBytes(f[0] + " " + strings.TrimRight(f[1], ",;:)"))
	if perr != nil {
		t.Fatalf("the named limit in %q: %v", msg, perr)
	}
	t.Logf("refused: %v", err)
	h.o.MemLimit = int64(least)
	if _, err := h.trainCacheShare(ds); err != nil {
		t.Errorf("the named least limit %d refused: %v", least, err)
	}
	// A limit under which the share fits but the child would refuse its
	// --mem (train's minimum) is refused here too, before any
	// configuration runs.
	below := int64(least) - 1<<20
	to := trainOptions(t, h, ds)
	if _, err := train.CacheShare(d, to, p, below); err != nil {
		t.Fatalf("the share does not fit 1 MiB below the least limit (%v): the case is not tested", err)
	}
	h.o.MemLimit = below
	if _, err := h.trainCacheShare(ds); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("1 MiB below the least limit, where train --plan refuses: %v", err)
	}
}

// trainOptions are the ssdgnn child's train options on ds, as
// trainCacheShare parses them.
func trainOptions(t *testing.T, h *harness, ds *Dataset) *train.Options {
	t.Helper()
	tr, dir, err := cliflags.ParseTrain(h.shareArgs(ds))
	if err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	res, err := tr.Resolve(d, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	to := &tr.Options
	to.FeatCacheBytes, to.HistCacheBytes, to.NeighborCacheBytes = 0, 0, 0
	return to
}
