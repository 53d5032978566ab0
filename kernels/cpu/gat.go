package cpu

import (
	"math"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// headDots sets out[r, h] = Σ_f a[h·F+f]·x[r, h·F+f] for rows [0, rows).
func (b *Backend) headDots(out []float32, x *tensor, rows int, a []float32, H, F int) {
	hf := H * F
	b.pool.parallel(rows, b.rowGrain(hf), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := x.data[r*hf : (r+1)*hf]
			for h := 0; h < H; h++ {
				var s float32
				for f := h * F; f < (h+1)*F; f++ {
					s += a[f] * row[f]
				}
				out[r*H+h] = s
			}
		}
	})
}

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
	H := S.cols
	// Scratch from the store: counted, and reused batch after batch
	// rather than left to the collector (GAT at --mem 100MiB in a 100 MiB
	// cgroup hit its limit 214k times with heap scratch, 112k with this).
	el, er := b.st.get(K.numDst*H), b.st.get(K.numSrc*H)
	defer b.st.put(el)
	defer b.st.put(er)
	b.headDots(el, W, K.numDst, AL.data, H, F)
	b.headDots(er, W, K.numSrc, AR.data, H, F)
	b.pool.parallel(K.numDst, b.edgeGrain(K.numDst, len(K.indices), H), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for k := K.indptr[i]; k < K.indptr[i+1]; k++ {
				j := int(K.indices[k])
				for h := 0; h < H; h++ {
					x := el[i*H+h] + er[j*H+h]
					if x < 0 {
						x *= slope
					}
					S.data[int(k)*H+h] = x
				}
			}
		}
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
	H, hf := S.cols, W.cols
	g := b.st.get(len(S.data))
	defer b.st.put(g)
	b.elementwise(len(g), func(lo, hi int) {
		for k := lo; k < hi; k++ {
			if S.data[k] > 0 {
				g[k] = DS.data[k]
			} else {
				g[k] = DS.data[k] * slope
			}
		}
	})
	dEl, dEr := b.st.get(K.numDst*H), b.st.get(K.numSrc*H)
	defer b.st.put(dEl)
	defer b.st.put(dEr)
	b.pool.parallel(K.numDst, b.edgeGrain(K.numDst, len(K.indices), H), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for k := K.indptr[i]; k < K.indptr[i+1]; k++ {
				addTo(dEl[i*H:(i+1)*H], g[int(k)*H:(int(k)+1)*H])
			}
		}
	})
	b.pool.parallel(K.numSrc, b.edgeGrain(K.numSrc, len(K.indices), H), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			for _, k := range K.tEdge[K.tIndptr[j]:K.tIndptr[j+1]] {
				addTo(dEr[j*H:(j+1)*H], g[int(k)*H:(int(k)+1)*H])
			}
		}
	})
	b.pool.parallel(K.numSrc, b.rowGrain(hf), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			row := DW.data[j*hf : (j+1)*hf]
			for h := 0; h < H; h++ {
				r := row[h*F : (h+1)*F]
				ar := AR.data[h*F : (h+1)*F]
				der := dEr[j*H+h]
				if j < K.numDst {
					al := AL.data[h*F : (h+1)*F]
					del := dEl[j*H+h]
					for f := range r {
						r[f] = del*al[f] + der*ar[f]
					}
				} else {
					for f := range r {
						r[f] = der * ar[f]
					}
				}
			}
		}
	})
	// Attention-vector gradients: column-parallel, each sum in row order.
	// A worker's columns are summed together, row after row, so that it
	// reads each row's columns as one contiguous run: one column at a
	// time strode through every row (hf floats apart) and took over half
	// of a GAT layer's backward time. Each column's sum keeps its order.
	b.pool.parallel(hf, max(8, b.grain/max(K.numSrc, 1)), func(lo, hi int) {
		n := hi - lo
		sl, sr, head := make([]float32, n), make([]float32, n), make([]int, n)
		for c := range head {
			head[c] = (lo + c) / F
		}
		for j := 0; j < K.numDst; j++ {
			w, el, er := W.data[j*hf+lo:j*hf+hi], dEl[j*H:(j+1)*H], dEr[j*H:(j+1)*H]
			for c, h := range head {
				sl[c] += el[h] * w[c]
				sr[c] += er[h] * w[c]
			}
		}
		for j := K.numDst; j < K.numSrc; j++ {
			w, er := W.data[j*hf+lo:j*hf+hi], dEr[j*H:(j+1)*H]
			for c, h := range head {
				sr[c] += er[h] * w[c]
			}
		}
		copy(DAL.data[lo:hi], sl)
		copy(DAR.data[lo:hi], sr)
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
	H := S.cols
	b.pool.parallel(K.numDst, b.edgeGrain(K.numDst, len(K.indices), H), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s, e := int(K.indptr[i]), int(K.indptr[i+1])
			for h := 0; h < H; h++ {
				m := float32(math.Inf(-1))
				for k := s; k < e; k++ {
					m = max(m, S.data[k*H+h])
				}
				var sum float32
				for k := s; k < e; k++ {
					x := float32(math.Exp(float64(S.data[k*H+h] - m)))
					A.data[k*H+h] = x
					sum += x
				}
				inv := 1 / sum
				for k := s; k < e; k++ {
					A.data[k*H+h] *= inv
				}
			}
		}
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
	H := A.cols
	b.pool.parallel(K.numDst, b.edgeGrain(K.numDst, len(K.indices), H), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s, e := int(K.indptr[i]), int(K.indptr[i+1])
			for h := 0; h < H; h++ {
				var dot float32
				for k := s; k < e; k++ {
					dot += A.data[k*H+h] * DA.data[k*H+h]
				}
				for k := s; k < e; k++ {
					DS.data[k*H+h] = A.data[k*H+h] * (DA.data[k*H+h] - dot)
				}
			}
		}
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
	H, hf := A.cols, W.cols
	avg := max(1, len(K.indices)/max(K.numDst, 1))
	b.pool.parallel(K.numDst, max(1, b.grain/max(hf*avg, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o := O.data[i*hf : (i+1)*hf]
			clear(o)
			for k := K.indptr[i]; k < K.indptr[i+1]; k++ {
				j := int(K.indices[k])
				for h := 0; h < H; h++ {
					addScaledTo(o[h*F:(h+1)*F], A.data[int(k)*H+h], W.data[j*hf+h*F:j*hf+(h+1)*F])
				}
			}
		}
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
	H, hf := A.cols, W.cols
	avg := max(1, len(K.indices)/max(K.numDst, 1))
	b.pool.parallel(K.numDst, max(1, b.grain/max(hf*avg, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			do := DO.data[i*hf : (i+1)*hf]
			for k := K.indptr[i]; k < K.indptr[i+1]; k++ {
				j := int(K.indices[k])
				for h := 0; h < H; h++ {
					var s float32
					w := W.data[j*hf+h*F : j*hf+(h+1)*F]
					for f, x := range do[h*F : (h+1)*F] {
						s += x * w[f]
					}
					DA.data[int(k)*H+h] = s
				}
			}
		}
	})
	avg = max(1, len(K.indices)/max(K.numSrc, 1))
	b.pool.parallel(K.numSrc, max(1, b.grain/max(hf*avg, 1)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			dw := DW.data[j*hf : (j+1)*hf]
			clear(dw)
			for p := K.tIndptr[j]; p < K.tIndptr[j+1]; p++ {
				k, i := int(K.tEdge[p]), int(K.tDst[p])
				for h := 0; h < H; h++ {
					addScaledTo(dw[h*F:(h+1)*F], A.data[k*H+h], DO.data[i*hf+h*F:i*hf+(h+1)*F])
				}
			}
		}
	})
}
