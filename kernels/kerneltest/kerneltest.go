// Package kerneltest is the conformance suite every kernels.Backend must pass,
// plus benchmark helpers any backend can run.
//
// Run checks each op against a float64 reference implementation on random
// inputs (random shapes with edge cases: 1×1, sizes that are not multiples
// of 8, zero-degree destinations, isolated sources, duplicate edges, empty
// blocks) with absolute+relative tolerances, and checks every backward op
// against central finite differences of the float64 reference. It also
// checks the error contract (sticky ErrShape, foreign and freed handles,
// malformed blocks), memory accounting, bit-exact dropout masks and
// run-to-run determinism. Backends that implement the optional
// kernels.HostGatherer are checked against Upload+GatherRows bit for bit
// and against the same handle rules; the subtest is skipped for others.
//
// Randomised: the seed is logged and can be fixed with -kerneltest.seed.
// Each subtest derives its generator from the seed and its name, so a single
// subtest (-run 'Conformance/Aggregate') reproduces on its own.
package kerneltest

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/kernels"
)

var seedFlag = flag.Uint64("kerneltest.seed", 0, "seed for kerneltest's random inputs (0: time-based)")

// Run runs the conformance suite. newBackend is called once per subtest;
// the suite closes every backend it creates.
func Run(t *testing.T, newBackend func() kernels.Backend) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kerneltest seed %d (rerun with -kerneltest.seed=%d)", seed, seed)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, newBackend, seed)
			defer e.close()
			c.fn(e)
		})
	}
}

var cases = []struct {
	name string
	fn   func(*env)
}{
	{"Memory", testMemory},
	{"Errors", testErrors},
	{"GEMM", testGEMM},
	{"Gather", testGather},
	{"HostGather", testHostGather},
	{"Aggregate", testAggregate},
	{"ReLU", testReLU},
	{"Dropout", testDropout},
	{"FreeAfterUse", testFreeAfterUse},
	{"Bias", testBias},
	{"Elementwise", testElementwise},
	{"Softmax", testSoftmax},
	{"GATScores", testGATScores},
	{"EdgeSoftmax", testEdgeSoftmax},
	{"EdgeWeightedSum", testEdgeWeightedSum},
	{"GATLayer", testGATLayer},
	{"Adam", testAdam},
	{"Determinism", testDeterminism},
}

// env is one subtest's backend, generator and handle bookkeeping.
type env struct {
	*testing.T
	b       kernels.Backend
	rng     *rand.Rand
	tensors []kernels.Tensor
	ints    []kernels.IntTensor
	blocks  []kernels.DeviceBlock
	base    int64
	peer    func() kernels.Backend
}

func newEnv(t *testing.T, newBackend func() kernels.Backend, seed uint64) *env {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	b := newBackend()
	return &env{T: t, b: b, rng: rand.New(rand.NewPCG(seed, h.Sum64())), base: b.MemStats().Allocated, peer: newBackend}
}

// close frees every handle, checks the error state and the accounting, and
// closes the backend.
func (e *env) close() {
	e.Helper()
	for _, x := range e.tensors {
		e.b.Free(x)
	}
	for _, x := range e.ints {
		e.b.FreeInts(x)
	}
	for _, x := range e.blocks {
		e.b.FreeBlock(x)
	}
	if err := e.b.Err(); err != nil {
		e.Errorf("backend error: %v", err)
	}
	if got := e.b.MemStats().Allocated; got != e.base {
		e.Errorf("MemStats.Allocated = %d after freeing everything, want %d", got, e.base)
	}
	if err := e.b.Close(); err != nil {
		e.Errorf("Close: %v", err)
	}
}

// f32 rounds to float32 precision.
func f32(x float64) float64 { return float64(float32(x)) }

func (e *env) uniform(n int, lo, hi float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = f32(lo + (hi-lo)*e.rng.Float64())
	}
	return x
}

func (e *env) randn(n int) []float64 { return e.uniform(n, -1, 1) }

func (e *env) alloc(rows, cols int) kernels.Tensor {
	e.Helper()
	x, err := e.b.Alloc(rows, cols)
	if err != nil {
		e.Fatalf("Alloc(%d, %d): %v", rows, cols, err)
	}
	e.tensors = append(e.tensors, x)
	return x
}

