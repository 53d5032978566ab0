package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/testseed"
)

// TestSizeClass: a class's size is at least the request and at most 19 %
// more, and a class size maps back to its own class.
func TestSizeClass(t *testing.T) {
	for n := storeMinFloats; n < 1<<24; n += 1 + n/97 {
		c, size := sizeClass(n)
		if size < n || float64(size) > 1.19*float64(n)+1 {
			t.Fatalf("sizeClass(%d) = %d, %d", n, c, size)
		}
		if c2, s2 := sizeClass(size); c2 != c || s2 != size {
			t.Fatalf("sizeClass(%d) = %d, %d; sizeClass(%d) = %d, %d", n, c, size, size, c2, s2)
		}
	}
}

// TestStoreAccounting: random gets and puts. Every buffer is zeroed and
// of the asked length, the store never holds more than its live peak, and
// memacct.Backend moves by exactly what the store says it holds; after
// drain only the live tensors are counted, and nothing once they are put.
func TestStoreAccounting(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 3))
	var s store
	base := memacct.Read().Bytes[memacct.Backend]
	var live [][]float32
	var small int64
	check := func(step int) {
		l, p := s.held()
		if l+p > s.high {
			t.Fatalf("step %d: holds %d live + %d pooled, peak live %d", step, l, p, s.high)
		}
		if got := memacct.Read().Bytes[memacct.Backend] - base; got != l+p+small {
			t.Fatalf("step %d: memacct %d, store %d live + %d pooled + %d small", step, got, l, p, small)
		}
	}
	for step := range 5000 {
		if len(live) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(live))
			b := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			if cap(b) < storeMinFloats {
				small -= 4 * int64(len(b))
			}
			for k := range b {
				b[k] = 1
			}
			s.put(b)
		} else {
			n := r.IntN(1 << 16)
			b := s.get(n)
			if len(b) != n {
				t.Fatalf("get(%d): %d floats", n, len(b))
			}
			for _, x := range b {
				if x != 0 {
					t.Fatalf("get(%d): not zeroed", n)
				}
			}
			if n < storeMinFloats {
				small += 4 * int64(n)
			}
			live = append(live, b)
		}
		check(step)
	}
	s.drain()
	check(-1)
	for _, b := range live {
		s.put(b)
	}
	s.drain()
	if got := memacct.Read().Bytes[memacct.Backend] - base; got != 0 {
		t.Fatalf("after every put and a drain, memacct.Backend moved by %d", got)
	}
}

// held is the bytes s holds: live and pooled.
func (s *store) held() (live, pooled int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, s.pooled
}
