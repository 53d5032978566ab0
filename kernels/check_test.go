package kernels_test

import (
	"errors"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// Shape-only stand-ins for backend handles.
type tensor struct{ rows, cols int }

func (t tensor) Rows() int { return t.rows }
func (t tensor) Cols() int { return t.cols }

type ints int

func (n ints) Len() int { return int(n) }

type block struct{ dst, src, edges int }

func (b block) NumDst() int   { return b.dst }
func (b block) NumSrc() int   { return b.src }
func (b block) NumEdges() int { return b.edges }

func T(r, c int) kernels.Tensor { return tensor{r, c} }

// blk has 2 destinations, 3 sources and 5 edges; GAT cases use H = 2 heads
// of F = 3 features.
var blk = block{dst: 2, src: 3, edges: 5}

type checkCase struct {
	name string
	err  error // nil, or the call must return an error wrapping it
	msg  string
	call func() error
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.err == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.err)
			}
			if got := err.Error(); got != tc.msg {
				t.Errorf("message\n got %q\nwant %q", got, tc.msg)
			}
		})
	}
}

const (
	shape   = "kernels: shape mismatch: "
	invalid = "kernels: invalid argument: "
)

func TestCheckGEMM(t *testing.T) {
	for _, tc := range []struct {
		name           string
		transA, transB bool
		a, b, c        kernels.Tensor
		m, n, k        int
		msg            string
	}{
		{"NN", false, false, T(2, 3), T(3, 4), T(2, 4), 2, 4, 3, ""},
		{"TN", true, false, T(3, 2), T(3, 4), T(2, 4), 2, 4, 3, ""},
		{"NT", false, true, T(2, 3), T(4, 3), T(2, 4), 2, 4, 3, ""},
		{"TT", true, true, T(3, 2), T(4, 3), T(2, 4), 2, 4, 3, ""},
		{"empty m", false, false, T(0, 3), T(3, 4), T(0, 4), 0, 4, 3, ""},
		{"empty k", false, false, T(2, 0), T(0, 4), T(2, 4), 2, 4, 0, ""},
		{"inner NN", false, false, T(2, 3), T(2, 4), T(2, 4), 0, 0, 0, "op(A) is 2×3, op(B) is 2×4"},
		{"inner TN", true, false, T(2, 3), T(3, 4), T(2, 4), 0, 0, 0, "op(A) is 3×2, op(B) is 3×4"},
		{"inner NT", false, true, T(2, 3), T(3, 4), T(2, 4), 0, 0, 0, "op(A) is 2×3, op(B) is 4×3"},
		{"C rows", false, false, T(2, 3), T(3, 4), T(3, 4), 0, 0, 0, "C is 3×4, want 2×4"},
		{"C cols", false, false, T(2, 3), T(3, 4), T(2, 5), 0, 0, 0, "C is 2×5, want 2×4"},
		{"C not transposed", true, true, T(3, 2), T(4, 3), T(4, 2), 0, 0, 0, "C is 4×2, want 2×4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, n, k, err := kernels.CheckGEMM(tc.transA, tc.transB, tc.a, tc.b, tc.c)
			if tc.msg == "" {
				if err != nil || m != tc.m || n != tc.n || k != tc.k {
					t.Fatalf("= %d, %d, %d, %v; want %d, %d, %d, nil", m, n, k, err, tc.m, tc.n, tc.k)
				}
				return
			}
			if !errors.Is(err, kernels.ErrShape) || err.Error() != shape+tc.msg {
				t.Fatalf("error %v, want ErrShape %q", err, tc.msg)
			}
		})
	}
}

