package planner

import (
	"math"

	"github.com/ssdgnn/ssdgnn/histcache"
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
	// featSingle[v]: the batches whose modelled reads read v's row on
	// its own (readCounter). Kept in the profile.
	featSingle []uint32
	// histAppear and histHits: hop-1 appearances and those the history
	// cache would serve (see hop1). Kept in the profile.
	histAppear, histHits []uint32
	// Transient validity model state (not kept): lastPush[v] and
	// firstSeen[v] are iteration+1 of v's last push and first hop-1
	// appearance (0: none); iter is the current batch's iteration.
	lastPush, firstSeen []uint32
	iter                int64
	staleness, depth    int64
}

// counterArrays is the number of per-node uint32 arrays newCounters
// allocates.
const counterArrays = 9

// ProfileMemBytes is the memory of a profiling epoch's per-node counters
// over n nodes (newCounters): what RunProfile holds beside its sampler.
func ProfileMemBytes(n int64) int64 { return counterArrays * 4 * n }

func newCounters(n int64) *counters {
	return &counters{
		feat:       make([]uint32, n),
		histSample: make([]uint32, n),
		histGather: make([]uint32, n),
		nbr:        make([]uint32, n),
		featSingle: make([]uint32, n),
		histAppear: make([]uint32, n),
		histHits:   make([]uint32, n),
		lastPush:   make([]uint32, n),
		firstSeen:  make([]uint32, n),
		staleness:  histcache.DefaultStaleness,
		depth:      1,
	}
}

// usable reports whether an entry pushed at iteration p is what the reuse
// decision for iteration i finds valid: pushed at least depth batches
// earlier (the decision for i sees pushes of batches ≤ i−depth) and less
// than staleness iterations earlier.
func (c *counters) usable(i, p int64) bool {
	g := i - p
	return g >= c.depth && g < c.staleness
}

// hop1 records that v appears at hop 1 (not a target) of iteration c.iter.
// The appearance is a hit when v's last push is usable; otherwise v is
// computed and pushed at c.iter. A hit does not refresh the entry, as in
// the trainer (reused nodes are not computed, so not pushed).
func (c *counters) hop1(v int64) {
	addSat(c.histAppear, v, 1)
	i := c.iter
	if c.firstSeen[v] == 0 {
		c.firstSeen[v] = uint32(i + 1)
	}
	if p := int64(c.lastPush[v]) - 1; p >= 0 && c.usable(i, p) {
		addSat(c.histHits, v, 1)
		return
	}
	c.lastPush[v] = uint32(i + 1)
}

// wrap applies the assumption that the profiled sequence of total
// iterations repeats: a node's first appearance f, a miss in the linear
// pass, is counted a hit when the last push p of the previous round,
// at p−total, is usable at f. The knock-on effect of that hit on the
// node's later appearances (one push fewer) is ignored. It then releases
// the transient arrays.
func (c *counters) wrap(total int64) {
	for v, f1 := range c.firstSeen {
		if f1 == 0 {
			continue
		}
		f, p := int64(f1)-1, int64(c.lastPush[v])-1
		if c.usable(f+total, p) {
			addSat(c.histHits, int64(v), 1)
		}
	}
	c.lastPush, c.firstSeen = nil, nil
}

// countFeat adds one to saved_IO_feat of every row the gather reads
// from storage: every one of rows but those the feature block serves
// (block nil: none).
func countFeat(feat []uint32, rows []int64, block func(v int64) bool) {
	for _, v := range rows {
		if block == nil || !block(v) {
			addSat(feat, v, 1)
		}
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
	// block reports whether v's feature row is served by the macro
	// batch's dynamic feature block (nil: never); such rows are not
	// counted in saved_IO_feat: a cached copy would save no read.
	block func(v int64) bool

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
	defer func() { c.iter++ }()
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

	// History-cache validity: every non-target hop-1 node (L ≥ 2 only;
	// with one layer there is no history).
	if L >= 2 {
		for i := nT; i < hop1End; i++ {
			c.hop1(nodes[i])
		}
	}

	// saved_IO_feat: every input-layer source is gathered once.
	countFeat(c.feat, nodes, a.block)

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
