package cliflags

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
	"github.com/ssdgnn/ssdgnn/train"
)

// TestResolve: what train's flags leave to the dataset is settled as
// `ssdgnn train` trains with it: the auto selection by whether the
// partitioning exists (and its files opened), named choices kept without
// a note, and with a room the read mode and source chosen for a child
// under that limit.
func TestResolve(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 3000, FeatDim: 8, Classes: 4, AvgDegree: 8, TrainFrac: 0.2, Seed: 3}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	resolve := func(room int64, args ...string) (*Train, *Resolved) {
		t.Helper()
		tf, _, err := ParseTrain(append([]string{dir}, args...))
		if err != nil {
			t.Fatal(err)
		}
		r, err := tf.Resolve(d, dir, room)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		t.Cleanup(r.Close)
		return tf, r
	}

	// No partitioning yet: random batches, and every auto choice says why.
	tf, r := resolve(0)
	if o := tf.Options; o.Selection != sample.ModeRandom || r.Parts != nil || o.Partitions != nil ||
		!strings.Contains(r.SelectionNote, "random batches") || r.FeatReadNote == "" || r.SourceNote == "" {
		t.Errorf("no partitioning: selection %v, parts %v, notes %q %q %q", o.Selection, r.Parts, r.SelectionNote, r.FeatReadNote, r.SourceNote)
	}
	if src, _ := train.AutoSource(d, 0); tf.Options.Source != src {
		t.Errorf("auto source %v, train.AutoSource says %v", tf.Options.Source, src)
	}

	part := func(name string) {
		t.Helper()
		if _, err := partition.Run(d, &partition.Options{Parts: 6, FirstLevel: 6, Name: name, Seed: 1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
	}
	// One partitioning under another name: the bare flags take it; a
	// --partition that names the missing default does not.
	part("mine")
	tf, r = resolve(0)
	if o := tf.Options; o.Selection != sample.ModePartition || tf.Partition != "mine" || r.Parts == nil ||
		!strings.Contains(r.SelectionNote, `partitioning "mine", the dataset's only one`) {
		t.Errorf("only partitioning \"mine\": selection %v from %q, note %q", o.Selection, tf.Partition, r.SelectionNote)
	}
	tf, r = resolve(0, "--selection", "partition")
	if tf.Partition != "mine" || r.Parts == nil {
		t.Errorf("--selection partition, only \"mine\" there: partitioning %q, parts %v", tf.Partition, r.Parts)
	}
	// A named partitioning that is missing is an error, not random
	// batches (a typo would train another method).
	tf, _, err = ParseTrain([]string{dir, "--partition", "fennel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Resolve(d, dir, 0); err == nil || !strings.Contains(err.Error(), `no partitioning "fennel"`) {
		t.Errorf("--partition fennel, only \"mine\" there: %v", err)
	}
	// Two, neither the default: random, and the note names both.
	part("second")
	tf, r = resolve(0)
	if o := tf.Options; o.Selection != sample.ModeRandom || r.Parts != nil ||
		!strings.Contains(r.SelectionNote, `the dataset has "mine", "second": --partition NAME picks one`) {
		t.Errorf("two partitionings: selection %v, note %q", o.Selection, r.SelectionNote)
	}
	part("fennel")
	// The default partitioning now exists: partition batches from it;
	// a named source and read mode are kept, with no note.
	tf, r = resolve(0, "--source", "mmap", "--feat-read", "direct")
	if o := tf.Options; o.Selection != sample.ModePartition || r.Parts == nil || o.Partitions != sample.Partitions(r.Parts) || r.Parts.K() != 6 ||
		o.Source != sample.SourceMmap || o.FeatRead != storage.ReadDirect || r.FeatReadNote != "" || r.SourceNote != "" {
		t.Errorf("partitioned, named: selection %v, parts %v, source %v, read %v, notes %q %q", o.Selection, r.Parts, o.Source, o.FeatRead, r.FeatReadNote, r.SourceNote)
	}
	// A partitioning that is not there is refused, saying how to make it.
	tf, _, err = ParseTrain([]string{dir, "--selection", "partition", "--partition", "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Resolve(d, dir, 0); err == nil || !strings.Contains(err.Error(), "ssdgnn partition") {
		t.Errorf("missing partitioning: %v", err)
	}

	// A child's room: O_DIRECT for its cgroup limit, and the source for
	// its room and budget (a tiny room reads per hop, a vast one maps).
	for _, room := range []int64{64 << 10, 1 << 40} {
		tf, r = resolve(room, "--mem", "1GiB")
		want, _ := train.AutoSourceIn(d, room, 1<<30)
		if o := tf.Options; o.FeatRead != storage.ReadAuto || !strings.Contains(r.FeatReadNote, "memory cgroup limit") || o.Source != want {
			t.Errorf("room %d: read %v (%q), source %v, want %v", room, o.FeatRead, r.FeatReadNote, o.Source, want)
		}
	}
	if _, small := resolve(64<<10, "--mem", "1GiB"); !strings.Contains(small.SourceNote, "batched") {
		t.Errorf("a 64 KiB room: %q, want batched reads", small.SourceNote)
	}
	if _, vast := resolve(1<<40, "--mem", "1GiB"); !strings.Contains(vast.SourceNote, "through the mapping") {
		t.Errorf("a 1 TiB room: %q, want the mapping", vast.SourceNote)
	}
}
