package cpu

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/ssdgnn/ssdgnn/internal/f32"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// defaultGrain is the smallest element range worth a goroutine hand-off.
const defaultGrain = 1 << 14

// rowGrain returns a row grain giving about b.grain elements per chunk.
func (b *Backend) rowGrain(cols int) int { return max(1, b.grain/max(cols, 1)) }

// edgeGrain returns a row grain for a loop over rows rows that each touch
// about 1+edges/rows edges of width values: about b.grain values a chunk.
func (b *Backend) edgeGrain(rows, edges, width int) int {
	return max(1, b.grain/max(width*(1+edges/max(rows, 1)), 1))
}

var blas32 = gonum.Implementation{}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// GEMM computes C = alpha·op(A)·op(B) + beta·C.
func (b *Backend) GEMM(transA, transB bool, alpha float32, a, bb kernels.Tensor, beta float32, c kernels.Tensor) {
	const op = "GEMM"
	if !b.ok() {
		return
	}
	A, B, C := b.t(op, a), b.t(op, bb), b.t(op, c)
	if A == nil || B == nil || C == nil {
		return
	}
	m, n, k, err := kernels.CheckGEMM(transA, transB, A, B, C)
	if !b.check(op, err) || m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		b.scaleData(C.data, beta)
		return
	}
	inner := n
	if transB {
		inner = k
	}
	if b.opts.GEMM == GEMMTiled || (b.opts.GEMM == GEMMAuto && tiledNative) {
		b.gemmTiled(transA, transB, m, n, k, alpha, A.data, B.data, beta, C.data)
		return
	}
	if b.opts.GEMM == GEMMRows || (b.opts.GEMM == GEMMAuto && inner >= 128) {
		b.gemmRows(transA, transB, m, n, k, alpha, A.data, B.data, beta, C.data)
		return
	}
	blas32.Sgemm(trans(transA), trans(transB), m, n, k, alpha, A.data, max(A.cols, 1), B.data, max(B.cols, 1), beta, C.data, max(n, 1))
}

// scaleData sets x *= beta, treating beta == 0 as an overwrite with zeros.
func (b *Backend) scaleData(x []float32, beta float32) {
	b.pool.parallel(len(x), b.grain, func(lo, hi int) {
		if beta == 0 {
			clear(x[lo:hi])
			return
		}
		for i := lo; i < hi; i++ {
			x[i] *= beta
		}
	})
}

// gemmRows is the row-parallel kernel: each C row is built with AXPYs over
// op(B)'s rows (B not transposed) or dot products (B transposed). Each
// chunk of rows copies op(A)'s row into k floats of scratch, counted in
// memacct.Backend while the chunk runs.
func (b *Backend) gemmRows(transA, transB bool, m, n, k int, alpha float32, A, B []float32, beta float32, C []float32) {
	lda := k
	if transA {
		lda = m
	}
	b.pool.parallel(m, max(1, b.grain/max(n*k/16, 1)), func(lo, hi int) {
		arow := make([]float32, k)
		memacct.Add(memacct.Backend, 4*int64(k))
		defer memacct.Add(memacct.Backend, -4*int64(k))
		for i := lo; i < hi; i++ {
			c := C[i*n : (i+1)*n]
			if transA {
				for p := 0; p < k; p++ {
					arow[p] = A[p*lda+i]
				}
			} else {
				copy(arow, A[i*lda:i*lda+k])
			}
			if transB {
				// op(B)[p, j] = B[j, p]; B is n×k.
				for j := 0; j < n; j++ {
					d := blas32.Sdot(k, arow, 1, B[j*k:(j+1)*k], 1)
					if beta == 0 {
						c[j] = alpha * d
					} else {
						c[j] = alpha*d + beta*c[j]
					}
				}
				continue
			}
			if beta == 0 {
				clear(c)
			} else if beta != 1 {
				for j := range c {
					c[j] *= beta
				}
			}
			for p := 0; p < k; p++ {
				if s := alpha * arow[p]; s != 0 {
					blas32.Saxpy(n, s, B[p*n:(p+1)*n], 1, c, 1)
				}
			}
		}
	})
}

