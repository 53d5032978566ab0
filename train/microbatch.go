package train

import (
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
)

// Micro-batches: when a batch's working set does not fit what the memory
// budget leaves it, the trainer cuts the batch into micro-batches by its
// targets and accumulates their gradients before one Adam step.
//
// A micro-batch is the restriction of the sampled batch to the part of its
// message-flow graph that reaches its targets: every node keeps all the
// in-edges it has in the whole batch, so every layer output of a
// micro-batch row equals the whole batch's output for that row (GCN's
// normalisation included, through kernels.Block.SrcDegrees and DstDegrees). Its
// loss is the mean over its labelled targets; scaling its logits'
// gradient by its share of the batch's labelled targets makes the sum of
// the micro-batches' parameter gradients the batch's gradient, up to float
// summation order. Two things are not reproduced: dropout masks are drawn
// per micro-batch (same distribution and seed, other rows), so the update
// equals the unsplit batch's exactly only without dropout; and under the
// gradient history policy a hop-1 node shared by two micro-batches offers
// the cache each micro-batch's share of its gradient, not the sum.

// MaxMicroBatches is the finest split the trainer supports: a batch is cut
// into at most this many micro-batches. The memory check's minimum
// (MinimumBudget) is the fixed state plus the working set of micro-batches
// of ⌈sample.MaxBatchTargets/MaxMicroBatches⌉ targets (microTargets).
const MaxMicroBatches = 64

// microBatch is one micro-batch of a host batch.
type microBatch struct {
	hb *hostBatch
	// full maps the micro-batch's local ids to the batch's.
	full []int32
}

// splitter cuts a host batch into k micro-batches of consecutive targets
// (sizes differ by at most one), one at a time: only the micro-batches
// being computed exist, not all k.
type splitter struct {
	hb     *hostBatch
	k      int
	outDeg [][]int32
	newID  []int32 // scratch: old local → new local, -1 between uses
	order  []int32 // scratch: walk's order when it does not build
	dst0   int     // the last walk's input-layer destinations
}

// newSplitter prepares hb's split into k micro-batches (k clamped to
// [1, hb.targets]). Its per-node tables are counted with hb (under
// memacct.SampledBatches) until hb.uncount.
func newSplitter(hb *hostBatch, k int) *splitter {
	s := &splitter{hb: hb, k: max(1, min(k, hb.targets)), outDeg: make([][]int32, len(hb.blocks)), newID: make([]int32, len(hb.nodes))}
	n := 4 * int64(len(s.newID))
	for l, b := range hb.blocks {
		s.outDeg[l] = b.OutDegrees()
		if b.SrcDegrees == nil { // else the block's own array
			n += 4 * int64(len(s.outDeg[l]))
		}
	}
	memacct.Add(memacct.SampledBatches, n)
	hb.counted += n
	for i := range s.newID {
		s.newID[i] = -1
	}
	return s
}

// targets is micro-batch m's target range [lo, hi) of hb's targets.
func (s *splitter) targets(m int) (lo, hi int) {
	return m * s.hb.targets / s.k, (m + 1) * s.hb.targets / s.k
}

// walk finds the batch-local nodes micro-batch m reaches, in its local
// order (targets first, then each block's new sources, top block first),
// and with build also its blocks (in hb's block order). It leaves the
// newID scratch all -1.
func (s *splitter) walk(m int, build bool) (order []int32, blocks []*kernels.Block) {
	hb := s.hb
	L := len(hb.blocks)
	lo, hi := s.targets(m)
	order = s.order[:0] // rows only counts: reuse the last walk's slice
	if build {
		order = make([]int32, 0, hi-lo)
	}
	for u := lo; u < hi; u++ {
		s.newID[u] = int32(len(order))
		order = append(order, int32(u))
	}
	if build {
		blocks = make([]*kernels.Block, L)
	}
	for l := L - 1; l >= 0; l-- {
		fb := hb.blocks[l]
		nd := len(order)
		if l == 0 {
			s.dst0 = nd
		}
		var kb *kernels.Block
		if build {
			kb = &kernels.Block{NumDst: nd, Indptr: make([]int32, nd+1)}
		}
		for i := 0; i < nd; i++ {
			u := order[i]
			for _, w := range fb.Indices[fb.Indptr[u]:fb.Indptr[u+1]] {
				if s.newID[w] < 0 {
					s.newID[w] = int32(len(order))
					order = append(order, w)
				}
				if build {
					kb.Indices = append(kb.Indices, s.newID[w])
				}
			}
			if build {
				kb.Indptr[i+1] = int32(len(kb.Indices))
			}
		}
		if build {
			kb.NumSrc = len(order)
			kb.SrcDegrees = make([]int32, kb.NumSrc)
			for j, u := range order {
				kb.SrcDegrees[j] = s.outDeg[l][u]
			}
			if fb.DstDegrees != nil {
				kb.DstDegrees = make([]int32, nd)
				for i, u := range order[:nd] {
					kb.DstDegrees[i] = fb.DstDegrees[u]
				}
			}
			blocks[l] = kb
		}
	}
	for _, u := range order {
		s.newID[u] = -1
	}
	if !build {
		s.order = order
	}
	return order, blocks
}

