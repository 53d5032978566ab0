package kerneltest

import (
	"math"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// The float64 reference implementations. Matrices are row-major []float64.

func refGEMM(tA, tB bool, alpha float64, a []float64, ar, ac int, b []float64, br, bc int, beta float64, c []float64) []float64 {
	m, k := ar, ac
	if tA {
		m, k = ac, ar
	}
	n := bc
	if tB {
		n = br
	}
	at := func(i, p int) float64 {
		if tA {
			return a[p*ac+i]
		}
		return a[i*ac+p]
	}
	bt := func(p, j int) float64 {
		if tB {
			return b[j*bc+p]
		}
		return b[p*bc+j]
	}
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
			}
			out[i*n+j] = alpha * s
			if beta != 0 {
				out[i*n+j] += beta * c[i*n+j]
			}
		}
	}
	return out
}

// aggEdge is one term dst[i] += w·src[j] of an aggregation.
type aggEdge struct {
	i, j int
	w    float64
}

// aggTerms spells out Aggregate(op) as weighted terms, from the package
// documentation's definitions.
func aggTerms(blk *kernels.Block, op kernels.AggOp) []aggEdge {
	out := blk.OutDegrees()
	var terms []aggEdge
	for i := 0; i < blk.NumDst; i++ {
		s, e := int(blk.Indptr[i]), int(blk.Indptr[i+1])
		deg := float64(e - s)
		full := deg // D_i
		if blk.DstDegrees != nil {
			full = float64(blk.DstDegrees[i])
		}
		if op == kernels.AggGCN {
			terms = append(terms, aggEdge{i, i, 1 / math.Sqrt(full+1) / math.Sqrt(float64(out[i])+1)})
		}
		for _, j := range blk.Indices[s:e] {
			w := 1.0
			switch op {
			case kernels.AggMean:
				w = 1 / deg
			case kernels.AggGCN:
				w = full / deg / math.Sqrt(full+1) / math.Sqrt(float64(out[j])+1)
			}
			terms = append(terms, aggEdge{i, int(j), w})
		}
	}
	return terms
}

func refAggregate(blk *kernels.Block, op kernels.AggOp, src []float64, f int) []float64 {
	dst := make([]float64, blk.NumDst*f)
	for _, t := range aggTerms(blk, op) {
		for c := 0; c < f; c++ {
			dst[t.i*f+c] += t.w * src[t.j*f+c]
		}
	}
	return dst
}

func refLogSoftmax(x []float64, rows, cols int) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - m)
		}
		lse := m + math.Log(s)
		for c, v := range row {
			out[r*cols+c] = v - lse
		}
	}
	return out
}

func refCrossEntropy(x []float64, rows, cols int, labels []int32) (float64, int) {
	ls := refLogSoftmax(x, rows, cols)
	var sum float64
	n := 0
	for r, l := range labels {
		if l >= 0 {
			sum -= ls[r*cols+int(l)]
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

func refGATScores(blk *kernels.Block, wh, aL, aR []float64, H, F int, slope float64) []float64 {
	hf := H * F
	s := make([]float64, blk.NumEdges()*H)
	for i := 0; i < blk.NumDst; i++ {
		for k := blk.Indptr[i]; k < blk.Indptr[i+1]; k++ {
			j := int(blk.Indices[k])
			for h := 0; h < H; h++ {
				var x float64
				for f := h * F; f < (h+1)*F; f++ {
					x += aL[f]*wh[i*hf+f] + aR[f]*wh[j*hf+f]
				}
				if x < 0 {
					x *= slope
				}
				s[int(k)*H+h] = x
			}
		}
	}
	return s
}

func refEdgeSoftmax(blk *kernels.Block, s []float64, H int) []float64 {
	a := make([]float64, len(s))
	for i := 0; i < blk.NumDst; i++ {
		lo, hi := int(blk.Indptr[i]), int(blk.Indptr[i+1])
		for h := 0; h < H; h++ {
			m := math.Inf(-1)
			for k := lo; k < hi; k++ {
				m = math.Max(m, s[k*H+h])
			}
			var sum float64
			for k := lo; k < hi; k++ {
				sum += math.Exp(s[k*H+h] - m)
			}
			for k := lo; k < hi; k++ {
				a[k*H+h] = math.Exp(s[k*H+h]-m) / sum
			}
		}
	}
	return a
}

func refEdgeWeightedSum(blk *kernels.Block, alpha, wh []float64, H, F int) []float64 {
	hf := H * F
	out := make([]float64, blk.NumDst*hf)
	for i := 0; i < blk.NumDst; i++ {
		for k := blk.Indptr[i]; k < blk.Indptr[i+1]; k++ {
			j := int(blk.Indices[k])
			for c := 0; c < hf; c++ {
				out[i*hf+c] += alpha[int(k)*H+c/F] * wh[j*hf+c]
			}
		}
	}
	return out
}

func refAdam(p, g, m, v []float64, t int, cfg kernels.AdamConfig) {
	b1, b2 := float64(cfg.Beta1), float64(cfg.Beta2)
	c1 := 1 - math.Pow(b1, float64(t))
	c2 := 1 - math.Pow(b2, float64(t))
	for i := range p {
		gi := g[i] + float64(cfg.WeightDecay)*p[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		p[i] -= float64(cfg.LR) * (m[i] / c1) / (math.Sqrt(v[i]/c2) + float64(cfg.Eps))
	}
}
