package train

import (
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/sample"
)

// hostBatch is a sampled batch in the backend's block form: nodes are the
// global ids of the shared node array (Blocks[0]'s sources) and blocks[l]
// the CSR of layer l over local ids.
type hostBatch struct {
	nodes   []int64
	targets int // the first targets entries of nodes are the targets
	blocks  []*kernels.Block
	// counted is the bytes of arrays the host batch allocated itself
	// (not aliased from the sampled batch) in memacct.SampledBatches,
	// released by Trainer.releaseBatch.
	counted int64
}

// count adds n bytes of the host batch's own arrays to the counters.
func (hb *hostBatch) count(n int64) {
	hb.counted += n
	memacct.Add(memacct.SampledBatches, n)
}

// uncount releases the host batch's arrays from the counters (once; a
// second call is a no-op).
func (hb *hostBatch) uncount() {
	memacct.Add(memacct.SampledBatches, -hb.counted)
	hb.counted = 0
}

// convert turns b into the backend form. Rows listed in reused (local ids of
// hop-1 nodes, ascending) lose their in-edges in blocks 0..L-2, and nodes
// reachable only through them are dropped; the remaining nodes are renumbered
// in first-reached order, so every block's sources stay a prefix of the node
// array and the last block is unchanged. With selfLoops every destination
// also aggregates itself (GAT), appended after its sampled neighbours unless
// already present.
func convert(b *sample.Batch, reused []int32, selfLoops bool) *hostBatch {
	L := len(b.Blocks)
	top := &b.Blocks[L-1]
	nodesOld := b.Blocks[0].Src
	hb := &hostBatch{targets: top.NumDst, blocks: make([]*kernels.Block, L)}
	if len(reused) == 0 {
		hb.nodes = nodesOld
		for l := range b.Blocks {
			sb := &b.Blocks[l]
			kb := &kernels.Block{NumDst: sb.NumDst, NumSrc: len(sb.Src), Indptr: make([]int32, sb.NumDst+1), Indices: sb.Indices}
			for i, v := range sb.Indptr {
				kb.Indptr[i] = int32(v)
			}
			hb.blocks[l] = kb
		}
	} else {
		isReused := make([]bool, len(top.Src))
		for _, r := range reused {
			isReused[r] = true
		}
		oldToNew := make([]int32, len(nodesOld))
		for i := range oldToNew {
			oldToNew[i] = -1
		}
		order := make([]int32, 0, len(nodesOld)) // new local → old local
		for i := range top.Src {
			oldToNew[i] = int32(i)
			order = append(order, int32(i))
		}
		// The last block keeps its ids (identity on its sources).
		kb := &kernels.Block{NumDst: top.NumDst, NumSrc: len(top.Src), Indptr: make([]int32, top.NumDst+1), Indices: top.Indices}
		for i, v := range top.Indptr {
			kb.Indptr[i] = int32(v)
		}
		hb.blocks[L-1] = kb
		for l := L - 2; l >= 0; l-- {
			sb := &b.Blocks[l]
			nd := len(order)
			kb := &kernels.Block{NumDst: nd, Indptr: make([]int32, nd+1)}
			for i := 0; i < nd; i++ {
				u := order[i]
				if int(u) < len(isReused) && isReused[u] {
					kb.Indptr[i+1] = int32(len(kb.Indices))
					continue
				}
				for _, w := range sb.Indices[sb.Indptr[u]:sb.Indptr[u+1]] {
					if oldToNew[w] < 0 {
						oldToNew[w] = int32(len(order))
						order = append(order, w)
					}
					kb.Indices = append(kb.Indices, oldToNew[w])
				}
				kb.Indptr[i+1] = int32(len(kb.Indices))
			}
			kb.NumSrc = len(order)
			hb.blocks[l] = kb
		}
		hb.nodes = make([]int64, len(order))
		for i, u := range order {
			hb.nodes[i] = nodesOld[u]
		}
	}
	// Own arrays: the int32 offsets always; without reuse the indices
	// and nodes alias the sampled batch.
	var own int64
	for _, kb := range hb.blocks {
		own += 4 * int64(cap(kb.Indptr))
		if len(reused) > 0 {
			own += 4 * int64(cap(kb.Indices))
		}
	}
	if len(reused) > 0 {
		own += 8 * int64(cap(hb.nodes))
	}
	if selfLoops {
		for _, kb := range hb.blocks {
			own += 4 * int64(kb.NumDst+len(kb.Indices)) // withSelfLoops' copy, at most
		}
	}
	hb.count(own)
	if selfLoops {
		for l, kb := range hb.blocks {
			hb.blocks[l] = withSelfLoops(kb)
		}
	}
	return hb
}

// withDegrees sets every block's DstDegrees and SrcDegrees to g's
// whole-graph degrees of its nodes (GCN's normalisation; kernels.Block),
// counting the arrays with hb. Every block's sources and destinations are
// prefixes of hb.nodes, so the blocks share two arrays, sliced: the
// out-degrees of every node and the in-degrees of the most destinations.
// g nil: nothing (block-local degrees).
func (hb *hostBatch) withDegrees(g *graphDegrees) {
	if g == nil {
		return
	}
	nd := 0
	for _, kb := range hb.blocks {
		nd = max(nd, kb.NumDst)
	}
	in, out := make([]int32, nd), make([]int32, len(hb.nodes))
	g.of(hb.nodes, in, out)
	for _, kb := range hb.blocks {
		kb.DstDegrees, kb.SrcDegrees = in[:kb.NumDst], out[:kb.NumSrc]
	}
	hb.count(4 * int64(nd+len(out)))
}

// withSelfLoops returns kb with an edge i→i added to every destination that
// lacks one.
func withSelfLoops(kb *kernels.Block) *kernels.Block {
	out := &kernels.Block{NumDst: kb.NumDst, NumSrc: kb.NumSrc, Indptr: make([]int32, kb.NumDst+1), Indices: make([]int32, 0, len(kb.Indices)+kb.NumDst)}
	for i := 0; i < kb.NumDst; i++ {
		has := false
		for _, j := range kb.Indices[kb.Indptr[i]:kb.Indptr[i+1]] {
			out.Indices = append(out.Indices, j)
			has = has || int(j) == i
		}
		if !has {
			out.Indices = append(out.Indices, int32(i))
		}
		out.Indptr[i+1] = int32(len(out.Indices))
	}
	return out
}
