package sample

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/storage"
)

// macroState is one macro batch's dynamic cache, loaded by the first
// worker that needs it and dropped when its last batch is sampled.
type macroState struct {
	once      sync.Once
	cache     *DynamicCache
	err       error
	remaining atomic.Int32
	first     int // index of the macro batch's first batch
	// counted is the cache's bytes in memacct.DynamicCache, released
	// when its last batch is sampled or the iterator is closed.
	counted atomic.Int64
}

// release drops the macro batch's cache and its memacct count, or hands
// both to spare when spare is not nil and has room.
func (ms *macroState) release(spare *spareCache) {
	n := ms.counted.Swap(0)
	if spare == nil || !spare.put(ms.cache, n) {
		memacct.Add(memacct.DynamicCache, -n)
	}
	ms.cache = nil
}

// MacroCachesHeld is the most macro batches' dynamic caches an epoch of
// a partition-mode Sampler with workers sampling goroutines holds at once,
// live or spare: workers. A macro batch's cache lives from the start of
// its first batch to the end of its last, batches go to the workers in
// order one at a time, and a macro batch's batches are consecutive. So a
// live cache with no worker on one of its batches has batches not yet
// handed out, which makes it the latest macro batch started; the worker
// that loaded it finished its batch and, being handed batches in order,
// is idle until it gets that macro batch's next one. Every other live
// cache has a busy worker of its own. The spare cache does not add one: a
// load takes it before allocating, so the caches held only grow when none
// is spare (TestMacroCachesAlive).
func MacroCachesHeld(workers int) int { return max(workers, 1) }

// spareCache keeps the last released macro batch's dynamic cache for the
// next macro batch to load into (DynamicCache.Reset, Reserve), instead of
// allocating new arrays while the old ones await collection: that left a
// whole cache's pages free but resident after every macro batch. It holds
// at most one cache, counted in memacct.DynamicCache while it waits; a
// load takes it before allocating, so the caches held, live or spare,
// never outnumber the most that were live at once. The iterator drops it
// on Close.
type spareCache struct {
	mu      sync.Mutex
	c       *DynamicCache
	counted int64
}

// put keeps c (counted bytes in memacct) if the spare is empty.
func (p *spareCache) put(c *DynamicCache, counted int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c == nil || p.c != nil {
		return false
	}
	c.Reset()
	p.c, p.counted = c, counted
	return true
}

// take returns the spare cache and the bytes counted for it, or a new
// empty cache and 0.
func (p *spareCache) take(wide bool) (*DynamicCache, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, n := p.c, p.counted
	p.c, p.counted = nil, 0
	if c == nil {
		return NewDynamicCache(wide), 0
	}
	return c, n
}

// drop lets the spare cache go.
func (p *spareCache) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	memacct.Add(memacct.DynamicCache, -p.counted)
	p.c, p.counted = nil, 0
}

type result struct {
	b   *Batch
	err error
}

type job struct {
	i   int
	out chan result
}

// Iterator delivers one epoch's batches in batch order. Its goroutines
// stop when the epoch is exhausted, on Close, or when the context given to
// Epoch is cancelled. Next and Close must not be called concurrently.
type Iterator struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	pending chan chan result
	plan    *Plan
	err     error
	stats   LookupStats
	done    bool
	macros  []*macroState
	spare   spareCache
	// held is a result channel Next took from pending but stopped
	// waiting on (the context was cancelled first); Close releases the
	// batch its worker still delivers there.
	held chan result
}

// Epoch starts sampling epoch's batches with Options.Workers goroutines.
// The caller must Close the iterator.
func (s *Sampler) Epoch(ctx context.Context, epoch int) *Iterator {
	ctx, cancel := context.WithCancel(ctx)
	it := &Iterator{ctx: ctx, cancel: cancel}
	plan, err := s.Plan(epoch)
	if err != nil {
		it.err = err
		return it
	}
	it.plan = plan
	macros := make([]*macroState, len(plan.MacroParts))
	it.macros = macros
	for i, m := range plan.Macro {
		if m < 0 {
			continue
		}
		if macros[m] == nil {
			macros[m] = &macroState{first: i}
		}
		macros[m].remaining.Add(1)
	}
	jobs := make(chan job)
	it.pending = make(chan chan result, s.o.Prefetch)
	it.wg.Add(1 + s.o.Workers)
	go func() {
		defer it.wg.Done()
		defer close(it.pending)
		defer close(jobs)
		for i := range plan.Batches {
			out := make(chan result, 1)
			select {
			case jobs <- job{i, out}:
			case <-ctx.Done():
				return
			}
			select {
			case it.pending <- out:
			case <-ctx.Done():
				// A worker took the job and always answers on out;
				// nobody else will read it, so release what it sampled.
				if r := <-out; r.b != nil {
					r.b.Release()
				}
				return
			}
		}
	}()
	for range s.o.Workers {
		go func() {
			defer it.wg.Done()
			// A mapped file (the CSR, a partitioning's adjacency) that
			// another program truncates faults on its next read: with
			// this, the batch's error names it (storage.CatchFault)
			// instead of the process dying of SIGBUS.
			debug.SetPanicOnFault(true)
			w := s.newWorker()
			defer w.release()
			for j := range jobs {
				if ctx.Err() != nil {
					j.out <- result{err: ctx.Err()}
					continue
				}
				b, err := w.runCatching(ctx, plan, macros, &it.spare, j.i)
				j.out <- result{b, err}
			}
		}()
	}
	return it
}

