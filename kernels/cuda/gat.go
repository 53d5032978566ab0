//go:build cuda && cgo && linux

package cuda

import (
	"gorgonia.org/cu"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// GATScores sets per-edge LeakyReLU attention logits.
func (b *Backend) GATScores(db kernels.DeviceBlock, scores, wh, attnL, attnR kernels.Tensor, slope float32) {
	const op = "GATScores"
	if !b.ok() {
		return
	}
	K, S, W, AL, AR := b.blk(op, db), b.t(op, scores), b.t(op, wh), b.t(op, attnL), b.t(op, attnR)
	if K == nil || S == nil || W == nil || AL == nil || AR == nil {
		return
	}
	F, err := kernels.CheckGATScores(K, S, W, AL, AR)
	if !b.check(op, err) {
		return
	}
	H, nd, ns, E := int64(S.cols), int64(K.numDst), int64(K.numSrc), int64(K.edges)
	if E == 0 {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.scratch([]int64{nd * H * 4, ns * H * 4}, func(p []cu.DevicePtr) error {
			el, er := p[0], p[1]
			if err := d.grid("head_dots", nd*H, el, W.ptr, AL.ptr, nd, H, int64(F)); err != nil {
				return err
			}
			if err := d.grid("head_dots", ns*H, er, W.ptr, AR.ptr, ns, H, int64(F)); err != nil {
				return err
			}
			return d.grid("gat_scores", E*H, S.ptr, K.eDst, K.indices, el, er, E, H, slope)
		})
	})
}

// GATScoresBackward sets dWh, dAttnL and dAttnR.
func (b *Backend) GATScoresBackward(db kernels.DeviceBlock, dWh, dAttnL, dAttnR, dScores, scores, wh, attnL, attnR kernels.Tensor, slope float32) {
	const op = "GATScoresBackward"
	if !b.ok() {
		return
	}
	K := b.blk(op, db)
	DW, DAL, DAR, DS, S, W, AL, AR := b.t(op, dWh), b.t(op, dAttnL), b.t(op, dAttnR), b.t(op, dScores), b.t(op, scores), b.t(op, wh), b.t(op, attnL), b.t(op, attnR)
	if K == nil || DW == nil || DAL == nil || DAR == nil || DS == nil || S == nil || W == nil || AL == nil || AR == nil {
		return
	}
	F, err := kernels.CheckGATScoresBackward(K, DW, DAL, DAR, DS, S, W, AL, AR)
	if !b.check(op, err) {
		return
	}
	H, hf, nd, ns, E := int64(S.cols), int64(W.cols), int64(K.numDst), int64(K.numSrc), int64(K.edges)
	b.enqueue(op, func(d *device) error {
		return d.scratch([]int64{E * H * 4, nd * H * 4, ns * H * 4}, func(p []cu.DevicePtr) error {
			g, dEl, dEr := p[0], p[1], p[2]
			steps := []func() error{
				func() error { return d.grid("leaky_backward", E*H, g, DS.ptr, S.ptr, E*H, slope) },
				func() error { return d.grid("csr_edge_sum", nd*H, dEl, g, K.indptr, nd, H) },
				func() error { return d.grid("tcsr_edge_sum", ns*H, dEr, g, K.tIndptr, K.tEdge, ns, H) },
				func() error {
					return d.grid("gat_dwh", ns*hf, DW.ptr, dEl, dEr, AL.ptr, AR.ptr, nd, ns, H, int64(F))
				},
				func() error { return d.colReduce(DAL.ptr, W.ptr, dEl, nd, hf, H, int64(F)) },
				func() error { return d.colReduce(DAR.ptr, W.ptr, dEr, ns, hf, H, int64(F)) },
			}
			for _, s := range steps {
				if err := s(); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// EdgeSoftmax normalises scores over each destination's in-edges, per head.
func (b *Backend) EdgeSoftmax(db kernels.DeviceBlock, alpha, scores kernels.Tensor) {
	const op = "EdgeSoftmax"
	if !b.ok() {
		return
	}
	K, A, S := b.blk(op, db), b.t(op, alpha), b.t(op, scores)
	if K == nil || A == nil || S == nil || !b.check(op, kernels.CheckEdgeSoftmax(K, A, S)) {
		return
	}
	H := int64(S.cols)
	b.enqueue(op, func(d *device) error {
		return d.grid("edge_softmax", int64(K.numDst)*H, A.ptr, S.ptr, K.indptr, int64(K.numDst), H)
	})
}

// EdgeSoftmaxBackward sets dScores = alpha·(dAlpha - Σ alpha·dAlpha).
func (b *Backend) EdgeSoftmaxBackward(db kernels.DeviceBlock, dScores, dAlpha, alpha kernels.Tensor) {
	const op = "EdgeSoftmaxBackward"
	if !b.ok() {
		return
	}
	K, DS, DA, A := b.blk(op, db), b.t(op, dScores), b.t(op, dAlpha), b.t(op, alpha)
	if K == nil || DS == nil || DA == nil || A == nil || !b.check(op, kernels.CheckEdgeSoftmaxBackward(K, DS, DA, A)) {
		return
	}
	H := int64(A.cols)
	b.enqueue(op, func(d *device) error {
		return d.grid("edge_softmax_backward", int64(K.numDst)*H, DS.ptr, DA.ptr, A.ptr, K.indptr, int64(K.numDst), H)
	})
}

// EdgeWeightedSum sets out[i] = Σ_k alpha[k,h]·wh[j_k] per head.
func (b *Backend) EdgeWeightedSum(db kernels.DeviceBlock, out, alpha, wh kernels.Tensor) {
	const op = "EdgeWeightedSum"
	if !b.ok() {
		return
	}
	K, O, A, W := b.blk(op, db), b.t(op, out), b.t(op, alpha), b.t(op, wh)
	if K == nil || O == nil || A == nil || W == nil {
		return
	}
	F, err := kernels.CheckEdgeWeightedSum(K, O, A, W)
	if !b.check(op, err) {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.grid("edge_weighted_sum", O.n(), O.ptr, A.ptr, W.ptr, K.indptr, K.indices, int64(K.numDst), int64(A.cols), int64(F))
	})
}

// EdgeWeightedSumBackward sets dAlpha and dWh.
func (b *Backend) EdgeWeightedSumBackward(db kernels.DeviceBlock, dAlpha, dWh, dOut, alpha, wh kernels.Tensor) {
	const op = "EdgeWeightedSumBackward"
	if !b.ok() {
		return
	}
	K, DA, DW, DO, A, W := b.blk(op, db), b.t(op, dAlpha), b.t(op, dWh), b.t(op, dOut), b.t(op, alpha), b.t(op, wh)
	if K == nil || DA == nil || DW == nil || DO == nil || A == nil || W == nil {
		return
	}
	F, err := kernels.CheckEdgeWeightedSumBackward(K, DA, DW, DO, A, W)
	if !b.check(op, err) {
		return
	}
	H, E := int64(A.cols), int64(K.edges)
	b.enqueue(op, func(d *device) error {
		if err := d.grid("edge_weighted_sum_dalpha", E*H, DA.ptr, DO.ptr, W.ptr, K.eDst, K.indices, E, H, int64(F)); err != nil {
			return err
		}
		return d.grid("edge_weighted_sum_dwh", DW.n(), DW.ptr, DO.ptr, A.ptr, K.tIndptr, K.tEdge, K.tDst, int64(K.numSrc), H, int64(F))
	})
}
