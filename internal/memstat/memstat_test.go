package memstat

import (
	"runtime"
	"testing"
)

func TestRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	rss, peak := RSS(), PeakRSS()
	if rss <= 0 || peak < rss {
		t.Fatalf("rss %d peak %d", rss, peak)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	if PeakRSS() < peak+32<<20 {
		t.Fatalf("peak did not grow after touching 64 MiB: %d -> %d", peak, PeakRSS())
	}
	runtime.KeepAlive(buf)
}
