//go:build cuda && cgo && linux

package cuda

import (
	"encoding/binary"
	"math"

	"gorgonia.org/cu"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// scratch runs fn with temporary device buffers of the given byte sizes
// from the pool; they go back to the pool when fn has queued its kernels
// (stream order makes the reuse safe).
func (d *device) scratch(sizes []int64, fn func(p []cu.DevicePtr) error) error {
	ptrs := make([]cu.DevicePtr, len(sizes))
	defer func() {
		for i, p := range ptrs {
			d.pool.put(p, sizes[i])
		}
	}()
	for i, n := range sizes {
		if n == 0 {
			continue
		}
		p, err := d.pool.get(n)
		if err != nil {
			return err
		}
		ptrs[i] = p
	}
	return fn(ptrs)
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
		b.enqueue(op, func(d *device) error { return d.grid("scale_inplace", C.n(), C.ptr, C.n(), beta) })
		return
	}
	tA, tB := int64(0), int64(0)
	if transA {
		tA = 1
	}
	if transB {
		tB = 1
	}
	args := []any{A.ptr, B.ptr, C.ptr, int64(m), int64(n), int64(k), int64(A.cols), int64(B.cols), tA, tB, alpha, beta}
	mt, nt := (m+63)/64, (n+63)/64
	if b.opts.GEMM == GEMMNaive || nt > 65535 {
		b.enqueue(op, func(d *device) error { return d.grid("gemm_naive", int64(m)*int64(n), args...) })
		return
	}
	b.enqueue(op, func(d *device) error { return d.launch("gemm_tiled", mt, nt, 256, args...) })
}

// GatherRows sets dst[r] = src[idx[r]]. Out-of-range indices are detected
// on the device and reported at the next sync point.
func (b *Backend) GatherRows(dst, src kernels.Tensor, idx kernels.IntTensor) {
	const op = "GatherRows"
	if !b.ok() {
		return
	}
	D, S, I := b.t(op, dst), b.t(op, src), b.it(op, idx)
	if D == nil || S == nil || I == nil || !b.check(op, kernels.CheckGatherRows(D, S, I)) {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.grid("gather_rows", D.n(), D.ptr, S.ptr, I.ptr, int64(I.n), int64(S.cols), int64(S.rows), d.errBuf)
	})
}

// ScatterAddRows accumulates dst[idx[r]] += src[r] in increasing r order.
// A marking pass counts hits per destination row (integer atomics); when
// no row repeats the add is row-parallel, else one thread per column walks
// r in order. Both kernels are launched and each returns at once unless the
// duplicate flag selects it, so no host round trip is needed.
func (b *Backend) ScatterAddRows(dst, src kernels.Tensor, idx kernels.IntTensor) {
	const op = "ScatterAddRows"
	if !b.ok() {
		return
	}
	D, S, I := b.t(op, dst), b.t(op, src), b.it(op, idx)
	if D == nil || S == nil || I == nil || !b.check(op, kernels.CheckScatterAddRows(D, S, I)) {
		return
	}
	if I.n == 0 || D.cols == 0 {
		return
	}
	n, f, rows := int64(I.n), int64(D.cols), int64(D.rows)
	b.enqueue(op, func(d *device) error {
		return d.scratch([]int64{rows*4 + 4}, func(p []cu.DevicePtr) error {
			count, dup := p[0], p[0]+cu.DevicePtr(rows*4)
			if err := d.memset32(count, 0, rows+1); err != nil {
				return err
			}
			if err := d.grid("scatter_mark", n, I.ptr, count, dup, n, rows, d.errBuf); err != nil {
				return err
			}
			if err := d.grid("scatter_add_unique", n*f, D.ptr, S.ptr, I.ptr, dup, n, f, rows); err != nil {
				return err
			}
			return d.grid("scatter_add_serial", f, D.ptr, S.ptr, I.ptr, dup, n, f, rows)
		})
	})
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
	b.enqueue(name, func(d *device) error {
		return d.grid("aggregate", D.n(), K.indptr, K.indices, K.nbrNorm, K.selfNorm, K.srcNorm, D.ptr, S.ptr, int64(K.numDst), int64(S.cols), int64(op))
	})
}