// rows is micro-batch m's input rows and input-layer destinations,
// without building it.
func (s *splitter) rows(m int) (rows, dst int) {
	order, _ := s.walk(m, false)
	return len(order), s.dst0
}

// build makes micro-batch m and counts its arrays in memacct.
func (s *splitter) build(m int) microBatch {
	order, blocks := s.walk(m, true)
	lo, hi := s.targets(m)
	sub := &hostBatch{targets: hi - lo, blocks: blocks, nodes: make([]int64, len(order))}
	for i, u := range order {
		sub.nodes[i] = s.hb.nodes[u]
	}
	own := 8*int64(cap(sub.nodes)) + 4*int64(cap(order))
	for _, kb := range sub.blocks {
		own += 4 * int64(cap(kb.Indptr)+cap(kb.Indices)+cap(kb.SrcDegrees)+cap(kb.DstDegrees))
	}
	sub.count(own)
	return microBatch{hb: sub, full: order}
}

// splitBound is what one (micro-)batch may hold: rows input rows (0: no
// bound) and dst input-layer destinations (0: no bound), the two figures
// its working-set estimate was made for.
type splitBound struct{ rows, dst int }

// fits says whether a (micro-)batch of rows input rows and dst
// input-layer destinations is within b.
func (b splitBound) fits(rows, dst int) bool {
	return (b.rows <= 0 || rows <= b.rows) && (b.dst <= 0 || dst <= b.dst)
}

// fitSplit is the fewest micro-batches (a power of two, at most
// MaxMicroBatches and at most the targets) that each fit b; 1 for a batch
// that fits.
func fitSplit(hb *hostBatch, b splitBound) int {
	if b.fits(len(hb.nodes), hb.blocks[0].NumDst) {
		return 1
	}
	// The micro-batches' rows add up to at least the batch's, and so do
	// their input-layer destinations.
	k := 1
	for k < MaxMicroBatches && !b.fits((len(hb.nodes)+k-1)/k, (hb.blocks[0].NumDst+k-1)/k) {
		k *= 2
	}
	s := newSplitter(hb, k)
	for {
		s.k = max(1, min(k, hb.targets))
		fits := true
		for m := 0; m < s.k && fits; m++ {
			fits = b.fits(s.rows(m))
		}
		if fits || k >= MaxMicroBatches || k >= hb.targets {
			return k
		}
		k *= 2
	}
}

// splitRows is the planner's view of the cut Trainer.microCount makes
// with bound and no history reuse: each micro-batch's input rows, in the
// order the trainer gathers them.
func splitRows(bound splitBound) planner.BatchSplit {
	return func(b *sample.Batch, visit func(rows []int64)) {
		hb := convert(b, nil, false)
		defer hb.uncount()
		k := fitSplit(hb, bound)
		if k <= 1 {
			visit(hb.nodes)
			return
		}
		s := newSplitter(hb, k)
		var rows []int64
		for m := range s.k {
			order, _ := s.walk(m, false)
			rows = rows[:0]
			for _, u := range order {
				rows = append(rows, hb.nodes[u])
			}
			visit(rows)
		}
	}
}

// subHist is hs restricted to a micro-batch: its reused and computed rows
// among the micro-batch's hop-1 list (the last block's sources), and the
// pulled embeddings of its reused rows. width is the embedding width.
func subHist(hs *hist, mb microBatch, width int) *hist {
	if hs == nil {
		return nil
	}
	if mb.full == nil {
		return hs
	}
	pos := make(map[int32]int, len(hs.reused))
	for r, k := range hs.reused {
		pos[k] = r
	}
	top := mb.hb.blocks[len(mb.hb.blocks)-1]
	out := &hist{wantEmb: hs.wantEmb, wantGrad: hs.wantGrad}
	for k := 0; k < top.NumSrc; k++ {
		if r, ok := pos[mb.full[k]]; ok {
			out.reused = append(out.reused, int32(k))
			out.pulled = append(out.pulled, hs.pulled[r*width:(r+1)*width]...)
		} else {
			out.computed = append(out.computed, int32(k))
		}
	}
	return out
}

// countLabelled is the number of nodes among targets with a label.
func countLabelled(labels []int32, targets []int64) int {
	n := 0
	for _, v := range targets {
		if labels[v] >= 0 {
			n++
		}
	}
	return n
}