// GatherRows sets dst[r] = src[idx[r]].
func (b *Backend) GatherRows(dst, src kernels.Tensor, idx kernels.IntTensor) {
	const op = "GatherRows"
	if !b.ok() {
		return
	}
	D, S, I := b.t(op, dst), b.t(op, src), b.it(op, idx)
	if D == nil || S == nil || I == nil || !b.check(op, kernels.CheckGatherRows(D, S, I)) ||
		!b.check(op, kernels.CheckIndexValues(I.data, S.rows)) {
		return
	}
	f := S.cols
	b.pool.parallel(len(I.data), b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			j := int(I.data[r])
			copy(D.data[r*f:(r+1)*f], S.data[j*f:(j+1)*f])
		}
	})
}

// ScatterAddRows accumulates dst[idx[r]] += src[r]. Work is split by column
// ranges so that each output element is summed in increasing r order.
func (b *Backend) ScatterAddRows(dst, src kernels.Tensor, idx kernels.IntTensor) {
	const op = "ScatterAddRows"
	if !b.ok() {
		return
	}
	D, S, I := b.t(op, dst), b.t(op, src), b.it(op, idx)
	if D == nil || S == nil || I == nil || !b.check(op, kernels.CheckScatterAddRows(D, S, I)) ||
		!b.check(op, kernels.CheckIndexValues(I.data, D.rows)) {
		return
	}
	f := D.cols
	b.pool.parallel(f, max(8, b.grain/max(len(I.data), 1)), func(lo, hi int) {
		for r, j := range I.data {
			d := D.data[int(j)*f+lo : int(j)*f+hi]
			s := S.data[r*f+lo : r*f+hi]
			for c := range d {
				d[c] += s[c]
			}
		}
	})
}

// addTo and addScaledTo add the first len(dst) values of src (scaled).
func addTo(dst, src []float32) { f32.Axpy(dst, 1, src[:len(dst)]) }

func addScaledTo(dst []float32, s float32, src []float32) { f32.Axpy(dst, s, src[:len(dst)]) }

func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// Aggregate sets dst from src with op over the block's in-edges.
func (b *Backend) Aggregate(db kernels.DeviceBlock, op kernels.AggOp, dst, src kernels.Tensor) {
	const name = "Aggregate"
	if !b.ok() {
		return
	}
	K, D, S := b.blk(name, db), b.t(name, dst), b.t(name, src)
	if K == nil || D == nil || S == nil || !b.check(name, kernels.CheckAggregate(K, op, D, S)) {
		return
	}
	f := S.cols
	avg := max(1, len(K.indices)/max(K.numDst, 1))
	b.pool.parallel(K.numDst, max(1, b.grain/max(f*avg, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out := D.data[i*f : (i+1)*f]
			clear(out)
			s, e := K.indptr[i], K.indptr[i+1]
			switch op {
			case kernels.AggGCN:
				for _, j := range K.indices[s:e] {
					addScaledTo(out, K.srcNorm[j], S.data[int(j)*f:(int(j)+1)*f])
				}
				scale(out, K.nbrNorm[i])
				addScaledTo(out, K.selfNorm[i]*K.srcNorm[i], S.data[i*f:(i+1)*f])
			default:
				for _, j := range K.indices[s:e] {
					addTo(out, S.data[int(j)*f:(int(j)+1)*f])
				}
				if op == kernels.AggMean && e > s {
					scale(out, 1/float32(e-s))
				}
			}
		}
	})
}