// AggregateBackward sets dSrc = Aᵀ·dDst over the transposed CSR.
func (b *Backend) AggregateBackward(db kernels.DeviceBlock, op kernels.AggOp, dSrc, dDst kernels.Tensor) {
	const name = "AggregateBackward"
	if !b.ok() {
		return
	}
	K, DS, DD := b.blk(name, db), b.t(name, dSrc), b.t(name, dDst)
	if K == nil || DS == nil || DD == nil || !b.check(name, kernels.CheckAggregateBackward(K, op, DS, DD)) {
		return
	}
	b.enqueue(name, func(d *device) error {
		return d.grid("aggregate_backward", DS.n(), K.indptr, K.tIndptr, K.tDst, K.nbrNorm, K.selfNorm, K.srcNorm, DS.ptr, DD.ptr,
			int64(K.numDst), int64(K.numSrc), int64(DD.cols), int64(op))
	})
}

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
	b.enqueue(op, func(d *device) error { return d.grid("relu", S.n(), D.ptr, S.ptr, S.n()) })
}

// ReLUBackward sets dX = dY where y > 0, else 0.
func (b *Backend) ReLUBackward(dX, dY, y kernels.Tensor) {
	const op = "ReLUBackward"
	if !b.ok() {
		return
	}
	DX, DY, Y := b.t(op, dX), b.t(op, dY), b.t(op, y)
	if DX == nil || DY == nil || Y == nil || !b.check(op, kernels.CheckSame(Y, DY, DX)) {
		return
	}
	b.enqueue(op, func(d *device) error { return d.grid("relu_backward", Y.n(), DX.ptr, DY.ptr, Y.ptr, Y.n()) })
}

// Dropout applies inverted dropout with the kernels.DropoutUniform mask.
func (b *Backend) Dropout(dst, src, mask kernels.Tensor, p float32, seed uint64) {
	const op = "Dropout"
	if !b.ok() {
		return
	}
	D, S, M := b.t(op, dst), b.t(op, src), b.t(op, mask)
	if D == nil || S == nil || M == nil || !b.check(op, kernels.CheckDropout(D, S, M, p)) {
		return
	}
	keep := kernels.DropoutScale(p)
	b.enqueue(op, func(d *device) error { return d.grid("dropout", S.n(), D.ptr, S.ptr, M.ptr, S.n(), p, keep, seed) })
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
	b.enqueue(op, func(d *device) error { return d.grid("mul", M.n(), DX.ptr, DY.ptr, M.ptr, M.n()) })
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
	b.enqueue(op, func(d *device) error { return d.grid("add_bias", X.n(), X.ptr, B.ptr, int64(X.rows), int64(X.cols)) })
}

// colReduce sets out[c] = Σ_r w(r,c)·x[r, c] with the fixed two-level
// order of colreduce_partial/colreduce_final; weight == 0 means w = 1,
// else w(r,c) = weight[r·H + c/F].
func (d *device) colReduce(out, x, weight cu.DevicePtr, rows, cols, H, F int64) error {
	if cols == 0 {
		return nil
	}
	nchunks := max(1, (rows+colChunk-1)/colChunk)
	return d.scratch([]int64{nchunks * cols * 4}, func(p []cu.DevicePtr) error {
		if err := d.grid("colreduce_partial", nchunks*cols, x, weight, p[0], rows, cols, H, F, int64(colChunk), nchunks); err != nil {
			return err
		}
		return d.grid("colreduce_final", cols, p[0], out, cols, nchunks)
	})
}

// BiasGrad sets dBias to the column sums of dY (fixed-order two-level sum).
func (b *Backend) BiasGrad(dBias, dY kernels.Tensor) {
	const op = "BiasGrad"
	if !b.ok() {
		return
	}
	DB, DY := b.t(op, dBias), b.t(op, dY)
	if DB == nil || DY == nil || !b.check(op, kernels.CheckBiasGrad(DB, DY)) {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.colReduce(DB.ptr, DY.ptr, 0, int64(DY.rows), int64(DY.cols), 1, int64(max(DY.cols, 1)))
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
	b.enqueue(op, func(d *device) error { return d.grid("add", D.n(), D.ptr, X.ptr, Y.ptr, D.n()) })
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
	b.enqueue("Scale", func(d *device) error { return d.grid("scale", X.n(), X.ptr, X.n(), alpha) })
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
	b.enqueue(op, func(d *device) error { return d.grid("axpy", Y.n(), Y.ptr, X.ptr, Y.n(), alpha) })
}

// LogSoftmax sets each row of dst to log softmax of src's row.
func (b *Backend) LogSoftmax(dst, src kernels.Tensor) {
	const op = "LogSoftmax"
	if !b.ok() {
		return
	}
	D, S := b.t(op, dst), b.t(op, src)
	if D == nil || S == nil || !b.check(op, kernels.CheckSame(S, D)) || S.cols == 0 {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.grid("log_softmax", int64(S.rows), D.ptr, S.ptr, int64(S.rows), int64(S.cols))
	})
}