// up allocates a rows×cols tensor holding data.
func (e *env) up(rows, cols int, data []float64) kernels.Tensor {
	e.Helper()
	x := e.alloc(rows, cols)
	e.b.Upload(x, to32(data))
	return x
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func (e *env) down(x kernels.Tensor) []float64 {
	e.Helper()
	buf := make([]float32, x.Rows()*x.Cols())
	if err := e.b.Download(buf, x); err != nil {
		e.Fatalf("Download: %v", err)
	}
	out := make([]float64, len(buf))
	for i, v := range buf {
		out[i] = float64(v)
	}
	return out
}

func (e *env) upInts(v []int32) kernels.IntTensor {
	e.Helper()
	x, err := e.b.AllocInts(len(v))
	if err != nil {
		e.Fatalf("AllocInts(%d): %v", len(v), err)
	}
	e.ints = append(e.ints, x)
	e.b.UploadInts(x, v)
	return x
}

func (e *env) upBlock(blk *kernels.Block) kernels.DeviceBlock {
	e.Helper()
	d, err := e.b.UploadBlock(blk)
	if err != nil {
		e.Fatalf("UploadBlock: %v", err)
	}
	e.blocks = append(e.blocks, d)
	if d.NumDst() != blk.NumDst || d.NumSrc() != blk.NumSrc || d.NumEdges() != blk.NumEdges() {
		e.Errorf("DeviceBlock sizes %d/%d/%d, want %d/%d/%d", d.NumDst(), d.NumSrc(), d.NumEdges(), blk.NumDst, blk.NumSrc, blk.NumEdges())
	}
	return d
}

// noErr fails the test now if the backend has recorded an error.
func (e *env) noErr(what string) {
	e.Helper()
	if err := e.b.Err(); err != nil {
		e.Fatalf("%s: backend error: %v", what, err)
	}
}

// Tolerances: |got-want| <= atol·(1+max|want|) + rtol·|want|.
const (
	fwdAtol, fwdRtol   = 1e-5, 1e-4
	gradAtol, gradRtol = 1e-4, 2e-3
)

func (e *env) near(what string, got, want []float64, atol, rtol float64) {
	e.Helper()
	if len(got) != len(want) {
		e.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	bad := 0
	for i := range got {
		tol := atol*(1+scale) + rtol*math.Abs(want[i])
		if !(math.Abs(got[i]-want[i]) <= tol) {
			if bad < 5 {
				e.Errorf("%s: [%d] = %.8g, want %.8g (tol %.3g)", what, i, got[i], want[i], tol)
			}
			bad++
		}
	}
	if bad > 5 {
		e.Errorf("%s: %d of %d values out of tolerance", what, bad, len(got))
	}
}

// gradCheck compares grad (the backend's gradient of L(x) = Σ w·f(x) with
// respect to x) with central differences of the float64 reference f, at up
// to 40 random coordinates.
func (e *env) gradCheck(what string, f func(x []float64) []float64, x, w, grad []float64) {
	e.Helper()
	if len(grad) != len(x) {
		e.Fatalf("%s: gradient has %d values, want %d", what, len(grad), len(x))
	}
	const h = 1e-6
	loss := func(x []float64) float64 {
		var s float64
		for i, v := range f(x) {
			s += w[i] * v
		}
		return s
	}
	coords := e.rng.Perm(len(x))
	if len(coords) > 40 {
		coords = coords[:40]
	}
	xp := append([]float64(nil), x...)
	var got, want []float64
	for _, c := range coords {
		xp[c] = x[c] + h
		lp := loss(xp)
		xp[c] = x[c] - h
		lm := loss(xp)
		xp[c] = x[c]
		want = append(want, (lp-lm)/(2*h))
		got = append(got, grad[c])
	}
	e.near(what+" vs finite differences", got, want, gradAtol, gradRtol)
}

// dims are matrix sizes mixing edge cases and non-multiples of 8.
var dims = []int{1, 2, 3, 7, 8, 13, 31, 64, 65}

func (e *env) dim() int { return dims[e.rng.IntN(len(dims))] }

// randBlock returns a block with zero-degree destinations, isolated
// sources and duplicate edges.
func (e *env) randBlock(numDst, numSrc, maxDeg int) *kernels.Block {
	blk := &kernels.Block{NumDst: numDst, NumSrc: numSrc, Indptr: make([]int32, numDst+1)}
	// Sources that no edge uses.
	isolated := map[int32]bool{}
	for j := 0; j < numSrc; j++ {
		if e.rng.IntN(5) == 0 {
			isolated[int32(j)] = true
		}
	}
	var live []int32
	for j := 0; j < numSrc; j++ {
		if !isolated[int32(j)] {
			live = append(live, int32(j))
		}
	}
	for i := 0; i < numDst; i++ {
		deg := e.rng.IntN(maxDeg + 1)
		if i%4 == 1 || len(live) == 0 {
			deg = 0
		}
		for range deg {
			blk.Indices = append(blk.Indices, live[e.rng.IntN(len(live))])
		}
		blk.Indptr[i+1] = int32(len(blk.Indices))
	}
	return blk
}

// testBlocks returns the block shapes every graph op is tested on.
func (e *env) testBlocks() []*kernels.Block {
	out := []*kernels.Block{
		{NumDst: 0, NumSrc: 0, Indptr: []int32{0}},
		{NumDst: 0, NumSrc: 3, Indptr: []int32{0}},
		{NumDst: 1, NumSrc: 1, Indptr: []int32{0, 1}, Indices: []int32{0}},
		{NumDst: 1, NumSrc: 1, Indptr: []int32{0, 0}},
		{NumDst: 2, NumSrc: 5, Indptr: []int32{0, 3, 3}, Indices: []int32{4, 4, 1}},
	}
	for range 4 {
		nd := 1 + e.rng.IntN(40)
		out = append(out, e.randBlock(nd, nd+e.rng.IntN(60), 1+e.rng.IntN(9)))
	}
	// Sampled from a larger graph (GCN's DstDegrees and SrcDegrees): full
	// degrees at least the block's, a destination without sampled edges
	// but with neighbours in the graph, and one with none in either.
	out = append(out, &kernels.Block{NumDst: 3, NumSrc: 5, Indptr: []int32{0, 2, 2, 2}, Indices: []int32{3, 4},
		DstDegrees: []int32{7, 4, 0}, SrcDegrees: []int32{2, 9, 0, 1, 30}})
	for range 2 {
		nd := 1 + e.rng.IntN(40)
		b := e.randBlock(nd, nd+e.rng.IntN(60), 1+e.rng.IntN(9))
		b.DstDegrees = make([]int32, nd)
		for i := range nd {
			b.DstDegrees[i] = b.Indptr[i+1] - b.Indptr[i] + int32(e.rng.IntN(50))
		}
		b.SrcDegrees = b.OutDegrees()
		for j := range b.SrcDegrees {
			b.SrcDegrees[j] += int32(e.rng.IntN(50))
		}
		out = append(out, b)
	}
	return out
}

func blkName(b *kernels.Block) string {
	s := fmt.Sprintf("block %d→%d with %d edges", b.NumSrc, b.NumDst, b.NumEdges())
	if b.DstDegrees != nil {
		s += " and graph degrees"
	}
	return s
}

func testMemory(e *env) {
	rows, cols := 13, 7
	x := e.randn(rows * cols)
	before := e.b.MemStats()
	a := e.up(rows, cols, x)
	ms := e.b.MemStats()
	if ms.Allocated-before.Allocated < int64(rows*cols*4) || ms.Peak < ms.Allocated || ms.Handles != before.Handles+1 {
		e.Errorf("MemStats after Alloc(%d,%d): %+v (before %+v)", rows, cols, ms, before)
	}
	e.near("Upload/Download", e.down(a), x, 0, 0)
	c := e.alloc(rows, cols)
	e.b.Copy(c, a)
	e.near("Copy", e.down(c), x, 0, 0)
	e.b.Zero(c)
	e.near("Zero", e.down(c), make([]float64, rows*cols), 0, 0)
	for _, shape := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {1, 1}} {
		z := e.alloc(shape[0], shape[1])
		e.b.Zero(z)
		if got := e.down(z); len(got) != shape[0]*shape[1] {
			e.Errorf("Download of %v tensor: %d values", shape, len(got))
		}
	}
	iv := []int32{5, -1, 0, 1 << 30}
	it := e.upInts(iv)
	got := make([]int32, len(iv))
	if err := e.b.DownloadInts(got, it); err != nil || fmt.Sprint(got) != fmt.Sprint(iv) {
		e.Errorf("DownloadInts = %v, %v; want %v", got, err, iv)
	}
	// Freeing returns the bytes; the peak stays.
	peak := e.b.MemStats().Peak
	f, err := e.b.Alloc(100, 100)
	if err != nil {
		e.Fatal(err)
	}
	e.b.Free(f)
	ms = e.b.MemStats()
	if ms.Peak < peak+40000 || ms.Peak < ms.Allocated {
		e.Errorf("Peak %d after a 40000-byte alloc on top of %d", ms.Peak, peak)
	}
	if _, err := e.b.Alloc(-1, 3); err == nil {
		e.Errorf("Alloc(-1, 3) succeeded")
	}
	e.noErr("memory ops")
}

func testErrors(e *env) {
	// Malformed blocks are rejected with a *BlockError.
	bad := []*kernels.Block{
		{NumDst: 2, NumSrc: 1, Indptr: []int32{0, 0, 0}},
		{NumDst: 1, NumSrc: 2, Indptr: []int32{0}},
		{NumDst: 1, NumSrc: 2, Indptr: []int32{1, 1}, Indices: []int32{0}},
		{NumDst: 2, NumSrc: 2, Indptr: []int32{0, 2, 1}, Indices: []int32{0, 1}},
		{NumDst: 1, NumSrc: 2, Indptr: []int32{0, 2}, Indices: []int32{0, 2}},
		{NumDst: 1, NumSrc: 2, Indptr: []int32{0, 1}, Indices: []int32{-1}},
		{NumDst: 1, NumSrc: 2, Indptr: []int32{0, 2}, Indices: []int32{0}},
	}
	for i, blk := range bad {
		d, err := e.b.UploadBlock(blk)
		var be *kernels.BlockError
		if !errors.As(err, &be) || !errors.Is(err, kernels.ErrBadBlock) {
			e.Errorf("bad block %d: err = %v, want *BlockError", i, err)
		}
		if d != nil {
			e.blocks = append(e.blocks, d)
		}
	}
	e.noErr("UploadBlock errors must not be sticky")

	// Shape mismatch is sticky and later ops do nothing.
	b0 := e.peer()
	defer b0.Close()
	a, _ := b0.Alloc(2, 3)
	c, _ := b0.Alloc(2, 2)
	b0.Upload(c, []float32{7, 7, 7, 7})
	b0.GEMM(false, false, 1, a, a, 0, c)
	if err := b0.Err(); !errors.Is(err, kernels.ErrShape) {
		e.Errorf("GEMM with mismatched shapes: Err() = %v, want ErrShape", err)
	}
	b0.Scale(c, 0)
	buf := make([]float32, 4)
	if err := b0.Download(buf, c); !errors.Is(err, kernels.ErrShape) {
		e.Errorf("Download after a sticky error: %v, want ErrShape", err)
	}

	// A handle from another backend and a freed handle.
	b1, b2 := e.peer(), e.peer()
	defer b1.Close()
	defer b2.Close()
	x1, _ := b1.Alloc(2, 2)
	x2, _ := b2.Alloc(2, 2)
	b1.Copy(x1, x2)
	if err := b1.Err(); !errors.Is(err, kernels.ErrForeignTensor) {
		e.Errorf("Copy of a foreign tensor: %v, want ErrForeignTensor", err)
	}
	b2.Free(x2)
	b2.Zero(x2)
	if err := b2.Err(); !errors.Is(err, kernels.ErrFreed) {
		e.Errorf("Zero of a freed tensor: %v, want ErrFreed", err)
	}
}

func testGEMM(e *env) {
	shapes := [][3]int{{1, 1, 1}, {1, 7, 1}, {7, 1, 9}, {3, 5, 2}, {0, 3, 4}, {4, 0, 3}}
	for range 6 {
		shapes = append(shapes, [3]int{e.dim(), e.dim(), e.dim()})
	}
	shapes = append(shapes, [3]int{65, 300, 33})
	for _, s := range shapes {
		m, k, n := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, ab := range [][2]float64{{1, 0}, {0.5, 1}, {-1.5, 0.25}, {0, 2}} {
				ar, ac := m, k
				if tr[0] {
					ar, ac = k, m
				}
				br, bc := k, n
				if tr[1] {
					br, bc = n, k
				}
				A, B := e.randn(ar*ac), e.randn(br*bc)
				C := e.randn(m * n)
				ct := e.up(m, n, C)
				if ab[1] == 0 {
					nan := make([]float32, m*n)
					for i := range nan {
						nan[i] = float32(math.NaN())
					}
					e.b.Upload(ct, nan) // beta == 0 must ignore C
				}
				e.b.GEMM(tr[0], tr[1], float32(ab[0]), e.up(ar, ac, A), e.up(br, bc, B), float32(ab[1]), ct)
				want := refGEMM(tr[0], tr[1], ab[0], A, ar, ac, B, br, bc, ab[1], C)
				e.near(fmt.Sprintf("GEMM m%d k%d n%d trans%v alpha,beta %v", m, k, n, tr, ab), e.down(ct), want, fwdAtol*math.Sqrt(float64(k+1)), fwdRtol)
			}
		}
	}
}

