package ooc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestCacheShareNamesTheLeast: a --mem-limit too small for the ssdgnn
// configuration is refused naming the least limit it trains in, and that
// limit is enough (before, the refusal said only "raise --mem-limit",
// after the dataset had been generated, partitioned and profiled).
func TestCacheShareNamesTheLeast(t *testing.T) {
	d := storagetest.Generate(t, synth.Config{Nodes: 4000, FeatDim: 16, Classes: 4, Seed: 3}, nil)
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
	o := (&Options{Bin: "ssdgnn", Dir: d.Dir(), OutDir: t.TempDir(), BatchSize: 200, Fanouts: "5,5,5", Layers: 3}).withDefaults()
	p, err := planner.RunProfile(context.Background(), d, pf, &planner.ProfileOptions{Name: ProfileName, Fanouts: []int{5, 5, 5},
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
}