// CrossEntropy returns the mean NLL over labelled rows and optionally its
// gradient. The labelled count and the loss sum are fixed-order
// single-block reductions on the device; the 16-byte result is the only
// transfer. It is a sync point.
func (b *Backend) CrossEntropy(dLogits, logits kernels.Tensor, labels kernels.IntTensor) (float32, int, error) {
	const op = "CrossEntropy"
	if !b.ok() {
		return 0, 0, b.err
	}
	X, L := b.t(op, logits), b.it(op, labels)
	var D *tensor
	if dLogits != nil {
		if D = b.t(op, dLogits); D == nil {
			return 0, 0, b.err
		}
	}
	if X == nil || L == nil || !b.check(op, kernels.CheckCrossEntropy(dLogits, X, L)) {
		return 0, 0, b.err
	}
	if X.rows == 0 {
		return 0, 0, nil
	}
	var res [16]byte
	rows, cols := int64(X.rows), int64(X.cols)
	dptr := cu.DevicePtr(0)
	if D != nil {
		dptr = D.ptr
	}
	err := b.syncRead(op, func(d *device) error {
		return d.scratch([]int64{16, rows * 8}, func(p []cu.DevicePtr) error {
			nPtr, sumPtr, rowLoss := p[0], p[0]+8, p[1]
			if err := d.single("count_labelled", L.ptr, rows, cols, nPtr, d.errBuf); err != nil {
				return err
			}
			if err := d.grid("cross_entropy_rows", rows, dptr, X.ptr, L.ptr, nPtr, rowLoss, rows, cols); err != nil {
				return err
			}
			if err := d.single("sum_f64", rowLoss, rows, sumPtr); err != nil {
				return err
			}
			return d.dtoh(res[:], p[0])
		})
	})
	if err != nil {
		return 0, 0, err
	}
	n := int(int64(binary.LittleEndian.Uint64(res[:8])))
	sum := math.Float64frombits(binary.LittleEndian.Uint64(res[8:]))
	if n == 0 {
		return 0, 0, nil
	}
	return float32(sum / float64(n)), n, nil
}

// Argmax sets dst[r] to the column of row r's maximum (lowest on ties).
func (b *Backend) Argmax(dst kernels.IntTensor, src kernels.Tensor) {
	const op = "Argmax"
	if !b.ok() {
		return
	}
	D, S := b.it(op, dst), b.t(op, src)
	if D == nil || S == nil || !b.check(op, kernels.CheckArgmax(D, S)) {
		return
	}
	b.enqueue(op, func(d *device) error {
		return d.grid("argmax_rows", int64(S.rows), D.ptr, S.ptr, int64(S.rows), int64(S.cols))
	})
}

// Accuracy counts labelled rows and correct argmax predictions on the
// device; it is a sync point.
func (b *Backend) Accuracy(logits kernels.Tensor, labels kernels.IntTensor) (correct, total int, err error) {
	const op = "Accuracy"
	if !b.ok() {
		return 0, 0, b.err
	}
	X, L := b.t(op, logits), b.it(op, labels)
	if X == nil || L == nil || !b.check(op, kernels.CheckLabels(X, L)) {
		return 0, 0, b.err
	}
	if X.rows == 0 {
		return 0, 0, nil
	}
	var res [16]byte
	err = b.syncRead(op, func(d *device) error {
		return d.scratch([]int64{16}, func(p []cu.DevicePtr) error {
			if err := d.single("accuracy", X.ptr, L.ptr, int64(X.rows), int64(X.cols), p[0], d.errBuf); err != nil {
				return err
			}
			return d.dtoh(res[:], p[0])
		})
	})
	if err != nil {
		return 0, 0, err
	}
	return int(int64(binary.LittleEndian.Uint64(res[:8]))), int(int64(binary.LittleEndian.Uint64(res[8:]))), nil
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
	c1 := float32(1 - math.Pow(float64(cfg.Beta1), float64(t)))
	c2 := float32(1 - math.Pow(float64(cfg.Beta2), float64(t)))
	b.enqueue(op, func(d *device) error {
		return d.grid("adam", P.n(), P.ptr, G.ptr, M.ptr, V.ptr, P.n(), cfg.LR, cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, c1, c2)
	})
}