func testGather(e *env) {
	for range 6 {
		srcRows, f, n := e.dim(), e.dim(), e.dim()
		src := e.randn(srcRows * f)
		idx := make([]int32, n)
		for r := range idx {
			idx[r] = int32(e.rng.IntN(srcRows)) // repeats included
		}
		want := make([]float64, n*f)
		for r, j := range idx {
			copy(want[r*f:(r+1)*f], src[int(j)*f:(int(j)+1)*f])
		}
		it := e.upInts(idx)
		dst := e.alloc(n, f)
		e.b.GatherRows(dst, e.up(srcRows, f, src), it)
		e.near("GatherRows", e.down(dst), want, 0, 0)

		// ScatterAddRows accumulates into existing contents.
		w := e.randn(n * f)
		acc := e.randn(srcRows * f)
		at := e.up(srcRows, f, acc)
		e.b.ScatterAddRows(at, e.up(n, f, w), it)
		got := e.down(at)
		for i := range got {
			got[i] -= acc[i]
		}
		gather := func(x []float64) []float64 {
			out := make([]float64, n*f)
			for r, j := range idx {
				copy(out[r*f:(r+1)*f], x[int(j)*f:(int(j)+1)*f])
			}
			return out
		}
		e.gradCheck("ScatterAddRows", gather, src, w, got)
	}
	e.noErr("gather")
}

