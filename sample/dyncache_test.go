package sample_test

import (
	"runtime"
	"testing"

	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
)

// TestDynamicCacheMemBytes: MemBytes bounds the heap a filled cache holds
// (measured with runtime.MemStats after GC) and does not overstate it by
// more than 2×, for narrow and wide ids and sizes on both sides of a map
// table's growth.
func TestDynamicCacheMemBytes(t *testing.T) {
	for _, tc := range []struct {
		nodes, deg int
		wide       bool
	}{
		{50_000, 3, false},
		{70_000, 3, false},
		{100_000, 0, false},
		{60_000, 5, true},
	} {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		c := sample.NewDynamicCache(tc.wide)
		c.Reserve(int64(tc.nodes), int64(tc.nodes*tc.deg))
		list := make([]int32, tc.deg)
		for v := range tc.nodes {
			c.Add(int64(v)*7, neighborcache.List{I32: list})
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		held := int64(ms.HeapAlloc) - int64(before)
		got := c.MemBytes()
		t.Logf("%d nodes × %d ids (wide %v): MemBytes %d, heap held %d", tc.nodes, tc.deg, tc.wide, got, held)
		if c.Len() != tc.nodes || got < held || got > 2*held {
			t.Errorf("%d nodes × %d ids (wide %v): MemBytes %d, heap held %d", tc.nodes, tc.deg, tc.wide, got, held)
		}
		runtime.KeepAlive(c)
	}
	var nilCache *sample.DynamicCache
	if nilCache.MemBytes() != 0 {
		t.Error("nil cache has memory")
	}
}
