package kernels

import "fmt"

// This file holds the shape and argument rules of the Backend contract,
// written once for every backend. Each CheckX validates the operands of op X
// through the Tensor, IntTensor and DeviceBlock interfaces only and returns
// nil or an error wrapping ErrShape (wrong dimensions) or ErrInvalidArg (a
// bad scalar argument). The error names the operand and gives its actual and
// wanted shape; a backend prefixes its name and the op's
// ("cpu: GEMM: ...") and records it as its sticky error.
//
// The validators do not look at handle ownership or liveness (ErrForeignTensor,
// ErrFreed): a backend resolves its handles first and passes the resolved,
// non-nil values. Nor do they read tensor contents: index and label ranges
// are checked wherever the backend can see the data (the CPU backend on the
// host, the CUDA backend in its kernels). Checks run in a fixed order and the
// first failure is returned, so every backend reports the same error for the
// same bad call.

// CheckShape returns an ErrShape error unless x is rows×cols; name identifies
// the operand in the message.
func CheckShape(name string, x Tensor, rows, cols int) error {
	if x.Rows() != rows || x.Cols() != cols {
		return fmt.Errorf("%w: %s is %d×%d, want %d×%d", ErrShape, name, x.Rows(), x.Cols(), rows, cols)
	}
	return nil
}

// CheckSame returns an ErrShape error unless every tensor in others has x's
// shape. It is the rule of the element-wise ops (ReLU, Add, AXPY,
// LogSoftmax, Copy, ...), checked in argument order.
func CheckSame(x Tensor, others ...Tensor) error {
	for _, y := range others {
		if err := CheckShape("second operand", y, x.Rows(), x.Cols()); err != nil {
			return err
		}
	}
	return nil
}

// CheckTransfer checks a host↔device copy of n float32 values to or from t
// (Upload, Download): n must be Rows·Cols.
func CheckTransfer(t Tensor, n int) error {
	if int64(n) != int64(t.Rows())*int64(t.Cols()) {
		return fmt.Errorf("%w: %d values for a %d×%d tensor", ErrShape, n, t.Rows(), t.Cols())
	}
	return nil
}

// CheckTransferInts checks a host↔device copy of n int32 values to or from t
// (UploadInts, DownloadInts): n must be t.Len().
func CheckTransferInts(t IntTensor, n int) error {
	if n != t.Len() {
		return fmt.Errorf("%w: %d values for length %d", ErrShape, n, t.Len())
	}
	return nil
}

// CheckGEMM checks C = alpha·op(A)·op(B) + beta·C: op(A) is m×k, op(B) must
// be k×n and C m×n. It returns m, n and k.
func CheckGEMM(transA, transB bool, a, b, c Tensor) (m, n, k int, err error) {
	m, k = a.Rows(), a.Cols()
	if transA {
		m, k = k, m
	}
	kb, n := b.Rows(), b.Cols()
	if transB {
		kb, n = n, kb
	}
	if kb != k {
		return 0, 0, 0, fmt.Errorf("%w: op(A) is %d×%d, op(B) is %d×%d", ErrShape, m, k, kb, n)
	}
	if err := CheckShape("C", c, m, n); err != nil {
		return 0, 0, 0, err
	}
	return m, n, k, nil
}

// CheckGatherRows checks dst[r] = src[idx[r]]: dst is idx.Len()×src.Cols().
func CheckGatherRows(dst, src Tensor, idx IntTensor) error {
	return CheckShape("dst", dst, idx.Len(), src.Cols())
}

// CheckScatterAddRows checks dst[idx[r]] += src[r]: src is
// idx.Len()×dst.Cols().
func CheckScatterAddRows(dst, src Tensor, idx IntTensor) error {
	return CheckShape("src", src, idx.Len(), dst.Cols())
}

// CheckAggregate checks Aggregate: op is defined, src is NumSrc×F and dst
// NumDst×F with F = src.Cols().
func CheckAggregate(blk DeviceBlock, op AggOp, dst, src Tensor) error {
	if !op.Valid() {
		return fmt.Errorf("%w: %v", ErrInvalidArg, op)
	}
	if err := CheckShape("src", src, blk.NumSrc(), src.Cols()); err != nil {
		return err
	}
	return CheckShape("dst", dst, blk.NumDst(), src.Cols())
}

