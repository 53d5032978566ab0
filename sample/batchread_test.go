package sample

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// epochBatches samples one epoch and returns its batches, timing zeroed,
// its lookup stats and the sample stage's storage counts it caused.
func epochBatches(t *testing.T, d *storage.Dataset, o Options) ([]*Batch, LookupStats, storage.StageStats) {
	t.Helper()
	s, err := New(d, nil, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := sampleStage(d)
	it := s.Epoch(context.Background(), 1)
	defer it.Close()
	var bs []*Batch
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b.SampleSeconds = 0
		b.Release()
		bs = append(bs, b)
	}
	after := sampleStage(d)
	after.ReadCalls -= before.ReadCalls
	after.BytesRead -= before.BytesRead
	after.Rows -= before.Rows
	after.BytesRequested -= before.BytesRequested
	return bs, it.Stats(), after
}

func sampleStage(d *storage.Dataset) storage.StageStats {
	for _, st := range d.Accounting().Snapshot() {
		if st.Stage == storage.StageSample {
			return st
		}
	}
	return storage.StageStats{}
}

// TestBatchSource: SourceBatch gives the batches of SourceMmap for every
// engine and gap, with the arena whole, or so small that most lists take
// the mapping and read in chunks of 7 requests; one read per list makes at least one read per miss (its
// offsets) and at most two, and merging makes fewer.
func TestBatchSource(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 4000, FeatDim: 4, Classes: 4, AvgDegree: 12, TrainFrac: 0.2, Seed: 5}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	base := Options{Fanouts: []int{8, 5, 3}, BatchSize: 100, Seed: 9, Workers: 2}
	want, wantStats, _ := epochBatches(t, d, base)
	for _, eng := range []storage.IOEngine{storage.IOPread, storage.IOUring} {
		perList := int64(-1)
		for _, gap := range []int64{PerListReads, 0, 1 << 20} {
			for _, arena := range []int64{ListArenaBytes, 600} {
				t.Run(fmt.Sprintf("%s/gap%d/arena%d", eng, gap, arena), func(t *testing.T) {
					defer func(a int64, c int) { listArenaBytes, readChunk = a, c }(listArenaBytes, readChunk)
					listArenaBytes = arena
					if arena != ListArenaBytes {
						readChunk = 7 // and many ReadRanges calls a hop
					}
					o := base
					o.Source, o.IO, o.ReadGapBytes = SourceBatch, eng, gap
					if gap > 0 {
						o.MaxReadAmp = UncappedReads
					}
					if s, err := New(d, nil, &o); err != nil {
						t.Fatal(err)
					} else {
						got := s.ix.Engine()
						s.Close()
						if eng == storage.IOUring && got != storage.IOUring {
							t.Skipf("io_uring refused: engine %s", got)
						}
					}
					got, st, io := epochBatches(t, d, o)
					if !reflect.DeepEqual(got, want) {
						t.Fatal("batches differ from the mapping's")
					}
					if st != wantStats {
						t.Fatalf("lookup stats %+v, mapping's %+v", st, wantStats)
					}
					misses := st.Storage.Hits
					if misses == 0 || io.ReadCalls == 0 {
						t.Fatalf("%d storage lookups, %d read calls", misses, io.ReadCalls)
					}
					if arena != ListArenaBytes {
						return
					}
					switch gap {
					case PerListReads:
						if io.ReadCalls < misses || io.ReadCalls > 2*misses {
							t.Fatalf("one read per item: %d read calls for %d misses", io.ReadCalls, misses)
						}
						perList = io.ReadCalls
					default:
						if perList > 0 && io.ReadCalls >= perList {
							t.Fatalf("merged: %d read calls, per list %d", io.ReadCalls, perList)
						}
					}
				})
			}
		}
	}
}