func TestCheckElementwise(t *testing.T) {
	a := T(2, 3)
	runChecks(t, []checkCase{
		{"shape ok", nil, "", func() error { return kernels.CheckShape("x", a, 2, 3) }},
		{"shape rows", kernels.ErrShape, shape + "x is 2×3, want 1×3", func() error { return kernels.CheckShape("x", a, 1, 3) }},
		{"shape cols", kernels.ErrShape, shape + "x is 2×3, want 2×4", func() error { return kernels.CheckShape("x", a, 2, 4) }},
		{"same none", nil, "", func() error { return kernels.CheckSame(a) }},
		{"same ok", nil, "", func() error { return kernels.CheckSame(a, T(2, 3), T(2, 3)) }},
		{"same empty", nil, "", func() error { return kernels.CheckSame(T(0, 3), T(0, 3)) }},
		{"same rows", kernels.ErrShape, shape + "second operand is 3×3, want 2×3", func() error { return kernels.CheckSame(a, T(3, 3)) }},
		{"same cols", kernels.ErrShape, shape + "second operand is 2×2, want 2×3", func() error { return kernels.CheckSame(a, T(2, 3), T(2, 2)) }},
		{"same transposed", kernels.ErrShape, shape + "second operand is 3×2, want 2×3", func() error { return kernels.CheckSame(a, T(3, 2)) }},
		{"dropout ok", nil, "", func() error { return kernels.CheckDropout(a, T(2, 3), T(2, 3), 0) }},
		{"dropout p near 1", nil, "", func() error { return kernels.CheckDropout(a, T(2, 3), T(2, 3), 0.999) }},
		{"dropout dst", kernels.ErrShape, shape + "second operand is 2×2, want 2×3", func() error { return kernels.CheckDropout(T(2, 2), a, T(2, 3), 0.5) }},
		{"dropout mask", kernels.ErrShape, shape + "second operand is 1×3, want 2×3", func() error { return kernels.CheckDropout(T(2, 3), a, T(1, 3), 0.5) }},
		{"dropout p 1", kernels.ErrInvalidArg, invalid + "p = 1 not in [0,1)", func() error { return kernels.CheckDropout(a, a, a, 1) }},
		{"dropout p negative", kernels.ErrInvalidArg, invalid + "p = -0.5 not in [0,1)", func() error { return kernels.CheckDropout(a, a, a, -0.5) }},
		{"dropout shape before p", kernels.ErrShape, shape + "second operand is 3×3, want 2×3", func() error { return kernels.CheckDropout(a, a, T(3, 3), 2) }},
		{"adam ok", nil, "", func() error { return kernels.CheckAdam(a, T(2, 3), T(2, 3), T(2, 3), 1) }},
		{"adam grad", kernels.ErrShape, shape + "second operand is 3×2, want 2×3", func() error { return kernels.CheckAdam(a, T(3, 2), a, a, 1) }},
		{"adam m", kernels.ErrShape, shape + "second operand is 2×4, want 2×3", func() error { return kernels.CheckAdam(a, a, T(2, 4), a, 1) }},
		{"adam v", kernels.ErrShape, shape + "second operand is 1×3, want 2×3", func() error { return kernels.CheckAdam(a, a, a, T(1, 3), 1) }},
		{"adam step", kernels.ErrInvalidArg, invalid + "step 0 < 1", func() error { return kernels.CheckAdam(a, a, a, a, 0) }},
		{"bias ok", nil, "", func() error { return kernels.CheckAddBias(a, T(1, 3)) }},
		{"bias rows", kernels.ErrShape, shape + "bias is 2×3, want 1×3", func() error { return kernels.CheckAddBias(a, T(2, 3)) }},
		{"bias cols", kernels.ErrShape, shape + "bias is 1×2, want 1×3", func() error { return kernels.CheckAddBias(a, T(1, 2)) }},
		{"bias grad ok", nil, "", func() error { return kernels.CheckBiasGrad(T(1, 3), a) }},
		{"bias grad empty", nil, "", func() error { return kernels.CheckBiasGrad(T(1, 3), T(0, 3)) }},
		{"bias grad rows", kernels.ErrShape, shape + "dBias is 3×3, want 1×3", func() error { return kernels.CheckBiasGrad(T(3, 3), a) }},
		{"bias grad cols", kernels.ErrShape, shape + "dBias is 1×4, want 1×3", func() error { return kernels.CheckBiasGrad(T(1, 4), a) }},
	})
}