// CheckAggregateBackward checks AggregateBackward: op is defined, dDst is
// NumDst×F and dSrc NumSrc×F with F = dDst.Cols().
func CheckAggregateBackward(blk DeviceBlock, op AggOp, dSrc, dDst Tensor) error {
	if !op.Valid() {
		return fmt.Errorf("%w: %v", ErrInvalidArg, op)
	}
	if err := CheckShape("dDst", dDst, blk.NumDst(), dDst.Cols()); err != nil {
		return err
	}
	return CheckShape("dSrc", dSrc, blk.NumSrc(), dDst.Cols())
}

// CheckDropout checks Dropout: dst and mask have src's shape and
// 0 <= p < 1.
func CheckDropout(dst, src, mask Tensor, p float32) error {
	if err := CheckSame(src, dst, mask); err != nil {
		return err
	}
	if !(p >= 0 && p < 1) {
		return fmt.Errorf("%w: p = %v not in [0,1)", ErrInvalidArg, p)
	}
	return nil
}

// CheckAddBias checks AddBias: bias is 1×x.Cols().
func CheckAddBias(x, bias Tensor) error {
	return CheckShape("bias", bias, 1, x.Cols())
}

// CheckBiasGrad checks BiasGrad: dBias is 1×dY.Cols().
func CheckBiasGrad(dBias, dY Tensor) error {
	return CheckShape("dBias", dBias, 1, dY.Cols())
}

// CheckLabels checks that there is one label per row of logits (Accuracy,
// and CrossEntropy through CheckCrossEntropy). The label values are checked
// where the backend can see them.
func CheckLabels(logits Tensor, labels IntTensor) error {
	if labels.Len() != logits.Rows() {
		return fmt.Errorf("%w: %d labels for %d rows", ErrShape, labels.Len(), logits.Rows())
	}
	return nil
}

// CheckLabelValues checks host-side labels against a logits width: every
// label is -1 (ignored) or in [0, cols). It returns an ErrInvalidArg error
// naming the first bad label.
func CheckLabelValues(labels []int32, cols int) error {
	for r, l := range labels {
		if l < -1 || int(l) >= cols {
			return fmt.Errorf("%w: label[%d] = %d not in [-1,%d)", ErrInvalidArg, r, l, cols)
		}
	}
	return nil
}

// CheckIndexValues checks host-side row indices (GatherRows,
// ScatterAddRows) against the number of rows they index: every index is in
// [0, rows). It returns an ErrInvalidArg error naming the first bad index.
func CheckIndexValues(idx []int32, rows int) error {
	for r, j := range idx {
		if j < 0 || int(j) >= rows {
			return fmt.Errorf("%w: idx[%d] = %d out of range [0,%d)", ErrInvalidArg, r, j, rows)
		}
	}
	return nil
}

// CheckCrossEntropy checks CrossEntropy: dLogits, when non-nil, has
// logits's shape, and there is one label per row.
func CheckCrossEntropy(dLogits, logits Tensor, labels IntTensor) error {
	if dLogits != nil {
		if err := CheckSame(logits, dLogits); err != nil {
			return err
		}
	}
	return CheckLabels(logits, labels)
}

// CheckArgmax checks Argmax: dst has one entry per row of src, and src has
// at least one column unless it has no rows.
func CheckArgmax(dst IntTensor, src Tensor) error {
	if dst.Len() != src.Rows() || (src.Cols() == 0 && src.Rows() > 0) {
		return fmt.Errorf("%w: dst length %d for a %d×%d tensor", ErrShape, dst.Len(), src.Rows(), src.Cols())
	}
	return nil
}

// CheckAdam checks Adam: grad, m and v have param's shape and t >= 1.
func CheckAdam(param, grad, m, v Tensor, t int) error {
	if err := CheckSame(param, grad, m, v); err != nil {
		return err
	}
	if t < 1 {
		return fmt.Errorf("%w: step %d < 1", ErrInvalidArg, t)
	}
	return nil
}