func testAggregate(e *env) {
	for _, blk := range e.testBlocks() {
		d := e.upBlock(blk)
		for _, op := range []kernels.AggOp{kernels.AggMean, kernels.AggSum, kernels.AggGCN} {
			f := e.dim()
			what := fmt.Sprintf("%v on %s, F=%d", op, blkName(blk), f)
			src := e.randn(blk.NumSrc * f)
			dst := e.alloc(blk.NumDst, f)
			e.b.Aggregate(d, op, dst, e.up(blk.NumSrc, f, src))
			e.near("Aggregate "+what, e.down(dst), refAggregate(blk, op, src, f), fwdAtol, fwdRtol)

			w := e.randn(blk.NumDst * f)
			dSrc := e.alloc(blk.NumSrc, f)
			e.b.AggregateBackward(d, op, dSrc, e.up(blk.NumDst, f, w))
			e.gradCheck("AggregateBackward "+what, func(x []float64) []float64 { return refAggregate(blk, op, x, f) }, src, w, e.down(dSrc))
			e.noErr(what)
		}
	}
}

// awayFromZero nudges values off 0 so finite differences stay on one side
// of a kink.
func awayFromZero(x []float64) {
	for i, v := range x {
		if math.Abs(v) < 0.01 {
			x[i] = f32(0.01 + v*v)
		}
	}
}

func testReLU(e *env) {
	for range 4 {
		rows, cols := e.dim(), e.dim()
		x := e.randn(rows * cols)
		awayFromZero(x)
		relu := func(x []float64) []float64 {
			out := make([]float64, len(x))
			for i, v := range x {
				out[i] = math.Max(v, 0)
			}
			return out
		}
		xt := e.up(rows, cols, x)
		y := e.alloc(rows, cols)
		e.b.ReLU(y, xt)
		e.near("ReLU", e.down(y), relu(x), 0, 0)
		w := e.randn(rows * cols)
		dx := e.up(rows, cols, w)
		e.b.ReLUBackward(dx, dx, y) // in place
		e.gradCheck("ReLUBackward", relu, x, w, e.down(dx))
		e.b.ReLU(xt, xt) // in place
		e.near("ReLU in place", e.down(xt), relu(x), 0, 0)
	}
}

// testFreeAfterUse frees an operation's inputs right after the call, with
// no sync point between, and allocates the same sizes again at once (so a
// backend whose pool reuses freed memory hands it out): the results must
// be those of the inputs as they were. The CUDA backend once zeroed a freed
// handle's pointer before its queued kernels had read it (the trainer's
// zero-copy input path frees its dropout mask and scatter sources so; an
// illegal address on the GPU).
func testFreeAfterUse(e *env) {
	must := func(x kernels.Tensor, err error) kernels.Tensor {
		e.Helper()
		if err != nil {
			e.Fatalf("Alloc: %v", err)
		}
		return x
	}
	for range 4 {
		rows, cols := e.dim(), e.dim()
		x := e.randn(rows * cols)
		// transient runs op on x (rows×cols) and idx, both uploaded
		// here, and frees them right after it.
		transient := func(rows, cols int, idx []int32, op func(kernels.Tensor, kernels.IntTensor)) {
			e.Helper()
			src := must(e.b.Alloc(rows, cols))
			e.b.Upload(src, to32(x))
			it, err := e.b.AllocInts(len(idx))
			if err != nil {
				e.Fatalf("AllocInts: %v", err)
			}
			e.b.UploadInts(it, idx)
			op(src, it)
			e.b.FreeInts(it)
			e.b.Free(src)
		}
		p, seed := float32(0.5), e.rng.Uint64()
		keep := float64(kernels.DropoutScale(p))

		// Dropout: source and mask freed at once.
		y := e.alloc(rows, cols)
		xt, mask := must(e.b.Alloc(rows, cols)), must(e.b.Alloc(rows, cols))
		e.b.Upload(xt, to32(x))
		e.b.Dropout(y, xt, mask, p, seed)
		e.b.Free(mask)
		e.b.Free(xt)
		e.up(rows, cols, e.randn(rows*cols)) // may take the freed memory
		want := make([]float64, len(x))
		for i := range x {
			if kernels.DropoutUniform(seed, uint64(i)) >= p {
				want[i] = x[i] * keep
			}
		}

		// GatherRows with its indices and source freed at once.
		n := e.dim()
		idx := make([]int32, n)
		for r := range idx {
			idx[r] = int32(e.rng.IntN(rows))
		}
		g := e.alloc(n, cols)
		transient(rows, cols, idx, func(src kernels.Tensor, it kernels.IntTensor) { e.b.GatherRows(g, src, it) })
		e.upInts(make([]int32, n))
		wantG := make([]float64, 0, n*cols)
		for _, r := range idx {
			wantG = append(wantG, x[int(r)*cols:(int(r)+1)*cols]...)
		}

		// ScatterAddRows of distinct rows, source and indices freed at once.
		perm := e.rng.Perm(rows)
		sIdx := make([]int32, rows)
		for i, r := range perm {
			sIdx[i] = int32(r)
		}
		acc := e.alloc(rows, cols)
		e.b.Zero(acc)
		transient(rows, cols, sIdx, func(src kernels.Tensor, it kernels.IntTensor) { e.b.ScatterAddRows(acc, src, it) })
		e.b.Zero(e.alloc(rows, cols))
		wantS := make([]float64, len(x))
		for i, r := range perm {
			copy(wantS[r*cols:(r+1)*cols], x[i*cols:(i+1)*cols])
		}

		e.near("Dropout with its source and mask freed", e.down(y), want, 0, 1e-6)
		e.near("GatherRows with its source and indices freed", e.down(g), wantG, 0, 0)
		e.near("ScatterAddRows with its source and indices freed", e.down(acc), wantS, 0, 0)
	}
	e.noErr("FreeAfterUse")
}

