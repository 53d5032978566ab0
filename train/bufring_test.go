package train

import (
	"context"
	"testing"
	"time"
)

// TestBufRingEmptyBuffers: a batch that needs no host rows (every input row
// a zero-copy hit) takes a buffer of length 0; returning it must give the
// token back, or the ring runs dry after depth such batches and the
// pipeline deadlocks (seen on a feature cache holding the whole graph).
func TestBufRingEmptyBuffers(t *testing.T) {
	r := newBufRing(2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, n := range []int{0, 0, 0, 5, 0, 3, 0, 0} {
		b, err := r.get(ctx, n)
		if err != nil {
			t.Fatalf("get %d (n=%d): %v (a token was lost)", i, n, err)
		}
		if b == nil || len(b) != n {
			t.Fatalf("get %d: buffer %v of length %d, want a non-nil one of %d", i, b == nil, len(b), n)
		}
		r.put(b)
		r.put(nil) // the holder's second release, after clearing its buffer
	}
	if s := r.stats(); s.Peak != 1 {
		t.Errorf("peak %d buffers out, want 1", s.Peak)
	}
	r.release()
}
