package sample

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/testseed"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestWorkerScratch: a sampling worker's scratch stays within
// WorkerBytesBound's scratch term for every batch and fanouts, is what it
// counts under memacct.SampledBatches, and is uncounted on release.
func TestWorkerScratch(t *testing.T) {
	d := scratchGraph(t)
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
		{[]int{10, 10, 10}, SourceBatch, 64},
		{[]int{-1, 3}, SourceBatch, 100},
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
			if tc.src == SourceBatch {
				// The worker's own share, with the arena it has (not the
				// whole ListArenaBytes the bound reserves): the readers'
				// slots and state are counted by storage.
				fetched, _ := hopBounds(int64(tc.batch), tc.fanouts, d.NumNodes(), d.NumEdges())
				bound = scratchBound(int64(tc.batch), tc.fanouts, d.NumNodes(), d.NumEdges(), SourceMmap) +
					batchHopBytes(fetched) + 4*int64(cap(w.arena32)) + 8*int64(cap(w.arena64))
			}
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

// TestSpareCache: a released macro batch's cache waits in the spare with
// its count, the next load takes it, only one waits at a time, and drop
// uncounts it.
func TestSpareCache(t *testing.T) {
	base := memacct.Read().Bytes[memacct.DynamicCache]
	counted := func() int64 { return memacct.Read().Bytes[memacct.DynamicCache] - base }
	var p spareCache
	a, n := p.take(false)
	if n != 0 || a.Len() != 0 {
		t.Fatalf("empty spare gave a cache of %d nodes, %d bytes", a.Len(), n)
	}
	a.Reserve(3, 6)
	a.Add(1, neighborcache.List{I32: []int32{2, 3}})
	memacct.Add(memacct.DynamicCache, a.MemBytes())
	ms := &macroState{cache: a}
	ms.counted.Store(a.MemBytes())
	ms.release(&p)
	if counted() != a.MemBytes() || a.Len() != 0 {
		t.Fatalf("after release to the spare: counted %d, want %d; cache holds %d nodes", counted(), a.MemBytes(), a.Len())
	}
	// A second release while one waits is uncounted and dropped.
	b := NewDynamicCache(false)
	b.Reserve(1, 1)
	memacct.Add(memacct.DynamicCache, b.MemBytes())
	ms2 := &macroState{cache: b}
	ms2.counted.Store(b.MemBytes())
	ms2.release(&p)
	if counted() != a.MemBytes() {
		t.Fatalf("after a second release: counted %d, want %d", counted(), a.MemBytes())
	}
	got, n := p.take(false)
	if got != a || n != a.MemBytes() {
		t.Fatalf("take returned %p with %d bytes, want the spare %p with %d", got, n, a, a.MemBytes())
	}
	if _, ok := got.Lookup(1); ok {
		t.Fatal("a cache taken from the spare still holds its last macro batch's lists")
	}
	if !p.put(got, n) {
		t.Fatal("put into an empty spare refused")
	}
	p.drop()
	if c := counted(); c != 0 {
		t.Fatalf("after drop: %d bytes still counted", c)
	}
}

// TestEpochCancelReleases: an epoch cancelled at any moment, with the
// consumer inside Next or between calls, leaves nothing counted once the
// iterator is closed: no sampled batch is lost between a worker's answer
// and the consumer that stopped waiting for it.
func TestEpochCancelReleases(t *testing.T) {
	d := scratchGraph(t)
	s, err := New(d, nil, &Options{Fanouts: []int{10, 10}, BatchSize: 20, Seed: 1, Workers: 2, Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	purposes := []memacct.Purpose{memacct.SampledBatches, memacct.SamplerScratch, memacct.DynamicCache}
	for trial := range 300 {
		base := memacct.Read()
		ctx, cancel := context.WithCancel(context.Background())
		it := s.Epoch(ctx, trial)
		delay := time.Duration(r.IntN(400)) * time.Microsecond
		stop := time.AfterFunc(delay, cancel)
		for {
			b, err := it.Next()
			if err != nil {
				break
			}
			b.Release()
		}
		stop.Stop()
		cancel()
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		after := memacct.Read()
		for _, p := range purposes {
			if left := after.Bytes[p] - base.Bytes[p]; left != 0 {
				t.Fatalf("trial %d (cancel after %v): %s: %d bytes still counted after Close", trial, delay, p, left)
			}
		}
	}
}

// scratchGraph is a 3,000-node generated graph, closed with the test.
func scratchGraph(t *testing.T) *storage.Dataset {
	return storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 4, Classes: 4, AvgDegree: 12, TrainFrac: 0.3, Seed: 3}, nil)
}