func testDropout(e *env) {
	for _, p := range []float32{0, 0.1, 0.5, 0.9} {
		rows, cols := e.dim(), e.dim()
		seed := e.rng.Uint64()
		x := e.randn(rows * cols)
		xt := e.up(rows, cols, x)
		y, mask := e.alloc(rows, cols), e.alloc(rows, cols)
		e.b.Dropout(y, xt, mask, p, seed)
		keep := float64(kernels.DropoutScale(p))
		wantMask := make([]float64, len(x))
		for i := range wantMask {
			if kernels.DropoutUniform(seed, uint64(i)) >= p {
				wantMask[i] = keep
			}
		}
		m := e.down(mask)
		e.near(fmt.Sprintf("Dropout p=%v mask", p), m, wantMask, 0, 0)
		drop := func(x []float64) []float64 {
			out := make([]float64, len(x))
			for i := range x {
				out[i] = x[i] * m[i]
			}
			return out
		}
		e.near("Dropout output", e.down(y), drop(x), 0, 1e-6)
		w := e.randn(len(x))
		dx := e.up(rows, cols, w)
		e.b.DropoutBackward(dx, dx, mask)
		e.gradCheck("DropoutBackward", drop, x, w, e.down(dx))
		// Same seed, same mask (in place this time).
		mask2 := e.alloc(rows, cols)
		e.b.Dropout(xt, xt, mask2, p, seed)
		e.near("Dropout mask reproducible", e.down(mask2), m, 0, 0)
	}
	// The kept fraction of a large tensor is close to 1-p.
	mask := e.alloc(200, 100)
	x := e.alloc(200, 100)
	e.b.Zero(x)
	e.b.Dropout(x, x, mask, 0.3, 42)
	kept := 0
	for _, v := range e.down(mask) {
		if v != 0 {
			kept++
		}
	}
	if frac := float64(kept) / 20000; math.Abs(frac-0.7) > 0.02 {
		e.Errorf("Dropout p=0.3 kept %.3f of elements", frac)
	}
}

func testBias(e *env) {
	for range 5 {
		rows, cols := e.dim(), e.dim()
		x, bias := e.randn(rows*cols), e.randn(cols)
		xt := e.up(rows, cols, x)
		e.b.AddBias(xt, e.up(1, cols, bias))
		addBias := func(bias []float64) []float64 {
			out := append([]float64(nil), x...)
			for i := range out {
				out[i] += bias[i%cols]
			}
			return out
		}
		e.near("AddBias", e.down(xt), addBias(bias), fwdAtol, fwdRtol)
		w := e.randn(rows * cols)
		db := e.alloc(1, cols)
		e.b.BiasGrad(db, e.up(rows, cols, w))
		e.gradCheck("BiasGrad", addBias, bias, w, e.down(db))
	}
}

func testElementwise(e *env) {
	for range 4 {
		rows, cols := e.dim(), e.dim()
		n := rows * cols
		a, b := e.randn(n), e.randn(n)
		at, bt := e.up(rows, cols, a), e.up(rows, cols, b)
		d := e.alloc(rows, cols)
		e.b.Add(d, at, bt)
		want := make([]float64, n)
		for i := range want {
			want[i] = a[i] + b[i]
		}
		e.near("Add", e.down(d), want, fwdAtol, fwdRtol)
		e.b.Scale(d, -0.75)
		for i := range want {
			want[i] *= -0.75
		}
		e.near("Scale", e.down(d), want, fwdAtol, fwdRtol)
		e.b.AXPY(d, 1.5, at)
		for i := range want {
			want[i] += 1.5 * a[i]
		}
		e.near("AXPY", e.down(d), want, fwdAtol, fwdRtol)
		e.b.Add(at, at, bt) // aliasing
		for i := range a {
			a[i] += b[i]
		}
		e.near("Add in place", e.down(at), a, fwdAtol, fwdRtol)
	}
}

