package planner

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/splitmix"
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
	// featHeld[v]: the batches of the held-out epoch whose input layer
	// reads v's row from storage (Profile.FeatHeldOut). Kept.
	featHeld []uint32
	// histAppear and histHits: hop-1 appearances and hits in HistRounds
	// steady-state replays (see steady). Kept in the profile.
	histAppear, histHits []uint32
	// The appearance log the validity model replays (not kept): log holds
	// every possible hop-1 appearance's node in order and logP its
	// probability (of math.MaxUint16), iterStart[i] the offset of
	// iteration i's first, epochStart the first iteration of each
	// profiled epoch. iter is the current batch's iteration.
	log        []uint32
	logP       []uint16
	iterStart  []int64
	epochStart []int64
	iter       int64
	// reach[v]: while a batch is analysed, the probability that v is
	// sampled at hop 1 (0: no target's neighbour; −1: a target). Zero
	// between batches.
	reach []float32
	// logged is the log's bytes counted in memacct.Profile.
	logged           int64
	staleness, depth int64
	// shuffle: steady replays each epoch's batches in an order drawn
	// afresh every round from seed (else in the profiled order).
	shuffle bool
	seed    uint64
}

// counterArrays is the number of per-node uint32 arrays newCounters
// allocates.
const counterArrays = 9

// counterBytes is the memory of newCounters(n).
func counterBytes(n int64) int64 { return counterArrays * 4 * n }

// ProfileMemBytes bounds the memory of a profiling epoch's per-node
// arrays over n nodes: the counters (newCounters) and the transient
// array the validity model's replay adds once they stop growing (steady).
// The appearance log is apart (HistLogBytes).
func ProfileMemBytes(n int64) int64 { return counterBytes(n) + 4*n }

// HistLogBytes bounds the validity model's appearance log over epochs
// profiled epochs of graph indptr with training nodes train: per epoch,
// 6 bytes per possible hop-1 appearance, at most one per neighbour of
// each training node (Σ of their degrees), and 8 bytes per iteration (at
// most one per training node).
func HistLogBytes(indptr, train []int64, epochs int64) int64 {
	var deg int64
	for _, t := range train {
		if t >= 0 && t+1 < int64(len(indptr)) {
			deg += indptr[t+1] - indptr[t]
		}
	}
	return max(epochs, 1) * (6*deg + 8*(int64(len(train))+1))
}

// HistRounds is the number of replays of the profiled iterations the
// validity model counts hits over (after histWarmRounds that it does not
// count): any node whose hits repeat with a period of 1, 2, 3, 4, 6 or 12
// rounds is counted exactly.
const (
	HistRounds     = 12
	histWarmRounds = 2
	// histModel is the validity model Meta.HistModel records.
	histModel = 2
)

func newCounters(n int64) *counters {
	return &counters{
		feat:       make([]uint32, n),
		histSample: make([]uint32, n),
		histGather: make([]uint32, n),
		nbr:        make([]uint32, n),
		featSingle: make([]uint32, n),
		featHeld:   make([]uint32, n),
		histAppear: make([]uint32, n),
		histHits:   make([]uint32, n),
		reach:      make([]float32, n),
		staleness:  histcache.DefaultStaleness,
		depth:      1,
	}
}

// startEpoch records that iteration c.iter begins a profiled epoch.
func (c *counters) startEpoch() {
	before := cap(c.epochStart)
	c.epochStart = append(c.epochStart, c.iter)
	c.count(8 * int64(cap(c.epochStart)-before))
}

// hop1 records that v appears at hop 1 (not a target) of iteration
// c.iter with probability p, in order: iterations ascend.
func (c *counters) hop1(v int64, p float64) {
	c.markIter(c.iter)
	before, beforeP := cap(c.log), cap(c.logP)
	c.log = append(c.log, uint32(v))
	c.logP = append(c.logP, uint16(math.Round(min(max(p, 0), 1)*math.MaxUint16)))
	c.count(4*int64(cap(c.log)-before) + 2*int64(cap(c.logP)-beforeP))
}

// hop1Fanout records the possible hop-1 appearances of a batch whose
// targets are targets, each sampling k of its neighbours (lists(t))
// uniformly without replacement (every one when k < 0 or its degree is
// at most k): every neighbour v that is not a target appears with
// probability 1 − Π (1 − min(1, k/deg(t))) over the targets t it
// neighbours (a neighbour listed m times by t counts m times).
func (c *counters) hop1Fanout(targets []int64, k int, lists func(v int64) idList) {
	for _, t := range targets {
		c.reach[t] = -1
	}
	start := len(c.log)
	for _, t := range targets {
		l := lists(t)
		n := l.Len()
		pi := float32(1)
		if k >= 0 && n > k {
			pi = float32(k) / float32(n)
		}
		if pi == 0 {
			continue // samples none (fanout 0): nothing possible
		}
		for j := range n {
			v := l.At(j)
			switch r := c.reach[v]; {
			case r < 0:
			case r == 0:
				c.reach[v] = pi
				c.hop1(v, 0) // its probability is filled in below
			default:
				c.reach[v] = r + pi - r*pi
			}
		}
	}
	for i := start; i < len(c.log); i++ {
		v := c.log[i]
		c.logP[i] = uint16(math.Round(float64(min(c.reach[v], 1)) * math.MaxUint16))
		c.reach[v] = 0
	}
	for _, t := range targets {
		c.reach[t] = 0
	}
}

