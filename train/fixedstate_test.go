package train

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// fixedStateNodes is the graph size TestFixedState measures at: large
// enough that the per-node state (4 bytes per node per worker, 8 with a
// profile: megabytes) dwarfs what a sampler holds beside it (a few
// batches of 64 targets, worker scratch: kilobytes), and below sample's
// dense id-map limit.
const fixedStateNodes = 1 << 19

// liveHeap is the live Go heap: HeapAlloc after two collections (the
// second also empties the sync.Pool victim caches).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapTolerance is how far a HeapAlloc measurement of want bytes of
// per-node arrays may stray: 1/32 of it plus 64 KiB. The arrays are large
// objects, allocated in whole 8 KiB pages, so they are measured exactly;
// the slack covers what is allocated beside them and is not per-node (the
// batches in flight, worker scratch, channels, the Profile struct: about
// 9 KiB here) and the runtime's own small allocations between the two
// readings. At 2^19 nodes it is under 5% of want, so a per-node size off
// by one byte (25% of an id map, 12.5% of the kept profile) fails.
func heapTolerance(want int64) int64 { return want/32 + 64<<10 }

// measureSamplers runs an epoch of a real sampler with workers goroutines
// (0: sample's default) over d until it is idle, and returns what its
// workers hold: the memacct count of their scratch, and the live heap
// that Close frees less the batches it releases.
func measureSamplers(t *testing.T, d *storage.Dataset, workers int) (counted, heap int64) {
	t.Helper()
	s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{2}, BatchSize: 64, Workers: workers, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := memacct.Read()
	it := s.Epoch(context.Background(), 0)
	// Nothing consumes the batches: the workers start, sample what the
	// prefetch queue admits and block. Wait until the counters stop moving.
	var idle memacct.Snapshot
	for stable, deadline := 0, time.Now().Add(30*time.Second); stable < 5; {
		time.Sleep(20 * time.Millisecond)
		now := memacct.Read()
		if now.Bytes == idle.Bytes {
			stable++
		} else {
			stable, idle = 0, now
		}
		if time.Now().After(deadline) {
			it.Close()
			t.Fatalf("sampler never went idle: %+v", now)
		}
	}
	counted = idle.Bytes[memacct.SamplerScratch] - before.Bytes[memacct.SamplerScratch]
	batches := idle.Bytes[memacct.SampledBatches] - before.Bytes[memacct.SampledBatches]
	held := liveHeap()
	it.Close()
	heap = held - liveHeap() - batches
	runtime.KeepAlive(it) // its plan is not part of the workers' state
	runtime.KeepAlive(s)
	return counted, heap
}

// measureProfile builds the profile LoadProfile returns for n nodes, keeps
// what training keeps of it (keptProfile) and drops the rest, and returns
// what the kept part holds: memacct's Profile count and the live heap it
// retains.
func measureProfile(n int64) (counted, heap int64) {
	arr := func() []uint32 {
		a := make([]uint32, n)
		for i := range a {
			a[i] = uint32(i % 7)
		}
		return a
	}
	before := memacct.Read().Bytes[memacct.Profile]
	h0 := liveHeap()
	p := &planner.Profile{Meta: planner.Meta{NumNodes: n, Beta: 1, PresampleEpochs: 1},
		Feat: arr(), HistSample: arr(), HistGather: arr(), Nbr: arr(), HistAppear: arr(), HistHits: arr()}
	k := keptProfile(p, 1)
	p = nil
	heap = liveHeap() - h0
	runtime.KeepAlive(k)
	return memacct.Read().Bytes[memacct.Profile] - before, heap
}

// TestFixedState compares fixedState with the memory of the objects it
// stands for, built for real: each sampling worker's node → local-id map
// (sample) and the profile arrays training keeps (planner, via
// keptProfile). memacct's counters, kept by the allocating packages, must
// equal the estimate exactly (same worker count, same objects), and the
// live heap they take must match it within heapTolerance (the estimate is
// the bytes really allocated).
func TestFixedState(t *testing.T) {
	const n = fixedStateNodes
	d := dataset(t, "fixedstate", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: n, AvgDegree: 2, FeatDim: 1, Classes: 2, Seed: 7}, nil)
		return err
	})
	for _, tc := range []struct {
		name    string
		workers int // 0: the sampler's default, GOMAXPROCS
		profile bool
	}{
		{"two workers", 2, false},
		{"three workers and a profile", 3, true},
		{"default workers", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := fixedState(n, tc.workers, tc.profile)
			if tc.workers == 0 && fs.Workers != runtime.GOMAXPROCS(0) {
				t.Errorf("default workers %d, want GOMAXPROCS %d", fs.Workers, runtime.GOMAXPROCS(0))
			}
			counted, heap := measureSamplers(t, d, tc.workers)
			if counted != fs.SamplerBytes {
				t.Errorf("%d workers: sampler scratch estimated %d bytes, counted %d", fs.Workers, fs.SamplerBytes, counted)
			}
			if diff := heap - fs.SamplerBytes; diff < -heapTolerance(fs.SamplerBytes) || diff > heapTolerance(fs.SamplerBytes) {
				t.Errorf("%d workers: sampler scratch estimated %d bytes, heap %d", fs.Workers, fs.SamplerBytes, heap)
			}
			var pc, ph int64
			if tc.profile {
				pc, ph = measureProfile(n)
			}
			if pc != fs.ProfileBytes {
				t.Errorf("kept profile estimated %d bytes, counted %d", fs.ProfileBytes, pc)
			}
			if diff := ph - fs.ProfileBytes; diff < -heapTolerance(fs.ProfileBytes) || diff > heapTolerance(fs.ProfileBytes) {
				t.Errorf("kept profile estimated %d bytes, heap %d", fs.ProfileBytes, ph)
			}
			if fs.Bytes != fs.SamplerBytes+fs.ProfileBytes {
				t.Errorf("total %d is not sampler %d + profile %d", fs.Bytes, fs.SamplerBytes, fs.ProfileBytes)
			}
			t.Logf("%d workers, profile %v: estimate %d + %d bytes; counted %d + %d, heap %d + %d",
				fs.Workers, tc.profile, fs.SamplerBytes, fs.ProfileBytes, counted, pc, heap, ph)
		})
	}
}
