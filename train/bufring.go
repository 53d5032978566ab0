package train

import (
	"context"
	"sync"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// DefaultInFlight is the default Options.InFlight: one batch gathered while
// the previous one is computed.
const DefaultInFlight = 2

// bufRing bounds and recycles the host feature buffers of an epoch: at most
// depth buffers exist, get blocks until one is returned, and a buffer keeps
// its capacity across batches, so after the first few batches gather
// allocates nothing. A buffer is held from gather until its batch's input
// tensor is freed (backends that adopt host memory) or until upload returns
// (backends that copy), so depth bounds the batches whose input features are
// alive at once.
type bufRing struct {
	free chan []float32
	mu   struct {
		sync.Mutex
		live, peak int
		allocs     int   // buffers made or grown
		capBytes   int64 // Σ capacity of every buffer made (live or in the ring)
	}
}

func newBufRing(depth int) *bufRing {
	r := &bufRing{free: make(chan []float32, depth)}
	for range depth {
		// Non-nil, so that a batch whose every row is served elsewhere
		// (zero-copy hits: get(ctx, 0)) still holds a token that put
		// returns; put ignores nil, the mark of a buffer already returned.
		r.free <- make([]float32, 0)
	}
	return r
}

// get returns a buffer of n values (contents undefined), waiting for one to
// be returned when depth are out.
func (r *bufRing) get(ctx context.Context, n int) ([]float32, error) {
	var b []float32
	select {
	case b = <-r.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cap(b) < n {
		r.mu.capBytes -= 4 * int64(cap(b))
		// Grow with 1/8 slack so slowly rising batch sizes do not
		// reallocate every time.
		memacct.Add(memacct.BatchBuffers, -4*int64(cap(b)))
		b = make([]float32, n, n+n/8)
		r.mu.capBytes += 4 * int64(cap(b))
		memacct.Add(memacct.BatchBuffers, 4*int64(cap(b)))
		r.mu.allocs++
	}
	r.mu.live++
	r.mu.peak = max(r.mu.peak, r.mu.live)
	return b[:n], nil
}

// release drops the ring's buffers from the memacct count; the ring must
// not be used afterwards.
func (r *bufRing) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	memacct.Add(memacct.BatchBuffers, -r.mu.capBytes)
	r.mu.capBytes = 0
}

// put returns a buffer taken by get; nil (a buffer already returned,
// whose holder cleared it) is ignored. get never returns nil.
func (r *bufRing) put(b []float32) {
	if b == nil {
		return
	}
	r.mu.Lock()
	r.mu.live--
	r.mu.Unlock()
	r.free <- b
}

// ringStats describes a ring's use.
type ringStats struct {
	Peak, Allocs int
	CapBytes     int64
}

func (r *bufRing) stats() ringStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ringStats{Peak: r.mu.peak, Allocs: r.mu.allocs, CapBytes: r.mu.capBytes}
}

// adopter is implemented by backends whose tensors can take over a host
// slice without copying it (kernels/cpu): the uploaded input is then the
// gather buffer itself, not a second copy.
type adopter interface {
	Adopt(rows, cols int, data []float32) (kernels.Tensor, error)
}