// checkHeads checks the GAT H·F layout shared by the per-edge ops: edge is
// E×H with H = edge.Cols() >= 1, wh is NumSrc×(H·F). It returns F.
func checkHeads(blk DeviceBlock, edge, wh Tensor) (int, error) {
	h := edge.Cols()
	if h < 1 || wh.Cols()%h != 0 {
		return 0, fmt.Errorf("%w: %d heads do not divide %d feature columns", ErrShape, h, wh.Cols())
	}
	if err := CheckShape("edge tensor", edge, blk.NumEdges(), h); err != nil {
		return 0, err
	}
	if err := CheckShape("wh", wh, blk.NumSrc(), wh.Cols()); err != nil {
		return 0, err
	}
	return wh.Cols() / h, nil
}

// CheckGATScores checks GATScores: scores is E×H (H >= 1), wh is
// NumSrc×(H·F), attnL and attnR are 1×(H·F). It returns F; H is
// scores.Cols().
func CheckGATScores(blk DeviceBlock, scores, wh, attnL, attnR Tensor) (f int, err error) {
	if f, err = checkHeads(blk, scores, wh); err != nil {
		return 0, err
	}
	if err := CheckShape("attnL", attnL, 1, wh.Cols()); err != nil {
		return 0, err
	}
	if err := CheckShape("attnR", attnR, 1, wh.Cols()); err != nil {
		return 0, err
	}
	return f, nil
}

// CheckGATScoresBackward checks GATScoresBackward: scores and wh as for
// GATScores, dScores has scores's shape, dWh has wh's, and attnL, attnR,
// dAttnL and dAttnR are 1×(H·F). It returns F; H is scores.Cols().
func CheckGATScoresBackward(blk DeviceBlock, dWh, dAttnL, dAttnR, dScores, scores, wh, attnL, attnR Tensor) (f int, err error) {
	if f, err = checkHeads(blk, scores, wh); err != nil {
		return 0, err
	}
	if err := CheckSame(scores, dScores); err != nil {
		return 0, err
	}
	if err := CheckSame(wh, dWh); err != nil {
		return 0, err
	}
	for _, x := range []Tensor{attnL, attnR, dAttnL, dAttnR} {
		if err := CheckShape("attention vector", x, 1, wh.Cols()); err != nil {
			return 0, err
		}
	}
	return f, nil
}

// CheckEdgeSoftmax checks EdgeSoftmax: scores is E×H and alpha has its
// shape.
func CheckEdgeSoftmax(blk DeviceBlock, alpha, scores Tensor) error {
	if err := CheckShape("scores", scores, blk.NumEdges(), scores.Cols()); err != nil {
		return err
	}
	return CheckSame(scores, alpha)
}

// CheckEdgeSoftmaxBackward checks EdgeSoftmaxBackward: alpha is E×H and
// dAlpha and dScores have its shape.
func CheckEdgeSoftmaxBackward(blk DeviceBlock, dScores, dAlpha, alpha Tensor) error {
	if err := CheckShape("alpha", alpha, blk.NumEdges(), alpha.Cols()); err != nil {
		return err
	}
	return CheckSame(alpha, dAlpha, dScores)
}

// CheckEdgeWeightedSum checks EdgeWeightedSum: alpha is E×H (H >= 1), wh is
// NumSrc×(H·F) and out NumDst×(H·F). It returns F; H is alpha.Cols().
func CheckEdgeWeightedSum(blk DeviceBlock, out, alpha, wh Tensor) (f int, err error) {
	if f, err = checkHeads(blk, alpha, wh); err != nil {
		return 0, err
	}
	if err := CheckShape("out", out, blk.NumDst(), wh.Cols()); err != nil {
		return 0, err
	}
	return f, nil
}

// CheckEdgeWeightedSumBackward checks EdgeWeightedSumBackward: alpha and wh
// as for EdgeWeightedSum, dAlpha has alpha's shape, dWh has wh's and dOut is
// NumDst×(H·F). It returns F; H is alpha.Cols().
func CheckEdgeWeightedSumBackward(blk DeviceBlock, dAlpha, dWh, dOut, alpha, wh Tensor) (f int, err error) {
	if f, err = checkHeads(blk, alpha, wh); err != nil {
		return 0, err
	}
	if err := CheckSame(alpha, dAlpha); err != nil {
		return 0, err
	}
	if err := CheckSame(wh, dWh); err != nil {
		return 0, err
	}
	if err := CheckShape("dOut", dOut, blk.NumDst(), wh.Cols()); err != nil {
		return 0, err
	}
	return f, nil
}