func TestCheckTransfer(t *testing.T) {
	runChecks(t, []checkCase{
		{"ok", nil, "", func() error { return kernels.CheckTransfer(T(2, 3), 6) }},
		{"empty", nil, "", func() error { return kernels.CheckTransfer(T(0, 3), 0) }},
		{"short", kernels.ErrShape, shape + "5 values for a 2×3 tensor", func() error { return kernels.CheckTransfer(T(2, 3), 5) }},
		{"long", kernels.ErrShape, shape + "7 values for a 2×3 tensor", func() error { return kernels.CheckTransfer(T(2, 3), 7) }},
		{"ints ok", nil, "", func() error { return kernels.CheckTransferInts(ints(4), 4) }},
		{"ints short", kernels.ErrShape, shape + "2 values for length 3", func() error { return kernels.CheckTransferInts(ints(3), 2) }},
	})
}

func TestCheckRows(t *testing.T) {
	runChecks(t, []checkCase{
		{"gather ok", nil, "", func() error { return kernels.CheckGatherRows(T(4, 3), T(9, 3), ints(4)) }},
		{"gather empty", nil, "", func() error { return kernels.CheckGatherRows(T(0, 3), T(0, 3), ints(0)) }},
		{"gather dst rows", kernels.ErrShape, shape + "dst is 2×3, want 4×3", func() error { return kernels.CheckGatherRows(T(2, 3), T(9, 3), ints(4)) }},
		{"gather dst cols", kernels.ErrShape, shape + "dst is 4×2, want 4×3", func() error { return kernels.CheckGatherRows(T(4, 2), T(9, 3), ints(4)) }},
		{"scatter ok", nil, "", func() error { return kernels.CheckScatterAddRows(T(9, 3), T(4, 3), ints(4)) }},
		{"scatter src rows", kernels.ErrShape, shape + "src is 2×3, want 4×3", func() error { return kernels.CheckScatterAddRows(T(9, 3), T(2, 3), ints(4)) }},
		{"scatter src cols", kernels.ErrShape, shape + "src is 4×5, want 4×3", func() error { return kernels.CheckScatterAddRows(T(9, 3), T(4, 5), ints(4)) }},
		{"index ok", nil, "", func() error { return kernels.CheckIndexValues([]int32{0, 3, 3, 1}, 4) }},
		{"index high", kernels.ErrInvalidArg, invalid + "idx[2] = 4 out of range [0,4)", func() error { return kernels.CheckIndexValues([]int32{0, 3, 4}, 4) }},
		{"index negative", kernels.ErrInvalidArg, invalid + "idx[0] = -1 out of range [0,4)", func() error { return kernels.CheckIndexValues([]int32{-1}, 4) }},
		{"index into empty", kernels.ErrInvalidArg, invalid + "idx[0] = 0 out of range [0,0)", func() error { return kernels.CheckIndexValues([]int32{0}, 0) }},
	})
}

