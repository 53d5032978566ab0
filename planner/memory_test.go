package planner

import (
	"runtime"
	"testing"
)

// TestProfileMemBytesMeasured: ProfileMemBytes matches the heap that
// newCounters allocates, as the Go runtime counts it.
func TestProfileMemBytesMeasured(t *testing.T) {
	const n = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newCounters(n)
	runtime.ReadMemStats(&after)
	got := int64(after.TotalAlloc - before.TotalAlloc)
	want := ProfileMemBytes(n)
	if got < want || got > want+want/100 {
		t.Errorf("newCounters(%d) allocated %d bytes, ProfileMemBytes says %d", n, got, want)
	}
	runtime.KeepAlive(c)
}