// AggregateBackward sets dSrc = Aᵀ·dDst using the transposed CSR.
func (b *Backend) AggregateBackward(db kernels.DeviceBlock, op kernels.AggOp, dSrc, dDst kernels.Tensor) {
	const name = "AggregateBackward"
	if !b.ok() {
		return
	}
	K, DS, DD := b.blk(name, db), b.t(name, dSrc), b.t(name, dDst)
	if K == nil || DS == nil || DD == nil || !b.check(name, kernels.CheckAggregateBackward(K, op, DS, DD)) {
		return
	}
	f := DD.cols
	avg := max(1, len(K.indices)/max(K.numSrc, 1))
	b.pool.parallel(K.numSrc, max(1, b.grain/max(f*avg, 1)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			out := DS.data[j*f : (j+1)*f]
			clear(out)
			s, e := K.tIndptr[j], K.tIndptr[j+1]
			switch op {
			case kernels.AggGCN:
				if j < K.numDst {
					addScaledTo(out, K.selfNorm[j], DD.data[j*f:(j+1)*f])
				}
				for _, i := range K.tDst[s:e] {
					addScaledTo(out, K.nbrNorm[i], DD.data[int(i)*f:(int(i)+1)*f])
				}
				scale(out, K.srcNorm[j])
			case kernels.AggSum:
				for _, i := range K.tDst[s:e] {
					addTo(out, DD.data[int(i)*f:(int(i)+1)*f])
				}
			case kernels.AggMean:
				for _, i := range K.tDst[s:e] {
					deg := K.indptr[i+1] - K.indptr[i]
					addScaledTo(out, 1/float32(deg), DD.data[int(i)*f:(int(i)+1)*f])
				}
			}
		}
	})
}

// elementwise runs fn over [0, n) in parallel chunks.
func (b *Backend) elementwise(n int, fn func(lo, hi int)) { b.pool.parallel(n, b.grain, fn) }

// ReLU sets dst = max(src, 0).
func (b *Backend) ReLU(dst, src kernels.Tensor) {
	const op = "ReLU"
	if !b.ok() {
		return
	}
	D, S := b.t(op, dst), b.t(op, src)
	if D == nil || S == nil || !b.check(op, kernels.CheckSame(S, D)) {
		return
	}
	b.elementwise(len(S.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			D.data[i] = max(S.data[i], 0)
		}
	})
}

// ReLUBackward sets dX = dY where y > 0.
func (b *Backend) ReLUBackward(dX, dY, y kernels.Tensor) {
	const op = "ReLUBackward"
	if !b.ok() {
		return
	}
	DX, DY, Y := b.t(op, dX), b.t(op, dY), b.t(op, y)
	if DX == nil || DY == nil || Y == nil || !b.check(op, kernels.CheckSame(Y, DY, DX)) {
		return
	}
	b.elementwise(len(Y.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if Y.data[i] > 0 {
				DX.data[i] = DY.data[i]
			} else {
				DX.data[i] = 0
			}
		}
	})
}

// Dropout applies inverted dropout with a counter-based mask.
func (b *Backend) Dropout(dst, src, mask kernels.Tensor, p float32, seed uint64) {
	const op = "Dropout"
	if !b.ok() {
		return
	}
	D, S, M := b.t(op, dst), b.t(op, src), b.t(op, mask)
	if D == nil || S == nil || M == nil || !b.check(op, kernels.CheckDropout(D, S, M, p)) {
		return
	}
	keep := kernels.NewDropoutKeep(p)
	b.elementwise(len(S.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m := keep.Factor(seed, uint64(i))
			M.data[i] = m
			D.data[i] = S.data[i] * m
		}
	})
}

// DropoutBackward sets dX = dY·mask.
func (b *Backend) DropoutBackward(dX, dY, mask kernels.Tensor) {
	const op = "DropoutBackward"
	if !b.ok() {
		return
	}
	DX, DY, M := b.t(op, dX), b.t(op, dY), b.t(op, mask)
	if DX == nil || DY == nil || M == nil || !b.check(op, kernels.CheckSame(M, DY, DX)) {
		return
	}
	b.elementwise(len(M.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			DX.data[i] = DY.data[i] * M.data[i]
		}
	})
}

