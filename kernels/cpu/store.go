package cpu

import (
	"math"
	"sync"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

// store recycles the float32 storage of freed tensors. A training step
// allocates and frees the same shapes batch after batch (micro-batches
// differ only in row counts); without reuse every step leaves its
// activations and gradients to the garbage collector, and the heap
// carries a step's worth of garbage beside the live tensors, memory no
// counter sees.
//
// Storage of at least storeMinFloats values comes in size classes four
// per doubling (at most 19 % larger than asked). The store counts every
// byte it holds in memacct.Backend: the capacity of live tensors and of
// pooled buffers. It never holds more than the most its live tensors
// ever took (high): a freed buffer that would pass that is dropped, and a
// new one first evicts pooled buffers, so reuse costs no memory beyond
// the backend's own peak. Smaller tensors come from the heap as before.
type store struct {
	mu     sync.Mutex
	free   map[int][][]float32 // size class → pooled buffers
	live   int64               // bytes of live class-sized buffers
	pooled int64               // bytes of pooled buffers
	high   int64               // most live bytes ever
	maxCls int                 // largest class with a pooled buffer (eviction scans down from it)
}

// storeMinFloats is the smallest tensor (16 KiB) whose storage is pooled.
const storeMinFloats = 4 << 10

// classSize is the size of class c, ⌈2^(c/4)⌉ floats: strictly
// increasing from storeMinFloats on.
func classSize(c int) int { return int(math.Ceil(math.Exp2(float64(c) / 4))) }

// sizeClass returns the least class whose size is at least n floats, and
// that size; for n a class size, n's own class.
func sizeClass(n int) (c, size int) {
	c = max(int(math.Floor(4*math.Log2(float64(n))))-1, 0)
	for classSize(c) < n {
		c++
	}
	return c, classSize(c)
}

// get returns zeroed storage of n floats.
func (s *store) get(n int) []float32 {
	if n < storeMinFloats {
		memacct.Add(memacct.Backend, 4*int64(n))
		return make([]float32, n)
	}
	c, size := sizeClass(n)
	bytes := 4 * int64(size)
	s.mu.Lock()
	if l := len(s.free[c]); l > 0 {
		buf := s.free[c][l-1]
		s.free[c] = s.free[c][:l-1]
		s.pooled -= bytes
		s.live += bytes
		s.high = max(s.high, s.live)
		s.mu.Unlock()
		buf = buf[:n]
		clear(buf)
		return buf
	}
	s.live += bytes
	s.high = max(s.high, s.live)
	var evicted int64
	for s.live+s.pooled > s.high && s.pooled > 0 {
		evicted += s.evictOne()
	}
	s.mu.Unlock()
	memacct.Add(memacct.Backend, bytes-evicted)
	return make([]float32, n, size)
}

// put takes back the storage of a freed tensor (from get).
func (s *store) put(buf []float32) {
	if cap(buf) < storeMinFloats {
		memacct.Add(memacct.Backend, -4*int64(len(buf)))
		return
	}
	c, size := sizeClass(cap(buf))
	bytes := 4 * int64(size)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live -= bytes
	if size != cap(buf) || s.live+s.pooled+bytes > s.high {
		memacct.Add(memacct.Backend, -bytes)
		return
	}
	if s.free == nil {
		s.free = map[int][][]float32{}
	}
	s.free[c] = append(s.free[c], buf[:0])
	s.pooled += bytes
	s.maxCls = max(s.maxCls, c)
}

// evictOne drops one pooled buffer, the largest, and returns its bytes.
// s.mu is held and s.pooled > 0.
func (s *store) evictOne() int64 {
	for c := s.maxCls; c >= 0; c-- {
		if l := len(s.free[c]); l > 0 {
			bytes := 4 * int64(cap(s.free[c][l-1]))
			s.free[c][l-1] = nil
			s.free[c] = s.free[c][:l-1]
			s.pooled -= bytes
			return bytes
		}
		s.maxCls = c - 1
	}
	return 0
}

// drain drops every pooled buffer (Close).
func (s *store) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	memacct.Add(memacct.Backend, -s.pooled)
	s.free, s.pooled, s.maxCls = nil, 0, 0
	// The pool's bound starts again from what is live: kept at the old
	// high, the pool refilled to training's peak beside the layer-wise
	// evaluation's chunks that the drain made room for (GAT at --mem
	// 100MiB: 28.7 MiB of backend storage against a 27 MiB chunk bound).
	s.high = s.live
}