func testSoftmax(e *env) {
	for trial := range 8 {
		rows, cols := e.dim(), e.dim()
		x := e.randn(rows * cols)
		if trial%3 == 2 {
			for i := range x {
				x[i] = f32(x[i]*50 + 1000) // large logits: needs max subtraction
			}
		}
		labels := make([]int32, rows)
		for r := range labels {
			labels[r] = int32(e.rng.IntN(cols))
			if e.rng.IntN(4) == 0 || trial == 1 {
				labels[r] = -1
			}
		}
		xt := e.up(rows, cols, x)
		ls := e.alloc(rows, cols)
		e.b.LogSoftmax(ls, xt)
		e.near("LogSoftmax", e.down(ls), refLogSoftmax(x, rows, cols), fwdAtol, fwdRtol)

		lt := e.upInts(labels)
		dl := e.alloc(rows, cols)
		loss, n, err := e.b.CrossEntropy(dl, xt, lt)
		if err != nil {
			e.Fatalf("CrossEntropy: %v", err)
		}
		wantLoss, wantN := refCrossEntropy(x, rows, cols, labels)
		if n != wantN {
			e.Errorf("CrossEntropy n = %d, want %d", n, wantN)
		}
		e.near("CrossEntropy loss", []float64{float64(loss)}, []float64{wantLoss}, fwdAtol, fwdRtol)
		e.gradCheck("CrossEntropy dLogits", func(x []float64) []float64 {
			l, _ := refCrossEntropy(x, rows, cols, labels)
			return []float64{l}
		}, x, []float64{1}, e.down(dl))
		if l2, n2, err := e.b.CrossEntropy(nil, xt, lt); err != nil || l2 != loss || n2 != n {
			e.Errorf("CrossEntropy without gradient: %v %d %v, want %v %d", l2, n2, err, loss, n)
		}

		// Argmax and Accuracy; ties go to the lowest column.
		if cols > 1 {
			x[0] = f32(x[1]) // possible tie in row 0
			e.b.Upload(xt, to32(x))
		}
		am, _ := e.b.AllocInts(rows)
		e.ints = append(e.ints, am)
		e.b.Argmax(am, xt)
		got := make([]int32, rows)
		if err := e.b.DownloadInts(got, am); err != nil {
			e.Fatal(err)
		}
		correct, total := 0, 0
		for r := 0; r < rows; r++ {
			best := 0
			for c := 1; c < cols; c++ {
				if x[r*cols+c] > x[r*cols+best] {
					best = c
				}
			}
			if int(got[r]) != best {
				e.Errorf("Argmax row %d = %d, want %d", r, got[r], best)
			}
			if labels[r] >= 0 {
				total++
				if int(labels[r]) == best {
					correct++
				}
			}
		}
		c, tot, err := e.b.Accuracy(xt, lt)
		if err != nil || c != correct || tot != total {
			e.Errorf("Accuracy = %d/%d (%v), want %d/%d", c, tot, err, correct, total)
		}
	}
}

// gatShape picks heads and per-head features.
func (e *env) gatShape() (H, F int) {
	hs := []int{1, 2, 3, 4}
	fs := []int{1, 3, 8, 5}
	return hs[e.rng.IntN(len(hs))], fs[e.rng.IntN(len(fs))]
}

const slope = 0.2

func testGATScores(e *env) {
	for _, blk := range e.testBlocks() {
		d := e.upBlock(blk)
		H, F := e.gatShape()
		hf := H * F
		E := blk.NumEdges()
		what := fmt.Sprintf("%s H=%d F=%d", blkName(blk), H, F)
		// Off the LeakyReLU's kink: a pre-activation within float32
		// rounding of 0 (5.5e-8 in one seeded run) can take the other
		// branch on the backend than in the float64 reference, and the
		// backward then differs by design, not by a bug.
		wh, aL, aR := e.randn(blk.NumSrc*hf), e.randn(hf), e.randn(hf)
		for range 100 {
			if minAbs(refGATScores(blk, wh, aL, aR, H, F, 1)) > 1e-3 {
				break
			}
			wh, aL, aR = e.randn(blk.NumSrc*hf), e.randn(hf), e.randn(hf)
		}
		wt, alt, art := e.up(blk.NumSrc, hf, wh), e.up(1, hf, aL), e.up(1, hf, aR)
		s := e.alloc(E, H)
		e.b.GATScores(d, s, wt, alt, art, slope)
		e.near("GATScores "+what, e.down(s), refGATScores(blk, wh, aL, aR, H, F, slope), fwdAtol, fwdRtol)

		w := e.randn(E * H)
		dW, dL, dR := e.alloc(blk.NumSrc, hf), e.alloc(1, hf), e.alloc(1, hf)
		e.b.GATScoresBackward(d, dW, dL, dR, e.up(E, H, w), s, wt, alt, art, slope)
		e.gradCheck("GATScoresBackward dWh "+what, func(x []float64) []float64 { return refGATScores(blk, x, aL, aR, H, F, slope) }, wh, w, e.down(dW))
		e.gradCheck("GATScoresBackward dAttnL "+what, func(x []float64) []float64 { return refGATScores(blk, wh, x, aR, H, F, slope) }, aL, w, e.down(dL))
		e.gradCheck("GATScoresBackward dAttnR "+what, func(x []float64) []float64 { return refGATScores(blk, wh, aL, x, H, F, slope) }, aR, w, e.down(dR))
		e.noErr(what)
	}
}

// minAbs is the least |x| of xs (+Inf when empty).
func minAbs(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = min(m, math.Abs(x))
	}
	return m
}

func testEdgeSoftmax(e *env) {
	for _, blk := range e.testBlocks() {
		d := e.upBlock(blk)
		H, _ := e.gatShape()
		E := blk.NumEdges()
		what := fmt.Sprintf("%s H=%d", blkName(blk), H)
		s := e.uniform(E*H, -3, 3)
		if E > 0 {
			s[0] = 80 // exp overflows float32 without max subtraction
		}
		st := e.up(E, H, s)
		a := e.alloc(E, H)
		e.b.EdgeSoftmax(d, a, st)
		e.near("EdgeSoftmax "+what, e.down(a), refEdgeSoftmax(blk, s, H), fwdAtol, fwdRtol)
		w := e.randn(E * H)
		ds := e.alloc(E, H)
		e.b.EdgeSoftmaxBackward(d, ds, e.up(E, H, w), a)
		e.gradCheck("EdgeSoftmaxBackward "+what, func(x []float64) []float64 { return refEdgeSoftmax(blk, x, H) }, s, w, e.down(ds))
		e.noErr(what)
	}
}

