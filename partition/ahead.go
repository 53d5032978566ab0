package partition

import (
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/storage"
)

// Read-ahead for a first-level stream. Placing a node has two halves.
// Gathering (its neighbour list from the CSR, and for Fennel every
// neighbour's hash locations) reads only what no stream writes, so it can
// run ahead of the stream. Counting, choosing and inserting read and
// write the stream's state, so they must run in stream order. Level 1 is
// one stream on one goroutine while the other cores idle, so runAhead
// gathers on a second goroutine, a bounded number of chunks ahead, and
// places on the stream's own. Each node is placed from exactly the
// neighbours and locations place would gather, so the assignment is the
// same (TestReadAheadSame). Level 2 already keeps every worker busy with
// its own streams and does not read ahead.
const (
	aheadChunks = 4       // chunks queued between the two goroutines
	aheadNodes  = 1024    // nodes per chunk at most
	aheadBytes  = 1 << 20 // a chunk's neighbour ids and locations, before it is sent
)

// aheadChunk holds consecutive nodes of one pass's stream, gathered. A
// chunk is sent once its neighbours' ids and hash locations reach
// aheadBytes (at h = 7, 16,384 neighbours), or it holds aheadNodes nodes.
// A node whose list alone is larger is not gathered ahead (big): the
// stream's goroutine gathers it itself. So no chunk ever holds more than
// twice aheadBytes, its buffers are allocated once at that size, and the
// read-ahead's memory is readAheadBytes whatever the degrees.
type aheadChunk struct {
	pass  int
	items []aheadNode
	nbrs  []int64
	locs  []uint64 // h per neighbour (Fennel)
	own   []uint64 // h per node: the node's own locations (Fennel)
}

type aheadNode struct {
	v      int64
	lo, hi int // neighbours in nbrs[lo:hi]
	big    bool
}

// aheadEdges is how many neighbours fill a chunk's aheadBytes with hk
// hash locations each.
func aheadEdges(hk uint) int { return aheadBytes / (8 + 8*int(hk)) }

func newAheadChunk(hk uint) *aheadChunk {
	e, h := aheadEdges(hk), int(hk)
	return &aheadChunk{items: make([]aheadNode, 0, aheadNodes), nbrs: make([]int64, 0, 2*e),
		locs: make([]uint64, 0, 2*e*h), own: make([]uint64, 0, aheadNodes*h)}
}

// readAheadBytes is the memory of runAhead's chunks for hk hash locations
// a node (0 for FennelExact): 12.5 MiB at the default false-positive
// rate's h = 7, 12.2 MiB for FennelExact.
func readAheadBytes(hk uint) int64 {
	e, h := int64(aheadEdges(hk)), int64(hk)
	per := 2*e*8 + 2*e*8*h + aheadNodes*8*h + aheadNodes*int64(unsafe.Sizeof(aheadNode{}))
	return (aheadChunks + 2) * per
}

// readsAhead reports whether run gathers on a second goroutine: a stream
// with a worker to spare (level 1) and nodes to stream.
func (s *streamer) readsAhead() bool {
	return s.opts.readsAhead() && s.streamLen() > 0
}

// readsAhead reports whether level 1 reads ahead under o.
func (o *Options) readsAhead() bool { return o.Workers > 1 && !o.noReadAhead }

// readAheadBytes is the read-ahead's memory when level 1 of a graph of n
// nodes runs under o: the chunks for the h of its level-1 filters, 0
// where it does not read ahead.
func (o *Options) readAheadBytes(n int64) int64 {
	switch {
	case !o.readsAhead():
		return 0
	case o.Method == Fennel:
		capN, _ := level1Caps(n, 0, o.Parts, o.k2(), o.Epsilon)
		_, h := slicedParams(capN, o.FalsePositive)
		return readAheadBytes(h)
	case o.Method == FennelExact:
		return readAheadBytes(0)
	}
	return 0
}

// runAhead is run with the gathering on a second goroutine, which it
// owns: it stops and waits for it before returning.
func (s *streamer) runAhead(passes int) error {
	full := make(chan *aheadChunk, aheadChunks)
	free := make(chan *aheadChunk, aheadChunks+2)
	for range aheadChunks + 2 {
		free <- newAheadChunk(s.hashes())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
		defer wg.Done()
		s.readAhead(passes, full, free, stop)
	}()
	defer func() {
		close(stop)
		wg.Wait()
		s.nbrs, s.locs = nil, nil // they may alias a chunk
	}()
	hk := int(s.hashes())
	var bigN []int64
	var bigL []uint64
	pass := -1
	for c := range full {
		if c.pass != pass {
			if pass >= 0 {
				s.endPass(pass)
			}
			pass = c.pass
			s.beginPass(pass)
		}
		for j, it := range c.items {
			if it.big {
				bigN, bigL = s.gatherTo(it.v, bigN[:0], bigL[:0], s.hs)
				s.nbrs, s.locs = bigN, bigL
			} else {
				s.nbrs = c.nbrs[it.lo:it.hi:it.hi]
				s.locs = c.locs[it.lo*hk : it.hi*hk : it.hi*hk]
			}
			var own []uint64
			if s.spec.filter {
				own = c.own[j*hk : (j+1)*hk : (j+1)*hk]
			}
			if err := s.placeGathered(it.v, pass, own); err != nil {
				return err
			}
		}
		free <- c
	}
	if pass >= 0 {
		s.endPass(pass)
	}
	s.prev = nil
	return nil
}

// readAhead gathers every pass's stream into chunks taken from free and
// sends them on full, which it closes when done. It returns early when
// stop is closed.
func (s *streamer) readAhead(passes int, full chan<- *aheadChunk, free <-chan *aheadChunk, stop <-chan struct{}) {
	defer close(full)
	var hs *hasher
	if s.spec.filter {
		hs = newHasher(s.filters.h)
	}
	n, edges := s.streamLen(), aheadEdges(s.hashes())
	for pass := range passes {
		for i := 0; i < n; {
			var c *aheadChunk
			select {
			case c = <-free:
			case <-stop:
				return
			}
			c.pass = pass
			c.items, c.nbrs, c.locs, c.own = c.items[:0], c.nbrs[:0], c.locs[:0], c.own[:0]
			for ; i < n && len(c.items) < aheadNodes && len(c.nbrs) < edges; i++ {
				v := s.streamAt(i)
				it := aheadNode{v: v, lo: len(c.nbrs)}
				if s.d.Neighbors(v).Len() > edges {
					it.big = true
				} else {
					c.nbrs, c.locs = s.gatherTo(v, c.nbrs, c.locs, hs)
				}
				it.hi = len(c.nbrs)
				if hs != nil {
					c.own = append(c.own, hs.locations(v)...)
				}
				c.items = append(c.items, it)
			}
			select {
			case full <- c:
			case <-stop:
				return
			}
		}
	}
}