// markIter records the log's offset as the start of every iteration up
// to i not yet started.
func (c *counters) markIter(i int64) {
	before := cap(c.iterStart)
	for int64(len(c.iterStart)) <= i {
		c.iterStart = append(c.iterStart, int64(len(c.log)))
	}
	c.count(8 * int64(cap(c.iterStart)-before))
}

// count adds b bytes of the log to memacct.Profile.
func (c *counters) count(b int64) {
	if b != 0 {
		c.logged += b
		memacct.Add(memacct.Profile, b)
	}
}

// steady replays the logged total iterations as the trainer would meet
// them if they repeated for ever, and sets histHits to the hits of
// HistRounds rounds after histWarmRounds. An entry pushed at iteration p
// serves iteration i (its reuse decision) when i−p < staleness and the
// push is visible: decisions are taken after computing batch i−depth, so
// p ≤ i−depth, except for an epoch's first depth batches, decided when
// the epoch starts, which see every push before it. A node is pushed only
// at an appearance that is not a hit (a hit does not refresh the entry),
// so a node reused through one epoch may find its entry stale in the
// next: with staleness about an epoch, a node seen once an epoch hits
// every other epoch. The log is released.
func (c *counters) steady(total int64) error {
	defer func() {
		memacct.Add(memacct.Profile, -c.logged)
		c.log, c.logP, c.iterStart, c.epochStart, c.logged = nil, nil, nil, nil, 0
	}()
	clear(c.histHits)
	clear(c.histAppear)
	c.reach = nil // the replay's lastPush takes its place
	if total == 0 || len(c.log) == 0 {
		return nil
	}
	rounds := int64(histWarmRounds + HistRounds)
	if total > (math.MaxUint32-1)/rounds {
		return fmt.Errorf("planner: %d profiled iterations are too many for the history validity model's replay", total)
	}
	c.markIter(total)
	// lastPush[v]: v's last push, as an iteration across rounds + 1 (0:
	// none).
	lastPush := make([]uint32, len(c.histHits))
	c.count(4 * int64(len(lastPush)))
	first := c.epochStart
	if len(first) == 0 || first[0] != 0 {
		first = append([]int64{0}, first...)
	}
	// order[k]: the profiled iteration met k-th in a round; with shuffle,
	// each epoch's batches in a fresh order every round, as training's
	// epochs draw theirs afresh.
	order := make([]int64, total)
	c.count(8 * total)
	for r := int64(0); r < rounds; r++ {
		for i := range order {
			order[i] = int64(i)
		}
		if c.shuffle {
			rng := rand.New(rand.NewPCG(c.seed, uint64(r)))
			for e := range first {
				end := total
				if e+1 < len(first) {
					end = first[e+1]
				}
				seg := order[first[e]:end]
				rng.Shuffle(len(seg), func(a, b int) { seg[a], seg[b] = seg[b], seg[a] })
			}
		}
		counted := r >= histWarmRounds
		e := 0 // the epoch of position k within the round
		for k, i := range order {
			for e+1 < len(first) && first[e+1] <= int64(k) {
				e++
			}
			at := r*total + int64(k)
			start := r*total + first[e]
			early := int64(k)-first[e] < c.depth
			for j := c.iterStart[i]; j < c.iterStart[i+1]; j++ {
				v := c.log[j]
				if p := c.logP[j]; p != math.MaxUint16 && uint16(appearHash(c.seed, r, at, v)) >= p {
					continue // not sampled this round
				}
				if counted {
					addSat(c.histAppear, int64(v), 1)
				}
				if lp := lastPush[v]; lp != 0 {
					p := int64(lp) - 1
					visible := at-p >= c.depth || (early && p < start)
					if visible && at-p < c.staleness {
						if counted {
							addSat(c.histHits, int64(v), 1)
						}
						continue
					}
				}
				lastPush[v] = uint32(at + 1)
			}
		}
	}
	return nil
}

// idList is a neighbour list (storage.NodeList).
type idList interface {
	Len() int
	At(i int) int64
}

// appearHash draws whether v, possible at hop 1 at iteration at of round
// r, is sampled there: its low 16 bits fall below the appearance's
// probability (splitmix.Finalize over the inputs).
func appearHash(seed uint64, r, at int64, v uint32) uint64 {
	return splitmix.Finalize(seed ^ uint64(r)<<56 ^ uint64(at)<<24 ^ uint64(v)*0x9e3779b97f4a7c15)
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
	// lists, when set, is the graph's neighbour lists, and hop1Fanout
	// the batches' fanout at hop 1: the validity model then logs every
	// possible hop-1 appearance with its probability (hop1Fanout); nil
	// logs the sampled ones, each certain.
	lists      func(v int64) idList
	hop1Fanout int
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
		if a.lists != nil {
			c.hop1Fanout(nodes[:nT], a.hop1Fanout, a.lists)
		} else {
			for i := nT; i < hop1End; i++ {
				c.hop1(nodes[i], 1)
			}
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
