package planner

import (
	"runtime"
	"testing"
)

// TestProfileMemBytesMeasured: counterBytes matches the heap that
// newCounters allocates, as the Go runtime counts it, and ProfileMemBytes
// adds the replay's array.
func TestProfileMemBytesMeasured(t *testing.T) {
	const n = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newCounters(n)
	runtime.ReadMemStats(&after)
	got := int64(after.TotalAlloc - before.TotalAlloc)
	want := counterBytes(n)
	if got < want || got > want+want/100 {
		t.Errorf("newCounters(%d) allocated %d bytes, counterBytes says %d", n, got, want)
	}
	if got, want := ProfileMemBytes(n), counterBytes(n)+4*n; got != want {
		t.Errorf("ProfileMemBytes(%d) = %d, want the counters and one uint32 per node, %d", n, got, want)
	}
	runtime.KeepAlive(c)
}