// AddBias adds bias to every row of x.
func (b *Backend) AddBias(x, bias kernels.Tensor) {
	const op = "AddBias"
	if !b.ok() {
		return
	}
	X, B := b.t(op, x), b.t(op, bias)
	if X == nil || B == nil || !b.check(op, kernels.CheckAddBias(X, B)) {
		return
	}
	f := X.cols
	b.pool.parallel(X.rows, b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			addTo(X.data[r*f:(r+1)*f], B.data)
		}
	})
}

// BiasGrad sets dBias to the column sums of dY, split by column ranges so
// every sum runs in row order.
func (b *Backend) BiasGrad(dBias, dY kernels.Tensor) {
	const op = "BiasGrad"
	if !b.ok() {
		return
	}
	DB, DY := b.t(op, dBias), b.t(op, dY)
	if DB == nil || DY == nil || !b.check(op, kernels.CheckBiasGrad(DB, DY)) {
		return
	}
	f := DY.cols
	b.pool.parallel(f, max(16, b.grain/max(DY.rows, 1)), func(lo, hi int) {
		out := DB.data[lo:hi]
		clear(out)
		for r := 0; r < DY.rows; r++ {
			addTo(out, DY.data[r*f+lo:r*f+hi])
		}
	})
}

// Add sets dst = a + b.
func (b *Backend) Add(dst, x, y kernels.Tensor) {
	const op = "Add"
	if !b.ok() {
		return
	}
	D, X, Y := b.t(op, dst), b.t(op, x), b.t(op, y)
	if D == nil || X == nil || Y == nil || !b.check(op, kernels.CheckSame(X, Y, D)) {
		return
	}
	b.elementwise(len(D.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			D.data[i] = X.data[i] + Y.data[i]
		}
	})
}

// Scale sets x *= alpha.
func (b *Backend) Scale(x kernels.Tensor, alpha float32) {
	if !b.ok() {
		return
	}
	X := b.t("Scale", x)
	if X == nil {
		return
	}
	b.elementwise(len(X.data), func(lo, hi int) { scale(X.data[lo:hi], alpha) })
}

// AXPY sets y += alpha·x.
func (b *Backend) AXPY(y kernels.Tensor, alpha float32, x kernels.Tensor) {
	const op = "AXPY"
	if !b.ok() {
		return
	}
	Y, X := b.t(op, y), b.t(op, x)
	if Y == nil || X == nil || !b.check(op, kernels.CheckSame(X, Y)) {
		return
	}
	b.elementwise(len(Y.data), func(lo, hi int) { addScaledTo(Y.data[lo:hi], alpha, X.data[lo:hi]) })
}

// logSumExp returns max and log Σ exp(x - max) of a row, in float64.
func logSumExp(x []float32) float64 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v - m))
	}
	return float64(m) + math.Log(s)
}

// LogSoftmax sets each row of dst to log softmax of src's row.
func (b *Backend) LogSoftmax(dst, src kernels.Tensor) {
	const op = "LogSoftmax"
	if !b.ok() {
		return
	}
	D, S := b.t(op, dst), b.t(op, src)
	if D == nil || S == nil || !b.check(op, kernels.CheckSame(S, D)) {
		return
	}
	f := S.cols
	b.pool.parallel(S.rows, b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := S.data[r*f : (r+1)*f]
			lse := logSumExp(x)
			d := D.data[r*f : (r+1)*f]
			for c := range x {
				d[c] = float32(float64(x[c]) - lse)
			}
		}
	})
}

