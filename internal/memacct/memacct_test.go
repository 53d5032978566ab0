package memacct

import (
	"sync"
	"testing"
)

func TestAddPeak(t *testing.T) {
	base := Read()
	ResetPeak()
	Add(FeatureCache, 100)
	Add(Backend, 50)
	Add(FeatureCache, -100)
	Add(HistoryCache, 20)
	s := Read()
	if got := s.Bytes[Backend] - base.Bytes[Backend]; got != 50 {
		t.Errorf("backend %d, want 50", got)
	}
	if s.Total-base.Total != 70 {
		t.Errorf("total %d, want 70", s.Total-base.Total)
	}
	if s.Peak-base.Total != 150 || s.PeakBytes[FeatureCache]-base.Bytes[FeatureCache] != 100 {
		t.Errorf("peak %d (feature %d), want 150 (100)", s.Peak-base.Total, s.PeakBytes[FeatureCache]-base.Bytes[FeatureCache])
	}
	// Each purpose's own largest: 30 more backend bytes after the feature
	// cache's 100 were released leave the sum below its peak, where the
	// backend held 50.
	Add(Backend, 30)
	s2 := Read()
	if s2.MaxBytes[Backend]-base.Bytes[Backend] != 80 || s2.PeakBytes[Backend]-base.Bytes[Backend] != 50 ||
		s2.MaxBytes[FeatureCache]-base.Bytes[FeatureCache] != 100 {
		t.Errorf("max backend %d (at the peak %d), feature %d; want 80 (50), 100",
			s2.MaxBytes[Backend]-base.Bytes[Backend], s2.PeakBytes[Backend]-base.Bytes[Backend], s2.MaxBytes[FeatureCache]-base.Bytes[FeatureCache])
	}
	if m := s2.MaxMap(); m["backend tensors"] != s2.MaxBytes[Backend] {
		t.Errorf("MaxMap = %v", m)
	}
	Add(Backend, -80)
	Add(HistoryCache, -20)
	if Read().Total != base.Total {
		t.Errorf("total %d after releasing everything, want %d", Read().Total, base.Total)
	}
	if m := s.Map(false); len(m) != int(numPurposes) || m["backend tensors"] != s.Bytes[Backend] {
		t.Errorf("Map = %v", m)
	}
}

// TestConcurrent: counts from many goroutines add up (run with -race).
func TestConcurrent(t *testing.T) {
	base := Read().Total
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 1000 {
				Add(Purpose(g%int(numPurposes)), 3)
				Add(Purpose(g%int(numPurposes)), -1)
			}
		})
	}
	wg.Wait()
	if got := Read().Total - base; got != 8*1000*2 {
		t.Errorf("total grew by %d, want %d", got, 8*1000*2)
	}
	for g := range 8 {
		Add(Purpose(g%int(numPurposes)), -2000)
	}
}

// TestRuntimeBytes: goroutine stacks show up in the runtime's share, and
// a snapshot carries it outside Total.
func TestRuntimeBytes(t *testing.T) {
	before := RuntimeBytes()
	if before <= 0 {
		t.Fatalf("RuntimeBytes = %d, want > 0", before)
	}
	const goroutines, depth = 200, 64 // each stack grows past 64 KiB
	var ready sync.WaitGroup
	release := make(chan struct{})
	var done sync.WaitGroup
	for range goroutines {
		ready.Add(1)
		done.Go(func() { deepStack(depth, &ready, release) })
	}
	ready.Wait()
	grown := RuntimeBytes() - before
	s := Read()
	close(release)
	done.Wait()
	if want := int64(goroutines * 64 << 10); grown < want {
		t.Errorf("runtime memory grew %d bytes with %d deep goroutine stacks, want at least %d", grown, goroutines, want)
	}
	if s.Runtime < before+int64(goroutines*64<<10) {
		t.Errorf("Snapshot.Runtime = %d, want at least %d", s.Runtime, before+int64(goroutines*64<<10))
	}
}

// deepStack recurses n frames of about 1 KiB each, then waits.
func deepStack(n int, ready *sync.WaitGroup, release chan struct{}) byte {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		ready.Done()
		<-release
		return pad[0]
	}
	return deepStack(n-1, ready, release) + pad[n%len(pad)]
}