// runCatching is run with a fault in a mapped file as its error.
func (w *worker) runCatching(ctx context.Context, plan *Plan, macros []*macroState, spare *spareCache, i int) (b *Batch, err error) {
	defer storage.CatchFault(&err)
	return w.run(ctx, plan, macros, spare, i)
}

// run samples batch i of plan, loading its macro batch's cache if needed.
func (w *worker) run(ctx context.Context, plan *Plan, macros []*macroState, spare *spareCache, i int) (*Batch, error) {
	t0 := time.Now()
	w.reuseWait = 0
	m := plan.Macro[i]
	var dyn *DynamicCache
	var ms *macroState
	if m >= 0 {
		ms = macros[m]
		ms.once.Do(func() {
			defer storage.CatchFault(&ms.err) // the macro batch's error for every worker
			c, carried := spare.take(w.s.wide)
			if err := w.s.parts.LoadAdjacency(plan.MacroParts[m], c); err != nil {
				memacct.Add(memacct.DynamicCache, -carried)
				ms.err = fmt.Errorf("sample: load macro batch %d: %w", m, err)
				return
			}
			ms.cache = c
			ms.counted.Store(c.MemBytes())
			memacct.Add(memacct.DynamicCache, c.MemBytes()-carried)
		})
		if ms.err != nil {
			return nil, ms.err
		}
		dyn = ms.cache
	}
	b, err := w.sample(ctx, plan.Epoch, i, m, plan.Batches[i], dyn)
	if err == nil {
		b.SampleSeconds = max(time.Since(t0)-w.reuseWait, 0).Seconds()
	}
	if ms != nil {
		if err == nil && ms.first == i {
			b.Stats.LoadBytes = dyn.DataBytes()
			b.DynamicBytes = dyn.NeedBytes()
		}
		if ms.remaining.Add(-1) == 0 {
			ms.release(spare)
		}
	}
	return b, err
}

// Plan is the epoch's batch construction (nil if it failed).
func (it *Iterator) Plan() *Plan { return it.plan }

// Next returns the next batch, io.EOF after the last one, or the first
// error (sampling, storage, or the context's).
func (it *Iterator) Next() (*Batch, error) {
	if it.err != nil {
		return nil, it.err
	}
	if it.done {
		return nil, ErrClosed
	}
	if err := it.ctx.Err(); err != nil {
		it.err = err
		return nil, err
	}
	var out chan result
	var ok bool
	select {
	case out, ok = <-it.pending:
	case <-it.ctx.Done():
		it.err = it.ctx.Err()
		return nil, it.err
	}
	if !ok {
		if err := it.ctx.Err(); err != nil {
			it.err = err
			return nil, err
		}
		it.err = io.EOF
		return nil, io.EOF
	}
	var r result
	select {
	case r = <-out:
	case <-it.ctx.Done():
		it.held = out
		it.err = it.ctx.Err()
		return nil, it.err
	}
	if r.err != nil {
		it.err = r.err
		it.cancel()
		return nil, r.err
	}
	it.stats.Add(r.b.Stats)
	return r.b, nil
}

// Stats sums the Stats of the batches delivered so far.
func (it *Iterator) Stats() LookupStats { return it.stats }

// Close stops the iterator's goroutines and waits for them.
func (it *Iterator) Close() error {
	it.cancel()
	it.wg.Wait()
	// Batches sampled but never delivered. Every worker has returned, so
	// each job it took has its answer waiting.
	if it.held != nil {
		select {
		case r := <-it.held:
			if r.b != nil {
				r.b.Release()
			}
		default:
		}
		it.held = nil
	}
	if it.pending != nil {
		for out := range it.pending {
			select {
			case r := <-out:
				if r.b != nil {
					r.b.Release()
				}
			default:
			}
		}
	}
	// Macro batches whose last batch was never sampled (cancelled).
	for _, ms := range it.macros {
		if ms != nil && ms.counted.Load() != 0 {
			ms.release(nil)
		}
	}
	it.spare.drop()
	if !it.done {
		it.done = true
		if it.err == nil || it.err == io.EOF {
			it.err = ErrClosed
		}
	}
	return nil
}