func TestCheckAggregate(t *testing.T) {
	runChecks(t, []checkCase{
		{"ok", nil, "", func() error { return kernels.CheckAggregate(blk, kernels.AggGCN, T(2, 4), T(3, 4)) }},
		{"ok zero width", nil, "", func() error { return kernels.CheckAggregate(blk, kernels.AggMean, T(2, 0), T(3, 0)) }},
		{"op", kernels.ErrInvalidArg, invalid + "AggOp(7)", func() error { return kernels.CheckAggregate(blk, 7, T(2, 4), T(3, 4)) }},
		{"op before shape", kernels.ErrInvalidArg, invalid + "AggOp(-1)", func() error { return kernels.CheckAggregate(blk, -1, T(9, 9), T(9, 9)) }},
		{"src rows", kernels.ErrShape, shape + "src is 2×4, want 3×4", func() error { return kernels.CheckAggregate(blk, kernels.AggSum, T(2, 4), T(2, 4)) }},
		{"dst rows", kernels.ErrShape, shape + "dst is 3×4, want 2×4", func() error { return kernels.CheckAggregate(blk, kernels.AggSum, T(3, 4), T(3, 4)) }},
		{"dst cols", kernels.ErrShape, shape + "dst is 2×5, want 2×4", func() error { return kernels.CheckAggregate(blk, kernels.AggSum, T(2, 5), T(3, 4)) }},
		{"backward ok", nil, "", func() error { return kernels.CheckAggregateBackward(blk, kernels.AggSum, T(3, 4), T(2, 4)) }},
		{"backward op", kernels.ErrInvalidArg, invalid + "AggOp(3)", func() error { return kernels.CheckAggregateBackward(blk, 3, T(3, 4), T(2, 4)) }},
		{"backward dDst rows", kernels.ErrShape, shape + "dDst is 3×4, want 2×4", func() error { return kernels.CheckAggregateBackward(blk, kernels.AggSum, T(3, 4), T(3, 4)) }},
		{"backward dSrc rows", kernels.ErrShape, shape + "dSrc is 2×4, want 3×4", func() error { return kernels.CheckAggregateBackward(blk, kernels.AggMean, T(2, 4), T(2, 4)) }},
		{"backward dSrc cols", kernels.ErrShape, shape + "dSrc is 3×1, want 3×4", func() error { return kernels.CheckAggregateBackward(blk, kernels.AggGCN, T(3, 1), T(2, 4)) }},
	})
}

func TestCheckLabels(t *testing.T) {
	x := T(2, 3)
	runChecks(t, []checkCase{
		{"labels ok", nil, "", func() error { return kernels.CheckLabels(x, ints(2)) }},
		{"labels count", kernels.ErrShape, shape + "1 labels for 2 rows", func() error { return kernels.CheckLabels(x, ints(1)) }},
		{"values ok", nil, "", func() error { return kernels.CheckLabelValues([]int32{-1, 0, 2}, 3) }},
		{"values high", kernels.ErrInvalidArg, invalid + "label[1] = 3 not in [-1,3)", func() error { return kernels.CheckLabelValues([]int32{0, 3}, 3) }},
		{"values low", kernels.ErrInvalidArg, invalid + "label[0] = -2 not in [-1,3)", func() error { return kernels.CheckLabelValues([]int32{-2}, 3) }},
		{"cross entropy ok", nil, "", func() error { return kernels.CheckCrossEntropy(T(2, 3), x, ints(2)) }},
		{"cross entropy no gradient", nil, "", func() error { return kernels.CheckCrossEntropy(nil, x, ints(2)) }},
		{"cross entropy dLogits", kernels.ErrShape, shape + "second operand is 2×2, want 2×3", func() error { return kernels.CheckCrossEntropy(T(2, 2), x, ints(2)) }},
		{"cross entropy labels", kernels.ErrShape, shape + "3 labels for 2 rows", func() error { return kernels.CheckCrossEntropy(nil, x, ints(3)) }},
		{"argmax ok", nil, "", func() error { return kernels.CheckArgmax(ints(2), x) }},
		{"argmax empty", nil, "", func() error { return kernels.CheckArgmax(ints(0), T(0, 0)) }},
		{"argmax length", kernels.ErrShape, shape + "dst length 1 for a 2×3 tensor", func() error { return kernels.CheckArgmax(ints(1), x) }},
		{"argmax no columns", kernels.ErrShape, shape + "dst length 2 for a 2×0 tensor", func() error { return kernels.CheckArgmax(ints(2), T(2, 0)) }},
	})
}

