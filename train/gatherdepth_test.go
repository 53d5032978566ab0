package train

import (
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// TestGatherDepth: without a budget the gather keeps the feature cache's
// default depth; with one, the read slots take at most a 64th of it,
// between the old default and the new one; an explicit depth is kept.
func TestGatherDepth(t *testing.T) {
	for _, tc := range []struct {
		mem  int64
		want int
	}{
		{0, featurecache.DefaultIODepth},
		{32 << 20, storage.DefaultScatterDepth},
		{256 << 20, 16},
		{384 << 20, 24},
		{512 << 20, 32},
		{1 << 30, 64},
		{64 << 30, 64},
	} {
		if got := GatherDepth(tc.mem); got != tc.want {
			t.Errorf("GatherDepth(%d MiB) = %d, want %d", tc.mem>>20, got, tc.want)
		}
		if tc.mem > 0 {
			if slots := int64(GatherDepth(tc.mem)) * storage.DefaultMaxReadBytes; GatherDepth(tc.mem) > storage.DefaultScatterDepth && slots > tc.mem/64 {
				t.Errorf("--mem %d MiB: %d bytes of slots, over a 64th", tc.mem>>20, slots)
			}
		}
		o := Options{MemBytes: tc.mem}
		if w := o.withDefaults(); tc.mem > 0 && w.FeatIODepth != tc.want {
			t.Errorf("withDefaults at %d MiB: depth %d, want %d", tc.mem>>20, w.FeatIODepth, tc.want)
		}
		o.FeatIODepth = 5
		if w := o.withDefaults(); w.FeatIODepth != 5 {
			t.Errorf("explicit depth 5 became %d", w.FeatIODepth)
		}
	}
}

// TestAtOwnDepth: a budget that grows with the read depth is taken at the
// depth GatherDepth gives the result, for budgets at the floor, between
// the bounds and past the cap.
func TestAtOwnDepth(t *testing.T) {
	for _, base := range []int64{100 << 20, 600 << 20, 900 << 20, 4 << 30} {
		var tried []int
		mem, depth := atOwnDepth(func(depth int) int64 {
			tried = append(tried, depth)
			return base + int64(depth)*storage.DefaultMaxReadBytes
		})
		if depth != GatherDepth(mem) || mem != base+int64(depth)*storage.DefaultMaxReadBytes {
			t.Errorf("base %d MiB: %d bytes at depth %d, GatherDepth says %d", base>>20, mem, depth, GatherDepth(mem))
		}
		if tried[0] != storage.DefaultScatterDepth || !slices.IsSorted(tried) {
			t.Errorf("base %d MiB: depths tried %v, want rising from %d", base>>20, tried, storage.DefaultScatterDepth)
		}
	}
}
