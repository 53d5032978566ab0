package sample

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestWorkerScratch: a sampling worker's scratch stays within
// WorkerBytesBound's scratch term for every batch and fanouts, is what it
// counts under memacct.SampledBatches, and is uncounted on release.
func TestWorkerScratch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 3000, FeatDim: 4, Classes: 4, AvgDegree: 12, TrainFrac: 0.3, Seed: 3}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	train := d.TrainIdx()
	for _, tc := range []struct {
		fanouts []int
		src     Source
		batch   int
	}{
		{[]int{10, 10, 10}, SourceMmap, 64},
		{[]int{1, 1}, SourceMmap, 200},
		{[]int{25, 10}, SourcePread, 64},
		{[]int{-1, -1}, SourceMmap, 16},
		{[]int{-1, 3}, SourcePread, 100},
	} {
		s, err := New(d, nil, &Options{Fanouts: tc.fanouts, BatchSize: tc.batch, Seed: 1, Workers: 1, Source: tc.src})
		if err != nil {
			t.Fatal(err)
		}
		base := memacct.Read().Bytes[memacct.SampledBatches]
		w := s.newWorker()
		for i := 0; i+tc.batch <= len(train); i += tc.batch {
			targets := train[i : i+tc.batch]
			b, err := w.sample(context.Background(), 0, i/tc.batch, -1, targets, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			bound := scratchBound(int64(tc.batch), tc.fanouts, d.NumNodes(), d.NumEdges(), tc.src)
			if got := w.scratchBytes(); got <= 0 || got > bound {
				t.Fatalf("fanouts %v, %v, batch %d: scratch %d bytes, want in (0, %d]", tc.fanouts, tc.src, i/tc.batch, got, bound)
			}
			if c := memacct.Read().Bytes[memacct.SampledBatches] - base; c != w.scratchBytes() {
				t.Fatalf("fanouts %v, batch %d: counted %d, scratch %d", tc.fanouts, i/tc.batch, c, w.scratchBytes())
			}
		}
		w.release()
		if left := memacct.Read().Bytes[memacct.SampledBatches] - base; left != 0 {
			t.Errorf("fanouts %v: %d bytes still counted after release", tc.fanouts, left)
		}
		s.Close()
	}
}