func TestCheckGAT(t *testing.T) {
	// E = 5, NumSrc = 3, NumDst = 2, H = 2, F = 3.
	e, w, v, o := T(5, 2), T(3, 6), T(1, 6), T(2, 6)
	f := func(fn func() (int, error)) func() error {
		return func() error {
			got, err := fn()
			if err == nil && got != 3 {
				return errors.New("F != 3")
			}
			return err
		}
	}
	scores := func(s, wh, al, ar kernels.Tensor) func() error {
		return f(func() (int, error) { return kernels.CheckGATScores(blk, s, wh, al, ar) })
	}
	scoresB := func(dw, dal, dar, ds, s, wh, al, ar kernels.Tensor) func() error {
		return f(func() (int, error) { return kernels.CheckGATScoresBackward(blk, dw, dal, dar, ds, s, wh, al, ar) })
	}
	wsum := func(out, a, wh kernels.Tensor) func() error {
		return f(func() (int, error) { return kernels.CheckEdgeWeightedSum(blk, out, a, wh) })
	}
	wsumB := func(da, dw, do, a, wh kernels.Tensor) func() error {
		return f(func() (int, error) { return kernels.CheckEdgeWeightedSumBackward(blk, da, dw, do, a, wh) })
	}
	bad := T(1, 5)
	runChecks(t, []checkCase{
		{"scores ok", nil, "", scores(e, w, v, v)},
		{"scores no heads", kernels.ErrShape, shape + "0 heads do not divide 6 feature columns", scores(T(5, 0), w, v, v)},
		{"scores heads divide", kernels.ErrShape, shape + "4 heads do not divide 6 feature columns", scores(T(5, 4), w, v, v)},
		{"scores edges", kernels.ErrShape, shape + "edge tensor is 4×2, want 5×2", scores(T(4, 2), w, v, v)},
		{"scores wh rows", kernels.ErrShape, shape + "wh is 2×6, want 3×6", scores(e, T(2, 6), v, v)},
		{"scores attnL", kernels.ErrShape, shape + "attnL is 1×5, want 1×6", scores(e, w, bad, v)},
		{"scores attnR", kernels.ErrShape, shape + "attnR is 2×6, want 1×6", scores(e, w, v, T(2, 6))},

		{"scores backward ok", nil, "", scoresB(w, v, v, e, e, w, v, v)},
		{"scores backward heads", kernels.ErrShape, shape + "4 heads do not divide 6 feature columns", scoresB(w, v, v, e, T(5, 4), w, v, v)},
		{"scores backward edges", kernels.ErrShape, shape + "edge tensor is 6×2, want 5×2", scoresB(w, v, v, e, T(6, 2), w, v, v)},
		{"scores backward wh", kernels.ErrShape, shape + "wh is 4×6, want 3×6", scoresB(w, v, v, e, e, T(4, 6), v, v)},
		{"scores backward dScores", kernels.ErrShape, shape + "second operand is 5×1, want 5×2", scoresB(w, v, v, T(5, 1), e, w, v, v)},
		{"scores backward dWh", kernels.ErrShape, shape + "second operand is 2×6, want 3×6", scoresB(T(2, 6), v, v, e, e, w, v, v)},
		{"scores backward attnL", kernels.ErrShape, shape + "attention vector is 1×5, want 1×6", scoresB(w, v, v, e, e, w, bad, v)},
		{"scores backward attnR", kernels.ErrShape, shape + "attention vector is 1×5, want 1×6", scoresB(w, v, v, e, e, w, v, bad)},
		{"scores backward dAttnL", kernels.ErrShape, shape + "attention vector is 1×5, want 1×6", scoresB(w, bad, v, e, e, w, v, v)},
		{"scores backward dAttnR", kernels.ErrShape, shape + "attention vector is 1×5, want 1×6", scoresB(w, v, bad, e, e, w, v, v)},

		{"softmax ok", nil, "", func() error { return kernels.CheckEdgeSoftmax(blk, e, e) }},
		{"softmax scores", kernels.ErrShape, shape + "scores is 4×2, want 5×2", func() error { return kernels.CheckEdgeSoftmax(blk, e, T(4, 2)) }},
		{"softmax alpha", kernels.ErrShape, shape + "second operand is 5×1, want 5×2", func() error { return kernels.CheckEdgeSoftmax(blk, T(5, 1), e) }},
		{"softmax backward ok", nil, "", func() error { return kernels.CheckEdgeSoftmaxBackward(blk, e, e, e) }},
		{"softmax backward alpha", kernels.ErrShape, shape + "alpha is 3×2, want 5×2", func() error { return kernels.CheckEdgeSoftmaxBackward(blk, e, e, T(3, 2)) }},
		{"softmax backward dAlpha", kernels.ErrShape, shape + "second operand is 5×3, want 5×2", func() error { return kernels.CheckEdgeSoftmaxBackward(blk, e, T(5, 3), e) }},
		{"softmax backward dScores", kernels.ErrShape, shape + "second operand is 6×2, want 5×2", func() error { return kernels.CheckEdgeSoftmaxBackward(blk, T(6, 2), e, e) }},

		{"weighted sum ok", nil, "", wsum(o, e, w)},
		{"weighted sum heads", kernels.ErrShape, shape + "4 heads do not divide 6 feature columns", wsum(o, T(5, 4), w)},
		{"weighted sum alpha", kernels.ErrShape, shape + "edge tensor is 2×2, want 5×2", wsum(o, T(2, 2), w)},
		{"weighted sum wh", kernels.ErrShape, shape + "wh is 2×6, want 3×6", wsum(o, e, T(2, 6))},
		{"weighted sum out rows", kernels.ErrShape, shape + "out is 3×6, want 2×6", wsum(T(3, 6), e, w)},
		{"weighted sum out cols", kernels.ErrShape, shape + "out is 2×3, want 2×6", wsum(T(2, 3), e, w)},

		{"weighted sum backward ok", nil, "", wsumB(e, w, o, e, w)},
		{"weighted sum backward heads", kernels.ErrShape, shape + "4 heads do not divide 6 feature columns", wsumB(e, w, o, T(5, 4), w)},
		{"weighted sum backward wh", kernels.ErrShape, shape + "wh is 5×6, want 3×6", wsumB(e, w, o, e, T(5, 6))},
		{"weighted sum backward dAlpha", kernels.ErrShape, shape + "second operand is 5×1, want 5×2", wsumB(T(5, 1), w, o, e, w)},
		{"weighted sum backward dWh", kernels.ErrShape, shape + "second operand is 3×2, want 3×6", wsumB(e, T(3, 2), o, e, w)},
		{"weighted sum backward dOut", kernels.ErrShape, shape + "dOut is 2×2, want 2×6", wsumB(e, w, T(2, 2), e, w)},
	})
}

// TestCheckEmptyBlock covers a block with no edges: per-edge tensors are
// 0×H and every check still applies.
func TestCheckEmptyBlock(t *testing.T) {
	empty := block{dst: 1, src: 1, edges: 0}
	runChecks(t, []checkCase{
		{"scores ok", nil, "", func() error {
			_, err := kernels.CheckGATScores(empty, T(0, 2), T(1, 4), T(1, 4), T(1, 4))
			return err
		}},
		{"scores edges", kernels.ErrShape, shape + "edge tensor is 1×2, want 0×2", func() error {
			_, err := kernels.CheckGATScores(empty, T(1, 2), T(1, 4), T(1, 4), T(1, 4))
			return err
		}},
		{"softmax ok", nil, "", func() error { return kernels.CheckEdgeSoftmax(empty, T(0, 3), T(0, 3)) }},
		{"aggregate ok", nil, "", func() error { return kernels.CheckAggregate(empty, kernels.AggSum, T(1, 2), T(1, 2)) }},
	})
}
