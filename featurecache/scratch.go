package featurecache

import (
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/storage"
)

// scratch is one Gather call's state beside dst: the miss indices, the
// misses' read requests and GatherF32's undecoded rows, counted in
// memacct.BatchBuffers while it exists. A Cache keeps its idle scratches
// for reuse until Close, but only those sized for at most keepIDs ids: a
// larger call (a whole unstreamed batch, an evaluation's read) frees its
// scratch when it returns, so what stays counted between calls does not
// depend on the largest call ever made.
type scratch struct {
	miss    []int
	reqs    []storage.RowReq
	rows    []byte
	counted int64
}

// gatherIDBytes is a scratch's bytes per id of a call: a miss index and a
// read request.
const gatherIDBytes = 8 + 16

// keepIDs is the most ids an idle scratch kept for reuse is sized for:
// one chunk of the streamed input layer or of a read session.
const keepIDs = storage.DefaultScatterChunk

// reserve gives s room for n ids.
func (s *scratch) reserve(n int) {
	if cap(s.miss) >= n {
		return // miss and reqs grow together
	}
	s.miss, s.reqs = make([]int, 0, n), make([]storage.RowReq, 0, n)
	s.recount()
}

// rowBuf is s's row buffer, exactly n bytes.
func (s *scratch) rowBuf(n int64) []byte {
	if int64(cap(s.rows)) < n {
		s.rows = make([]byte, n)
		s.recount()
	}
	return s.rows[:n]
}

// recount brings s's share of memacct.BatchBuffers up to date with its
// capacities.
func (s *scratch) recount() {
	n := 8*int64(cap(s.miss)) + 16*int64(cap(s.reqs)) + int64(cap(s.rows))
	memacct.Add(memacct.BatchBuffers, n-s.counted)
	s.counted = n
}

func (c *Cache) getScratch() *scratch {
	c.scratchMu.Lock()
	defer c.scratchMu.Unlock()
	if n := len(c.scratches); n > 0 {
		s := c.scratches[n-1]
		c.scratches = c.scratches[:n-1]
		return s
	}
	return &scratch{}
}

func (c *Cache) putScratch(s *scratch) {
	c.scratchMu.Lock()
	defer c.scratchMu.Unlock()
	if c.closed.Load() || cap(s.miss) > keepIDs || int64(cap(s.rows)) > keepIDs*c.rowBytes {
		memacct.Add(memacct.BatchBuffers, -s.counted)
		return
	}
	c.scratches = append(c.scratches, s)
}

// releaseScratches uncounts and drops the idle scratches (Close).
func (c *Cache) releaseScratches() {
	c.scratchMu.Lock()
	defer c.scratchMu.Unlock()
	for _, s := range c.scratches {
		memacct.Add(memacct.BatchBuffers, -s.counted)
	}
	c.scratches = nil
}

// GatherCallBytes and GatherSlotBytes bound what one Gather or GatherF32
// call of rows ids on d, with opts, holds beside dst, all counted in
// memacct.BatchBuffers. They count once per concurrent caller. Between
// calls the cache keeps the slots and the scratch of calls of at most
// keepIDs ids (GatherCallBytes(d, keepIDs, opts)).
//
// GatherCallBytes is the part that grows with the call: gatherIDBytes per
// id, the undecoded rows when d's features are not float32, and the read
// session's per-item state as if every id missed
// (storage.SessionItemsBound).
func GatherCallBytes(d *storage.Dataset, rows int64, opts *Options) int64 {
	o := opts.withDefaults(d)
	rb := d.FeatRowBytes()
	n := rows * gatherIDBytes
	if rb != 4*int64(d.FeatDim()) {
		n += rows * rb
	}
	return n + storage.SessionItemsBound(rows, o.scatterOptions())
}

// GatherSlotBytes is the part that does not: the read session's slots
// (storage.SlotBytesBound).
func GatherSlotBytes(d *storage.Dataset, opts *Options) int64 {
	o := opts.withDefaults(d)
	return storage.SlotBytesBound(d.FeatRowBytes(), o.scatterOptions())
}

// scatterOptions is the memory-relevant part of the cache's read options:
// the read size and depth.
func (o *Options) scatterOptions() storage.ScatterOptions {
	return storage.ScatterOptions{MaxReadBytes: o.MaxReadBytes, Depth: o.IODepth}
}
