package train

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

func TestBatchedReads(t *testing.T) {
	for _, tc := range []struct {
		graph, room int64
		want        bool
	}{
		{100, 0, true},   // no room left
		{100, -50, true}, // the budget exceeds the limit
		{50, 100, false}, // half fits
		{51, 100, true},  // more than half
		{3 << 30, 1 << 30, true},
		{1 << 20, 24 << 30, false},
	} {
		if got := batchedReads(tc.graph, tc.room); got != tc.want {
			t.Errorf("batchedReads(%d, %d) = %v, want %v", tc.graph, tc.room, got, tc.want)
		}
	}
}

func TestPageCacheRoom(t *testing.T) {
	for _, tc := range []struct{ room, budget, want int64 }{
		{1 << 30, 1 << 30, 64 << 20},                 // --mem = the limit: half the reserve (mem/8)
		{24 << 30, 1 << 30, 23<<30 + 64<<20},         // the rest of the machine too
		{1 << 30, 64 << 20, 1<<30 - 64<<20 + 12<<20}, // the reserve's 24 MiB floor
	} {
		if got := pageCacheRoom(tc.room, tc.budget); got != tc.want {
			t.Errorf("pageCacheRoom(%d, %d) = %d, want %d", tc.room, tc.budget, got, tc.want)
		}
	}
	// The benchmark's 428 MiB graph under --mem = a 1 GiB limit reads in
	// batches; a 4 MiB graph there keeps its pages.
	if !batchedReads(428<<20, pageCacheRoom(1<<30, 1<<30)) || batchedReads(4<<20, pageCacheRoom(1<<30, 1<<30)) {
		t.Error("auto's choice under --mem = the limit")
	}
}

// TestAutoSourceSmall: a dataset of a few kilobytes reads through the
// mapping wherever the test runs, and the note says so.
func TestAutoSourceSmall(t *testing.T) {
	if l, ok := cgroup.SelfMemoryLimit(); ok && l < 1<<20 {
		t.Skipf("memory cgroup limit %d B", l)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 200, AvgDegree: 4, FeatDim: 4, Classes: 2, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src, note := AutoSource(d, 0)
	if src != sample.SourceMmap || !strings.Contains(note, "through the mapping") {
		t.Fatalf("AutoSource = %v, %q; want mmap", src, note)
	}
}