func testEdgeWeightedSum(e *env) {
	for _, blk := range e.testBlocks() {
		d := e.upBlock(blk)
		H, F := e.gatShape()
		hf, E := H*F, blk.NumEdges()
		what := fmt.Sprintf("%s H=%d F=%d", blkName(blk), H, F)
		alpha, wh := e.uniform(E*H, 0, 1), e.randn(blk.NumSrc*hf)
		at, wt := e.up(E, H, alpha), e.up(blk.NumSrc, hf, wh)
		out := e.alloc(blk.NumDst, hf)
		e.b.EdgeWeightedSum(d, out, at, wt)
		e.near("EdgeWeightedSum "+what, e.down(out), refEdgeWeightedSum(blk, alpha, wh, H, F), fwdAtol, fwdRtol)
		w := e.randn(blk.NumDst * hf)
		dA, dW := e.alloc(E, H), e.alloc(blk.NumSrc, hf)
		e.b.EdgeWeightedSumBackward(d, dA, dW, e.up(blk.NumDst, hf, w), at, wt)
		e.gradCheck("EdgeWeightedSumBackward dAlpha "+what, func(x []float64) []float64 { return refEdgeWeightedSum(blk, x, wh, H, F) }, alpha, w, e.down(dA))
		e.gradCheck("EdgeWeightedSumBackward dWh "+what, func(x []float64) []float64 { return refEdgeWeightedSum(blk, alpha, x, H, F) }, wh, w, e.down(dW))
		e.noErr(what)
	}
}

// testGATLayer chains the GAT ops the way a trainer does and checks the
// summed dWh (scores path + weighted-sum path) against finite differences of
// the whole layer.
func testGATLayer(e *env) {
	blk := e.randBlock(12, 30, 6)
	d := e.upBlock(blk)
	H, F := 2, 3
	hf, E := H*F, blk.NumEdges()
	wh, aL, aR := e.randn(blk.NumSrc*hf), e.randn(hf), e.randn(hf)
	layer := func(wh, aL, aR []float64) []float64 {
		return refEdgeWeightedSum(blk, refEdgeSoftmax(blk, refGATScores(blk, wh, aL, aR, H, F, slope), H), wh, H, F)
	}
	wt, alt, art := e.up(blk.NumSrc, hf, wh), e.up(1, hf, aL), e.up(1, hf, aR)
	s, a, out := e.alloc(E, H), e.alloc(E, H), e.alloc(blk.NumDst, hf)
	e.b.GATScores(d, s, wt, alt, art, slope)
	e.b.EdgeSoftmax(d, a, s)
	e.b.EdgeWeightedSum(d, out, a, wt)
	e.near("GAT layer forward", e.down(out), layer(wh, aL, aR), fwdAtol, fwdRtol)

	w := e.randn(blk.NumDst * hf)
	dA, dW1, dS := e.alloc(E, H), e.alloc(blk.NumSrc, hf), e.alloc(E, H)
	dW2, dL, dR := e.alloc(blk.NumSrc, hf), e.alloc(1, hf), e.alloc(1, hf)
	e.b.EdgeWeightedSumBackward(d, dA, dW1, e.up(blk.NumDst, hf, w), a, wt)
	e.b.EdgeSoftmaxBackward(d, dS, dA, a)
	e.b.GATScoresBackward(d, dW2, dL, dR, dS, s, wt, alt, art, slope)
	e.b.Add(dW1, dW1, dW2)
	e.gradCheck("GAT layer dWh", func(x []float64) []float64 { return layer(x, aL, aR) }, wh, w, e.down(dW1))
	e.gradCheck("GAT layer dAttnL", func(x []float64) []float64 { return layer(wh, x, aR) }, aL, w, e.down(dL))
	e.gradCheck("GAT layer dAttnR", func(x []float64) []float64 { return layer(wh, aL, x) }, aR, w, e.down(dR))
}

func testAdam(e *env) {
	for _, cfg := range []kernels.AdamConfig{
		kernels.DefaultAdam(),
		{LR: 0.01, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 5e-4},
	} {
		rows, cols := e.dim(), e.dim()
		n := rows * cols
		p := e.randn(n)
		m, v := make([]float64, n), make([]float64, n)
		pt, mt, vt := e.up(rows, cols, p), e.up(rows, cols, m), e.up(rows, cols, v)
		for step := 1; step <= 5; step++ {
			g := e.randn(n)
			e.b.Adam(pt, e.up(rows, cols, g), mt, vt, step, cfg)
			refAdam(p, g, m, v, step, cfg)
			// Rebase the reference on the backend's float32 state so
			// errors do not compound.
			e.near(fmt.Sprintf("Adam step %d param", step), e.down(pt), p, fwdAtol, 1e-4)
			e.near(fmt.Sprintf("Adam step %d m", step), e.down(mt), m, fwdAtol, fwdRtol)
			e.near(fmt.Sprintf("Adam step %d v", step), e.down(vt), v, fwdAtol, fwdRtol)
			p, m, v = e.down(pt), e.down(mt), e.down(vt)
		}
	}
}

// testDeterminism repeats ops on larger inputs and requires bit-identical
// results.
func testDeterminism(e *env) {
	blk := e.randBlock(300, 900, 12)
	d := e.upBlock(blk)
	f := 37
	src := e.up(blk.NumSrc, f, e.randn(blk.NumSrc*f))
	dd := e.up(blk.NumDst, f, e.randn(blk.NumDst*f))
	a := e.up(130, 70, e.randn(130*70))
	bb := e.up(70, 90, e.randn(70*90))
	run := func() [][]float64 {
		var res [][]float64
		for _, op := range []kernels.AggOp{kernels.AggMean, kernels.AggSum, kernels.AggGCN} {
			out := e.alloc(blk.NumDst, f)
			e.b.Aggregate(d, op, out, src)
			back := e.alloc(blk.NumSrc, f)
			e.b.AggregateBackward(d, op, back, dd)
			res = append(res, e.down(out), e.down(back))
		}
		c := e.alloc(130, 90)
		e.b.GEMM(false, false, 1, a, bb, 0, c)
		db := e.alloc(1, f)
		e.b.BiasGrad(db, src)
		return append(res, e.down(c), e.down(db))
	}
	first := run()
	for range 3 {
		for i, r := range run() {
			for k := range r {
				if math.Float64bits(r[k]) != math.Float64bits(first[i][k]) {
					e.Fatalf("result %d differs between runs at %d: %v vs %v", i, k, r[k], first[i][k])
				}
			}
		}
	}
}

