package partition

import "testing"

func TestAutoOrder(t *testing.T) {
	const gib = int64(1) << 30
	withDefaults := func(o Options) *Options { c := o.withDefaults(); return &c }
	ahead := withDefaults(Options{Workers: 2}).readAheadBytes(1 << 20)
	if ahead != readAheadBytes(defaultHashes()) {
		t.Fatalf("the default options' read-ahead is %d bytes, want %d", ahead, readAheadBytes(defaultHashes()))
	}
	if b := withDefaults(Options{Workers: 1}).readAheadBytes(1 << 20); b != 0 {
		t.Errorf("one worker reads ahead %d bytes, want 0", b)
	}
	if b := withDefaults(Options{Workers: 2, Method: FennelExact}).readAheadBytes(1 << 20); b != readAheadBytes(0) {
		t.Errorf("fennel-exact reads ahead %d bytes, want %d", b, readAheadBytes(0))
	}
	for _, c := range []struct {
		name          string
		csr, n, avail int64
		want          string
	}{
		{"fits", gib, 1 << 20, 2 * gib, OrderBFS},
		{"unknown memory", 100 * gib, 1 << 30, 0, OrderBFS},
		{"state tips it", 2*gib - stateBytesPerNode*(1<<20) - ahead + 1, 1 << 20, 2 * gib, OrderID},
		{"exactly fits", 2*gib - stateBytesPerNode*(1<<20) - ahead, 1 << 20, 2 * gib, OrderBFS},
		// The 20 M rung of docs/benchmarks.md under its 2 GiB cgroup.
		{"20M in 2 GiB", 8*20_000_001 + 4*377_958_472, 20_000_000, 2 * gib, OrderID},
		{"5.4M in 2 GiB", 8*5_400_001 + 4*102_000_000, 5_400_000, 2 * gib, OrderBFS},
	} {
		got, why := autoOrder(c.csr, c.n, ahead, c.avail)
		if got != c.want {
			t.Errorf("%s: autoOrder(%d, %d, %d) = %s (%s), want %s", c.name, c.csr, c.n, c.avail, got, why, c.want)
		}
	}
}
