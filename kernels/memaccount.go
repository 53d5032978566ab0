package kernels

import (
	"fmt"
	"sync"
)

// MemAccount is a backend's byte accounting of its live handles, the source
// of MemStats. Backends reserve before allocating and release on free, so
// MaxBytes is enforced the same way on every backend. The zero value is an
// unlimited account; it is safe for concurrent use.
type MemAccount struct {
	mu    sync.Mutex
	max   int64
	stats MemStats
}

// SetMax caps Allocated at max bytes (0: no cap). Call it before use.
func (a *MemAccount) SetMax(max int64) { a.max = max }

// Reserve accounts one more handle of bytes, or fails with ErrOutOfMemory
// (naming backend) when that would pass the cap.
func (a *MemAccount) Reserve(backend string, bytes int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &a.stats
	if a.max > 0 && s.Allocated+bytes > a.max {
		return fmt.Errorf("%w: %s: %d bytes requested, %d of %d in use", ErrOutOfMemory, backend, bytes, s.Allocated, a.max)
	}
	s.Allocated += bytes
	s.Handles++
	s.Peak = max(s.Peak, s.Allocated)
	return nil
}

// Release accounts a freed handle of bytes.
func (a *MemAccount) Release(bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Allocated -= bytes
	a.stats.Handles--
}

// Stats returns the current accounting.
func (a *MemAccount) Stats() MemStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