func testHostGather(e *env) {
	hg, ok := e.b.(kernels.HostGatherer)
	if !ok {
		e.Skipf("%s does not implement kernels.HostGatherer", e.b.Name())
	}
	for range 6 {
		srcRows, f, n := e.dim(), e.dim(), e.dim()
		src := hostFloats(srcRows * f)
		copy(src, to32(e.randn(srcRows*f)))
		src[0] = float32(math.Copysign(0, -1)) // signed zero must survive
		idx := make([]int32, n)
		for r := range idx {
			idx[r] = int32(e.rng.IntN(srcRows)) // repeats included
		}
		h, err := hg.RegisterHostRows(src, f)
		if err != nil {
			e.Fatalf("RegisterHostRows(%d values, %d): %v", len(src), f, err)
		}
		if h.Rows() != srcRows || h.Cols() != f {
			e.Errorf("registered %d×%d, want %d×%d", h.Rows(), h.Cols(), srcRows, f)
		}
		got, want := e.alloc(n, f), e.alloc(n, f)
		hg.GatherHostRows(got, h, idx)
		st := e.alloc(srcRows, f)
		e.b.Upload(st, src)
		e.b.GatherRows(want, st, e.upInts(idx))
		g32, w32 := make([]float32, n*f), make([]float32, n*f)
		if err := e.b.Download(g32, got); err != nil {
			e.Fatalf("Download: %v", err)
		}
		if err := e.b.Download(w32, want); err != nil {
			e.Fatalf("Download: %v", err)
		}
		for i := range g32 {
			if math.Float32bits(g32[i]) != math.Float32bits(w32[i]) {
				e.Fatalf("GatherHostRows %d×%d from %d rows: element %d = %v, Upload+GatherRows gives %v", n, f, srcRows, i, g32[i], w32[i])
			}
		}
		if err := hg.UnregisterHostRows(h); err != nil {
			e.Errorf("UnregisterHostRows: %v", err)
		}
	}
	e.noErr("GatherHostRows")
	if _, err := hg.RegisterHostRows(make([]float32, 5), 2); !errors.Is(err, kernels.ErrInvalidArg) {
		e.Errorf("RegisterHostRows(5 values, 2 cols): %v, want ErrInvalidArg", err)
	}
	if _, err := hg.RegisterHostRows(nil, 0); !errors.Is(err, kernels.ErrInvalidArg) {
		e.Errorf("RegisterHostRows(nil, 0): %v, want ErrInvalidArg", err)
	}
	e.noErr("RegisterHostRows errors must not be sticky")

	// Sticky errors, each on a fresh backend of the same kind.
	host := hostFloats(6)
	copy(host, []float32{1, 2, 3, 4, 5, 6})
	for _, c := range []struct {
		name string
		want error
		run  func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error
	}{
		{"index out of range", kernels.ErrInvalidArg, func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error {
			dst, _ := b.Alloc(1, 2)
			hg.GatherHostRows(dst, h, []int32{3})
			return b.Err()
		}},
		{"negative index", kernels.ErrInvalidArg, func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error {
			dst, _ := b.Alloc(1, 2)
			hg.GatherHostRows(dst, h, []int32{-1})
			return b.Err()
		}},
		{"dst shape", kernels.ErrShape, func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error {
			dst, _ := b.Alloc(2, 3)
			hg.GatherHostRows(dst, h, []int32{0, 1})
			return b.Err()
		}},
		{"freed handle", kernels.ErrFreed, func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error {
			if err := hg.UnregisterHostRows(h); err != nil {
				return err
			}
			if err := hg.UnregisterHostRows(h); !errors.Is(err, kernels.ErrFreed) {
				return fmt.Errorf("second UnregisterHostRows: %v, want ErrFreed", err)
			}
			dst, _ := b.Alloc(1, 2)
			hg.GatherHostRows(dst, h, []int32{0})
			return b.Err()
		}},
		{"foreign handle", kernels.ErrForeignTensor, func(b kernels.Backend, hg kernels.HostGatherer, h kernels.HostRows) error {
			other := e.peer()
			defer other.Close()
			oh, err := other.(kernels.HostGatherer).RegisterHostRows(ownPages(host), 2)
			if err != nil {
				return err
			}
			defer other.(kernels.HostGatherer).UnregisterHostRows(oh)
			if err := hg.UnregisterHostRows(oh); !errors.Is(err, kernels.ErrForeignTensor) {
				return fmt.Errorf("UnregisterHostRows of a foreign handle: %v, want ErrForeignTensor", err)
			}
			dst, _ := b.Alloc(1, 2)
			hg.GatherHostRows(dst, oh, []int32{0})
			return b.Err()
		}},
	} {
		b := e.peer()
		hg := b.(kernels.HostGatherer)
		h, err := hg.RegisterHostRows(host, 2)
		if err != nil {
			e.Fatalf("%s: RegisterHostRows: %v", c.name, err)
		}
		if err := c.run(b, hg, h); !errors.Is(err, c.want) {
			e.Errorf("GatherHostRows, %s: Err() = %v, want %v", c.name, err, c.want)
		}
		hg.UnregisterHostRows(h)
		b.Close()
	}
}

// hostFloats returns n float32 in a buffer of its own pages: Go gives an
// allocation above 32 KiB a span of its own, page-aligned, so registering
// it with a backend that page-locks host memory (CUDA) never overlaps
// another live registration.
func hostFloats(n int) []float32 { return make([]float32, max(n, 16<<10))[:n] }

// ownPages copies x into a hostFloats buffer.
func ownPages(x []float32) []float32 {
	y := hostFloats(len(x))
	copy(y, x)
	return y
}
