package train

import (
	"github.com/ssdgnn/ssdgnn/kernels"
)

// Micro-batches: when a batch's working set does not fit what the memory
// budget leaves it, the trainer cuts the batch into micro-batches by its
// targets and accumulates their gradients before one Adam step.
//
// A micro-batch is the restriction of the sampled batch to the part of its
// message-flow graph that reaches its targets: every node keeps all the
// in-edges it has in the whole batch, so every layer output of a
// micro-batch row equals the whole batch's output for that row (GCN's
// source normalisation included, through kernels.Block.SrcDegrees). Its
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
// of ⌈BatchSize/MaxMicroBatches⌉ targets.
const MaxMicroBatches = 64

// microBatch is one micro-batch of a host batch.
type microBatch struct {
	hb *hostBatch
	// full maps the micro-batch's local ids to the batch's.
	full []int32
	// labelled is the number of its targets with a label (>= 0).
	labelled int
}

// splitHostBatch cuts hb into k micro-batches of consecutive targets (sizes
// differ by at most one). k is clamped to [1, hb.targets].
func splitHostBatch(hb *hostBatch, k int) []microBatch {
	k = max(1, min(k, hb.targets))
	L := len(hb.blocks)
	outDeg := make([][]int32, L)
	for l, b := range hb.blocks {
		outDeg[l] = b.OutDegrees()
	}
	newID := make([]int32, len(hb.nodes))
	for i := range newID {
		newID[i] = -1
	}
	out := make([]microBatch, 0, k)
	for m := range k {
		lo, hi := m*hb.targets/k, (m+1)*hb.targets/k
		order := make([]int32, 0, hi-lo) // new local → old local
		for u := lo; u < hi; u++ {
			newID[u] = int32(len(order))
			order = append(order, int32(u))
		}
		sub := &hostBatch{targets: hi - lo, blocks: make([]*kernels.Block, L)}
		for l := L - 1; l >= 0; l-- {
			fb := hb.blocks[l]
			nd := len(order)
			kb := &kernels.Block{NumDst: nd, Indptr: make([]int32, nd+1)}
			for i := 0; i < nd; i++ {
				u := order[i]
				for _, w := range fb.Indices[fb.Indptr[u]:fb.Indptr[u+1]] {
					if newID[w] < 0 {
						newID[w] = int32(len(order))
						order = append(order, w)
					}
					kb.Indices = append(kb.Indices, newID[w])
				}
				kb.Indptr[i+1] = int32(len(kb.Indices))
			}
			kb.NumSrc = len(order)
			kb.SrcDegrees = make([]int32, kb.NumSrc)
			for j, u := range order {
				kb.SrcDegrees[j] = outDeg[l][u]
			}
			sub.blocks[l] = kb
		}
		sub.nodes = make([]int64, len(order))
		for i, u := range order {
			sub.nodes[i] = hb.nodes[u]
			newID[u] = -1
		}
		out = append(out, microBatch{hb: sub, full: order})
	}
	return out
}

// splitToFit returns the split of hb into the fewest micro-batches (a power
// of two, at most MaxMicroBatches) whose input rows are each at most
// maxRows; with maxRows <= 0 or a batch that fits, hb whole.
func splitToFit(hb *hostBatch, maxRows int) []microBatch {
	if maxRows <= 0 || len(hb.nodes) <= maxRows {
		return []microBatch{{hb: hb}}
	}
	// The micro-batches' rows add up to at least the batch's.
	k := 1
	for k*maxRows < len(hb.nodes) && k < MaxMicroBatches {
		k *= 2
	}
	for {
		mbs := splitHostBatch(hb, k)
		fits := true
		for _, mb := range mbs {
			fits = fits && len(mb.hb.nodes) <= maxRows
		}
		if fits || k >= MaxMicroBatches || k >= hb.targets {
			return mbs
		}
		k *= 2
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
