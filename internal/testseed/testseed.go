// Package testseed gives randomised tests one -seed flag (STYLE 18): with
// the default 0 every test picks a fresh seed and logs it, so a failure
// prints the seed that reproduces it; -seed=N reruns with N. Import it
// from test files only: it registers the flag in the test binary.
package testseed

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var seed = flag.Uint64("seed", 0, "seed for randomised tests (0: pick one and print it)")

// Seed returns -seed, or a fresh random seed when it is 0, and logs it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}