// CrossEntropy returns the mean NLL of log-softmax over labelled rows and
// optionally its gradient.
func (b *Backend) CrossEntropy(dLogits, logits kernels.Tensor, labels kernels.IntTensor) (float32, int, error) {
	const op = "CrossEntropy"
	if !b.ok() {
		return 0, 0, b.err
	}
	X, L := b.t(op, logits), b.it(op, labels)
	var D *tensor
	if dLogits != nil {
		D = b.t(op, dLogits)
		if D == nil {
			return 0, 0, b.err
		}
	}
	if X == nil || L == nil || !b.check(op, kernels.CheckCrossEntropy(dLogits, X, L)) ||
		!b.check(op, kernels.CheckLabelValues(L.data, X.cols)) {
		return 0, 0, b.err
	}
	n := 0
	for _, l := range L.data {
		if l >= 0 {
			n++
		}
	}
	f := X.cols
	rowLoss := make([]float64, X.rows)
	inv := float32(0)
	if n > 0 {
		inv = 1 / float32(n)
	}
	b.pool.parallel(X.rows, b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := X.data[r*f : (r+1)*f]
			l := L.data[r]
			var d []float32
			if D != nil {
				d = D.data[r*f : (r+1)*f]
			}
			if l < 0 {
				clear(d)
				continue
			}
			lse := logSumExp(x)
			rowLoss[r] = lse - float64(x[l])
			if d != nil {
				for c := range x {
					d[c] = float32(math.Exp(float64(x[c])-lse)) * inv
				}
				d[l] -= inv
			}
		}
	})
	if n == 0 {
		return 0, 0, nil
	}
	var sum float64
	for _, v := range rowLoss {
		sum += v
	}
	return float32(sum / float64(n)), n, nil
}

func argmax(x []float32) int {
	best := 0
	for c := 1; c < len(x); c++ {
		if x[c] > x[best] {
			best = c
		}
	}
	return best
}

// Argmax sets dst[r] to the index of row r's maximum.
func (b *Backend) Argmax(dst kernels.IntTensor, src kernels.Tensor) {
	const op = "Argmax"
	if !b.ok() {
		return
	}
	D, S := b.it(op, dst), b.t(op, src)
	if D == nil || S == nil || !b.check(op, kernels.CheckArgmax(D, S)) {
		return
	}
	f := S.cols
	b.pool.parallel(S.rows, b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			D.data[r] = int32(argmax(S.data[r*f : (r+1)*f]))
		}
	})
}

// Accuracy counts labelled rows and correct argmax predictions.
func (b *Backend) Accuracy(logits kernels.Tensor, labels kernels.IntTensor) (correct, total int, err error) {
	const op = "Accuracy"
	if !b.ok() {
		return 0, 0, b.err
	}
	X, L := b.t(op, logits), b.it(op, labels)
	if X == nil || L == nil || !b.check(op, kernels.CheckLabels(X, L)) ||
		!b.check(op, kernels.CheckLabelValues(L.data, X.cols)) {
		return 0, 0, b.err
	}
	f := X.cols
	for r, l := range L.data {
		if l < 0 {
			continue
		}
		total++
		if argmax(X.data[r*f:(r+1)*f]) == int(l) {
			correct++
		}
	}
	return correct, total, nil
}

// Adam performs one Adam step in place.
func (b *Backend) Adam(param, grad, m, v kernels.Tensor, t int, cfg kernels.AdamConfig) {
	const op = "Adam"
	if !b.ok() {
		return
	}
	P, G, M, V := b.t(op, param), b.t(op, grad), b.t(op, m), b.t(op, v)
	if P == nil || G == nil || M == nil || V == nil || !b.check(op, kernels.CheckAdam(P, G, M, V, t)) {
		return
	}
	b1, b2 := cfg.Beta1, cfg.Beta2
	c1 := float32(1 - math.Pow(float64(b1), float64(t)))
	c2 := float32(1 - math.Pow(float64(b2), float64(t)))
	b.elementwise(len(P.data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := G.data[i] + cfg.WeightDecay*P.data[i]
			mi := b1*M.data[i] + (1-b1)*g
			vi := b2*V.data[i] + (1-b2)*g*g
			M.data[i], V.data[i] = mi, vi
			P.data[i] -= cfg.LR * (mi / c1) / (float32(math.Sqrt(float64(vi/c2))) + cfg.Eps)
		}
	})
}
