package memstat

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	rss, peak := RSS(), PeakRSS()
	if rss <= 0 || peak < rss {
		t.Fatalf("rss %d peak %d", rss, peak)
	}
	// Touch 64 MiB of fresh anonymous pages outside the Go heap, so the
	// runtime cannot satisfy it from memory already resident.
	const size = 64 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unix.Munmap(b)
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	if got := RSS(); got < rss+size/2 {
		t.Fatalf("rss did not grow after touching 64 MiB: %d -> %d", rss, got)
	}
	if got := PeakRSS(); got < peak+size/2 && got < rss+size/2 {
		t.Fatalf("peak did not follow rss: peak %d, rss before %d", got, rss)
	}
}

// TestAnonRSSAndAvailable: anonymous RSS is part of RSS and grows when
// fresh anonymous pages are touched; MemAvailable is positive on Linux.
func TestAnonRSSAndAvailable(t *testing.T) {
	if RSS() == 0 {
		t.Skip("no /proc/self/status")
	}
	before := AnonRSS()
	// Pages outside the Go heap: a heap allocation could reuse memory a
	// previous test (or -count run) already made resident.
	const size = 64 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unix.Munmap(b)
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	after := AnonRSS()
	if after < before+size/2 || after > RSS() {
		t.Errorf("AnonRSS %d -> %d after touching 64 MiB (RSS %d)", before, after, RSS())
	}
	if Available() <= 0 {
		t.Errorf("Available() = %d", Available())
	}
}
