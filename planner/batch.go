package planner

import (
	"math"

	"github.com/ssdgnn/ssdgnn/sample"
)

// Labels of the unique-contribution propagation (see the package doc).
const (
	labUnset int32 = -1
	labRoot  int32 = -2 // reachable without a single owning hop-1 node
)

// counters are the per-node arrays a profile accumulates.
type counters struct {
	feat, histSample, histGather, nbr []uint32
}

func newCounters(n int64) *counters {
	return &counters{
		feat:       make([]uint32, n),
		histSample: make([]uint32, n),
		histGather: make([]uint32, n),
		nbr:        make([]uint32, n),
	}
}

func addSat(a []uint32, i int64, x uint64) {
	s := uint64(a[i]) + x
	if s > math.MaxUint32 {
		s = math.MaxUint32
	}
	a[i] = uint32(s)
}

// analyzer turns one sampled batch into per-node counts. Its scratch
// slices are reused across batches; it is not safe for concurrent use.
type analyzer struct {
	// global reports whether v's list is served by the global neighbour
	// cache; dynamic whether it is served by the macro batch's dynamic
	// cache. Either may be nil (never).
	global  func(v int64) bool
	dynamic func(v int64) bool

	served     []bool
	sPrev, sCu []uint64
	lPrev, lCu []int32
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// batchTotals are the β inputs of one batch.
type batchTotals struct {
	sampled  int64 // sampled neighbours: Σ edges over all blocks
	gathered int64 // rows gathered: |Blocks[0].Src|
}

// add accumulates batch b into c and returns its totals.
func (a *analyzer) add(b *sample.Batch, c *counters) batchTotals {
	L := len(b.Blocks)
	if L == 0 {
		return batchTotals{}
	}
	nodes := b.Blocks[0].Src
	n := len(nodes)
	nT := b.Blocks[L-1].NumDst
	hop1End := len(b.Blocks[L-1].Src)
	tot := batchTotals{gathered: int64(n)}
	for l := range b.Blocks {
		tot.sampled += int64(b.Blocks[l].NumEdges())
	}

	// saved_IO_feat: every input-layer source is gathered once.
	for _, v := range nodes {
		addSat(c.feat, v, 1)
	}

	// Which looked-up lists come from storage, and the neighbour-cache
	// benefit: lookups the dynamic cache does not serve.
	looked := b.Blocks[0].NumDst
	a.served = grow(a.served, looked)
	for i := 0; i < looked; i++ {
		v := nodes[i]
		dyn := a.dynamic != nil && a.dynamic(v)
		a.served[i] = dyn || (a.global != nil && a.global(v))
		if !dyn {
			addSat(c.nbr, v, 1)
		}
	}
	if L < 2 {
		return tot
	}

	// saved_IO_hist_sample: s_l[u] = Σ_{c ∈ sampled(u, block l)}
	// (w(u) + s_{l-1}[c]), w(u) = 1 iff u's list came from storage.
	a.sPrev = grow(a.sPrev, n)
	a.sCu = grow(a.sCu, n)
	clear(a.sPrev)
	for l := 0; l <= L-2; l++ {
		blk := &b.Blocks[l]
		for u := 0; u < blk.NumDst; u++ {
			var w uint64
			if !a.served[u] {
				w = 1
			}
			var s uint64
			for _, ch := range blk.Indices[blk.Indptr[u]:blk.Indptr[u+1]] {
				s += w
				if l > 0 {
					s += a.sPrev[ch]
				}
			}
			a.sCu[u] = s
		}
		a.sPrev, a.sCu = a.sCu, a.sPrev
	}
	for i := nT; i < hop1End; i++ {
		if s := a.sPrev[i]; s > 0 {
			addSat(c.histSample, nodes[i], s)
		}
	}

	// saved_IO_hist_gather: owner labels propagated step by step (block
	// L-1 first); a node keeps its state between steps ("stays") because
	// the sampler expands every node already reached.
	a.lPrev = grow(a.lPrev, n)
	a.lCu = grow(a.lCu, n)
	for i := range a.lPrev {
		a.lPrev[i] = labUnset
	}
	for i := 0; i < nT; i++ {
		a.lPrev[i] = labRoot
	}
	for step := 0; step < L; step++ {
		blk := &b.Blocks[L-1-step]
		copy(a.lCu, a.lPrev)
		for u := 0; u < blk.NumDst; u++ {
			e := a.lPrev[u]
			if u >= nT && u < hop1End {
				e = int32(u)
			}
			for _, ch := range blk.Indices[blk.Indptr[u]:blk.Indptr[u+1]] {
				switch x := a.lCu[ch]; {
				case x == labUnset:
					a.lCu[ch] = e
				case x != e:
					a.lCu[ch] = labRoot
				}
			}
		}
		a.lPrev, a.lCu = a.lCu, a.lPrev
	}
	for i := hop1End; i < n; i++ {
		if o := a.lPrev[i]; o >= 0 {
			addSat(c.histGather, nodes[o], 1)
		}
	}
	return tot
}
