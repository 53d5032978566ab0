package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Model kinds.
const (
	ModelSAGE = "sage"
	ModelGCN  = "gcn"
	ModelGAT  = "gat"
)

// gatSlope is the LeakyReLU slope of GAT's attention scores.
const gatSlope = 0.2

// ModelConfig describes a model's architecture.
type ModelConfig struct {
	Kind    string  `json:"kind"`    // ModelSAGE, ModelGCN or ModelGAT
	InDim   int     `json:"in_dim"`  // input feature width
	Hidden  int     `json:"hidden"`  // hidden width (per head for GAT)
	Classes int     `json:"classes"` // output width
	Layers  int     `json:"layers"`
	Heads   int     `json:"heads"` // GAT attention heads (hidden layers concatenate, the output layer averages)
	Dropout float32 `json:"dropout"`
}

func (c ModelConfig) validate() error {
	switch c.Kind {
	case ModelSAGE, ModelGCN, ModelGAT:
	default:
		return fmt.Errorf("%w: model %q (want sage, gcn or gat)", ErrInvalidOptions, c.Kind)
	}
	if c.InDim < 1 || c.Hidden < 1 || c.Classes < 1 || c.Layers < 1 {
		return fmt.Errorf("%w: model dims in=%d hidden=%d classes=%d layers=%d must be >= 1", ErrInvalidOptions, c.InDim, c.Hidden, c.Classes, c.Layers)
	}
	if c.Kind == ModelGAT && c.Heads < 1 {
		return fmt.Errorf("%w: GAT heads %d < 1", ErrInvalidOptions, c.Heads)
	}
	if c.Dropout < 0 || c.Dropout >= 1 || c.Dropout != c.Dropout {
		return fmt.Errorf("%w: dropout %v not in [0,1)", ErrInvalidOptions, c.Dropout)
	}
	return nil
}

// HistWidth is the width of the layer-(L−1) embeddings (the input of the
// last layer) that the historical cache stores.
func (c ModelConfig) HistWidth() int {
	if c.Kind == ModelGAT {
		return c.Hidden * c.Heads
	}
	return c.Hidden
}

// Param is one trainable tensor with its gradient and Adam moments.
type Param struct {
	Name       string
	Rows, Cols int
	W, G, M, V kernels.Tensor
}

// layer is one message-passing layer. forward keeps what backward needs;
// both allocate their outputs on the tape.
type layer interface {
	forward(t *tape, blk *devBlock, x kernels.Tensor) kernels.Tensor
	// backward sets the parameter gradients and returns dX (nil when
	// needDX is false).
	backward(t *tape, blk *devBlock, dy kernels.Tensor, needDX bool) kernels.Tensor
	params() []*Param
	// transform and aggregate are the layer in evaluation mode (no
	// dropout) split at its linear map, so that exact layer-wise
	// inference applies the weights once per node before aggregating:
	// aggregate(blk, transform(x)) equals forward(blk, x) up to float
	// summation order, because aggregation is linear. transform returns,
	// for every row of x, z (the rows aggregation combines), and self (the
	// destination's own term; nil when the layer has none) for the rows
	// of x that selfRows lists, in its order (nil: every row).
	transform(t *tape, x kernels.Tensor, selfRows kernels.IntTensor) (z, self kernels.Tensor)
	// aggregate computes the block's destinations' outputs (before ReLU)
	// from z of its sources and self of its destinations.
	aggregate(t *tape, blk *devBlock, z, self kernels.Tensor) kernels.Tensor
}

// aggregateFirst is a layer whose aggregation is a scaled sum (SAGE's
// mean, GCN's normalised sum), so that it may aggregate its input before
// transforming it: aggregate(blk, zOnly(x̄)) with x̄ the aggregated input
// equals forward(blk, x) up to float summation order. Layer-wise
// inference uses it where a layer's input is no wider than its
// transformed rows (lwStage.raw): the weights are then applied to the
// destinations' sums only, not to every source.
type aggregateFirst interface {
	// zOnly is transform's z; selfTerm its self (nil without one).
	zOnly(t *tape, x kernels.Tensor) kernels.Tensor
	selfTerm(t *tape, x kernels.Tensor, selfRows kernels.IntTensor) kernels.Tensor
}

// preAggregated is an input layer whose forward needs only its
// destinations' aggregated sources and their own rows, not every source
// row: SAGE (mean) and GCN (normalised sum). The streamed input layer
// (stream.go) aggregates on the host as the rows are read and uploads
// those two; the layer's backward needs nothing else (the input layer
// computes no dX).
type preAggregated interface {
	// forwardPre is forward(blk, x) given agg = Aggregate(blk, aggOp(), x)
	// and hd = x's first NumDst rows (nil when ownRows is false).
	forwardPre(t *tape, blk *devBlock, hd, agg kernels.Tensor) kernels.Tensor
	aggOp() kernels.AggOp
	ownRows() bool
}

// devBlock is a block on the backend plus the identity index of its
// destinations (rows 0..NumDst-1 of its sources), created lazily.
type devBlock struct {
	blk  kernels.DeviceBlock
	iota kernels.IntTensor
}

func (d *devBlock) dstIdx(t *tape) kernels.IntTensor {
	if d.iota == nil {
		n := d.blk.NumDst()
		d.iota = t.allocInts(n)
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		t.be.UploadInts(d.iota, idx)
	}
	return d.iota
}

// tapeError carries an allocation failure out of forward/backward; it is
// recovered at the batch boundary and never escapes the package.
type tapeError struct{ err error }

// tape allocates the temporaries of one batch and frees them together.
type tape struct {
	be kernels.Backend
	ts []kernels.Tensor
	is []kernels.IntTensor
}

func (t *tape) alloc(r, c int) kernels.Tensor {
	x, err := t.be.Alloc(r, c)
	if err != nil {
		panic(tapeError{err})
	}
	t.ts = append(t.ts, x)
	return x
}

func (t *tape) zeros(r, c int) kernels.Tensor {
	x := t.alloc(r, c)
	t.be.Zero(x)
	return x
}

func (t *tape) allocInts(n int) kernels.IntTensor {
	x, err := t.be.AllocInts(n)
	if err != nil {
		panic(tapeError{err})
	}
	t.is = append(t.is, x)
	return x
}

func (t *tape) ints(v []int32) kernels.IntTensor {
	x := t.allocInts(len(v))
	t.be.UploadInts(x, v)
	return x
}

func (t *tape) upload(r, c int, v []float32) kernels.Tensor {
	x := t.alloc(r, c)
	t.be.Upload(x, v)
	return x
}

// uploadHost is upload for a host slice v that nobody reads or writes
// until the tape is freed: a backend that adopts host memory (kernels/cpu)
// takes v itself, with no copy; others copy it.
func (t *tape) uploadHost(r, c int, v []float32) kernels.Tensor {
	x, err := hostTensor(t.be, true, r, c, v)
	if err != nil {
		panic(tapeError{err})
	}
	t.ts = append(t.ts, x)
	return x
}

func (t *tape) free() {
	for _, x := range t.ts {
		t.be.Free(x)
	}
	for _, x := range t.is {
		t.be.FreeInts(x)
	}
	t.ts, t.is = t.ts[:0], t.is[:0]
}

// run calls fn, turning a tape allocation failure into an error.
func (t *tape) run(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			te, ok := r.(tapeError)
			if !ok {
				panic(r)
			}
			err = te.err
		}
	}()
	fn()
	return t.be.Err()
}

// sageLayer: h' = W_self·h_dst + W_neigh·mean(h_src) + b.
type sageLayer struct {
	ws, wn, b *Param
	hd, agg   kernels.Tensor
	in        int
}

func (l *sageLayer) params() []*Param { return []*Param{l.ws, l.wn, l.b} }

func (l *sageLayer) forward(t *tape, blk *devBlock, x kernels.Tensor) kernels.Tensor {
	be, n := t.be, blk.blk.NumDst()
	agg := t.alloc(n, l.in)
	be.Aggregate(blk.blk, kernels.AggMean, agg, x)
	hd := t.alloc(n, l.in)
	be.GatherRows(hd, x, blk.dstIdx(t))
	return l.forwardPre(t, blk, hd, agg)
}

func (l *sageLayer) forwardPre(t *tape, blk *devBlock, hd, agg kernels.Tensor) kernels.Tensor {
	be, n := t.be, blk.blk.NumDst()
	l.hd, l.agg = hd, agg
	out := t.alloc(n, l.ws.Cols)
	be.GEMM(false, false, 1, l.hd, l.ws.W, 0, out)
	be.GEMM(false, false, 1, l.agg, l.wn.W, 1, out)
	be.AddBias(out, l.b.W)
	return out
}

func (l *sageLayer) aggOp() kernels.AggOp { return kernels.AggMean }
func (l *sageLayer) ownRows() bool        { return true }

// transform: mean_u(x_u)·W_neigh = mean_u(x_u·W_neigh), so z = x·W_neigh
// and self = x·W_self.
func (l *sageLayer) transform(t *tape, x kernels.Tensor, selfRows kernels.IntTensor) (z, self kernels.Tensor) {
	return l.zOnly(t, x), l.selfTerm(t, x, selfRows)
}

// zOnly is transform's z alone (aggregateFirst).
func (l *sageLayer) zOnly(t *tape, x kernels.Tensor) kernels.Tensor {
	z := t.alloc(x.Rows(), l.wn.Cols)
	t.be.GEMM(false, false, 1, x, l.wn.W, 0, z)
	return z
}

// selfTerm is transform's self alone (aggregateFirst).
func (l *sageLayer) selfTerm(t *tape, x kernels.Tensor, selfRows kernels.IntTensor) kernels.Tensor {
	xs := x
	if selfRows != nil {
		if selfRows.Len() == 0 {
			return nil
		}
		xs = t.alloc(selfRows.Len(), x.Cols())
		t.be.GatherRows(xs, x, selfRows)
	}
	self := t.alloc(xs.Rows(), l.ws.Cols)
	t.be.GEMM(false, false, 1, xs, l.ws.W, 0, self)
	return self
}

func (l *sageLayer) aggregate(t *tape, blk *devBlock, z, self kernels.Tensor) kernels.Tensor {
	out := t.alloc(blk.blk.NumDst(), z.Cols())
	t.be.Aggregate(blk.blk, kernels.AggMean, out, z)
	t.be.Add(out, out, self)
	t.be.AddBias(out, l.b.W)
	return out
}

func (l *sageLayer) backward(t *tape, blk *devBlock, dy kernels.Tensor, needDX bool) kernels.Tensor {
	be, n := t.be, blk.blk.NumDst()
	be.GEMM(true, false, 1, l.hd, dy, 0, l.ws.G)
	be.GEMM(true, false, 1, l.agg, dy, 0, l.wn.G)
	be.BiasGrad(l.b.G, dy)
	if !needDX {
		return nil
	}
	dhd := t.alloc(n, l.in)
	be.GEMM(false, true, 1, dy, l.ws.W, 0, dhd)
	dagg := t.alloc(n, l.in)
	be.GEMM(false, true, 1, dy, l.wn.W, 0, dagg)
	dx := t.alloc(blk.blk.NumSrc(), l.in)
	be.AggregateBackward(blk.blk, kernels.AggMean, dx, dagg)
	be.ScatterAddRows(dx, dhd, blk.dstIdx(t))
	return dx
}

// gcnLayer: h' = Â·h·W + b with Â the GCN normalisation (implicit self loop).
type gcnLayer struct {
	w, b *Param
	agg  kernels.Tensor
	in   int
}

func (l *gcnLayer) params() []*Param { return []*Param{l.w, l.b} }

func (l *gcnLayer) forward(t *tape, blk *devBlock, x kernels.Tensor) kernels.Tensor {
	agg := t.alloc(blk.blk.NumDst(), l.in)
	t.be.Aggregate(blk.blk, kernels.AggGCN, agg, x)
	return l.forwardPre(t, blk, nil, agg)
}

func (l *gcnLayer) aggOp() kernels.AggOp { return kernels.AggGCN }
func (l *gcnLayer) ownRows() bool        { return false }

func (l *gcnLayer) forwardPre(t *tape, blk *devBlock, _, agg kernels.Tensor) kernels.Tensor {
	be, n := t.be, blk.blk.NumDst()
	l.agg = agg
	out := t.alloc(n, l.w.Cols)
	be.GEMM(false, false, 1, l.agg, l.w.W, 0, out)
	be.AddBias(out, l.b.W)
	return out
}

// transform: Â·(x·W) = (Â·x)·W, so z = x·W.
func (l *gcnLayer) transform(t *tape, x kernels.Tensor, _ kernels.IntTensor) (z, self kernels.Tensor) {
	return l.zOnly(t, x), nil
}

// zOnly is transform's z (aggregateFirst).
func (l *gcnLayer) zOnly(t *tape, x kernels.Tensor) kernels.Tensor {
	z := t.alloc(x.Rows(), l.w.Cols)
	t.be.GEMM(false, false, 1, x, l.w.W, 0, z)
	return z
}

// selfTerm: GCN has no own term.
func (l *gcnLayer) selfTerm(*tape, kernels.Tensor, kernels.IntTensor) kernels.Tensor { return nil }

func (l *gcnLayer) aggregate(t *tape, blk *devBlock, z, _ kernels.Tensor) kernels.Tensor {
	out := t.alloc(blk.blk.NumDst(), z.Cols())
	t.be.Aggregate(blk.blk, kernels.AggGCN, out, z)
	t.be.AddBias(out, l.b.W)
	return out
}

func (l *gcnLayer) backward(t *tape, blk *devBlock, dy kernels.Tensor, needDX bool) kernels.Tensor {
	be, n := t.be, blk.blk.NumDst()
	be.GEMM(true, false, 1, l.agg, dy, 0, l.w.G)
	be.BiasGrad(l.b.G, dy)
	if !needDX {
		return nil
	}
	dagg := t.alloc(n, l.in)
	be.GEMM(false, true, 1, dy, l.w.W, 0, dagg)
	dx := t.alloc(blk.blk.NumSrc(), l.in)
	be.AggregateBackward(blk.blk, kernels.AggGCN, dx, dagg)
	return dx
}

// gatLayer: multi-head graph attention. Hidden layers concatenate the heads,
// the output layer averages them (through a constant H·F×F matrix).
type gatLayer struct {
	w, al, ar, b         *Param
	mean                 kernels.Tensor // H·F×F averaging matrix, nil when concatenating
	in, heads, f         int
	x, wh, scores, alpha kernels.Tensor
}

func (l *gatLayer) params() []*Param { return []*Param{l.w, l.al, l.ar, l.b} }

func (l *gatLayer) forward(t *tape, blk *devBlock, x kernels.Tensor) kernels.Tensor {
	l.x = x
	l.wh, _ = l.transform(t, x, nil)
	return l.aggregate(t, blk, l.wh, nil)
}

// transform: the attention scores and the weighted sum need only
// Wh = x·W, so z = Wh.
func (l *gatLayer) transform(t *tape, x kernels.Tensor, _ kernels.IntTensor) (z, self kernels.Tensor) {
	z = t.alloc(x.Rows(), l.heads*l.f)
	t.be.GEMM(false, false, 1, x, l.w.W, 0, z)
	return z, nil
}

// aggregate keeps the scores and the attention weights for backward.
func (l *gatLayer) aggregate(t *tape, blk *devBlock, wh, _ kernels.Tensor) kernels.Tensor {
	be, n, e := t.be, blk.blk.NumDst(), blk.blk.NumEdges()
	hf := l.heads * l.f
	l.scores = t.alloc(e, l.heads)
	be.GATScores(blk.blk, l.scores, wh, l.al.W, l.ar.W, gatSlope)
	l.alpha = t.alloc(e, l.heads)
	be.EdgeSoftmax(blk.blk, l.alpha, l.scores)
	o := t.alloc(n, hf)
	be.EdgeWeightedSum(blk.blk, o, l.alpha, wh)
	out := o
	if l.mean != nil {
		out = t.alloc(n, l.f)
		be.GEMM(false, false, 1, o, l.mean, 0, out)
	}
	be.AddBias(out, l.b.W)
	return out
}

func (l *gatLayer) backward(t *tape, blk *devBlock, dy kernels.Tensor, needDX bool) kernels.Tensor {
	be, n, e := t.be, blk.blk.NumDst(), blk.blk.NumEdges()
	hf := l.heads * l.f
	ns := blk.blk.NumSrc()
	be.BiasGrad(l.b.G, dy)
	do := dy
	if l.mean != nil {
		do = t.alloc(n, hf)
		be.GEMM(false, true, 1, dy, l.mean, 0, do)
	}
	dAlpha := t.alloc(e, l.heads)
	dWh := t.alloc(ns, hf)
	be.EdgeWeightedSumBackward(blk.blk, dAlpha, dWh, do, l.alpha, l.wh)
	dScores := t.alloc(e, l.heads)
	be.EdgeSoftmaxBackward(blk.blk, dScores, dAlpha, l.alpha)
	dWh2 := t.alloc(ns, hf)
	be.GATScoresBackward(blk.blk, dWh2, l.al.G, l.ar.G, dScores, l.scores, l.wh, l.al.W, l.ar.W, gatSlope)
	be.Add(dWh, dWh, dWh2)
	be.GEMM(true, false, 1, l.x, dWh, 0, l.w.G)
	if !needDX {
		return nil
	}
	dx := t.alloc(ns, l.in)
	be.GEMM(false, true, 1, dWh, l.w.W, 0, dx)
	return dx
}

// Model is a stack of layers with its parameters on one backend. It is not
// safe for concurrent use.
type Model struct {
	be     kernels.Backend
	cfg    ModelConfig
	layers []layer
	params []*Param
	consts []kernels.Tensor
}

// paramSpec is one parameter's shape; glorot says it starts Glorot-uniform
// (else zero).
type paramSpec struct {
	name       string
	rows, cols int
	glorot     bool
}

// layerSpec is one layer's parameters, in the order its type takes them,
// and for GAT's output layer the H·F×F head-averaging constant (mean).
type layerSpec struct {
	in, out int
	params  []paramSpec
	mean    bool
}

// layerSpecs lists the model's layers as NewModel allocates them. It is
// the one description of the model's shapes: NewModel allocates from it
// and MemBytes counts from it.
func (c ModelConfig) layerSpecs() []layerSpec {
	var out []layerSpec
	in := c.InDim
	for l := 0; l < c.Layers; l++ {
		last := l == c.Layers-1
		w := c.Hidden
		if last {
			w = c.Classes
		}
		pre := fmt.Sprintf("layer%d.", l)
		ls := layerSpec{in: in, out: w}
		switch c.Kind {
		case ModelSAGE:
			ls.params = []paramSpec{{pre + "w_self", in, w, true}, {pre + "w_neigh", in, w, true}, {pre + "bias", 1, w, false}}
			in = w
		case ModelGCN:
			ls.params = []paramSpec{{pre + "w", in, w, true}, {pre + "bias", 1, w, false}}
			in = w
		case ModelGAT:
			h := c.Heads
			bw := h * w
			if last {
				bw, ls.mean = w, true
			}
			ls.params = []paramSpec{{pre + "w", in, h * w, true}, {pre + "attn_l", 1, h * w, true}, {pre + "attn_r", 1, h * w, true}, {pre + "bias", 1, bw, false}}
			in = bw
		}
		out = append(out, ls)
	}
	return out
}

// Tensors per parameter: the weights, their gradient and Adam's two
// moments (NewModel), plus the gradient sum of micro-batches
// (Trainer.accumulate).
const (
	tensorsPerParam = 4
	accumPerParam   = 1
)

// MemBytes is the memory the model takes on its backend: every parameter's
// weights, gradient and two Adam moments, GAT's averaging constant, and
// with micro the gradient sums of micro-batch accumulation. It counts the
// shapes NewModel allocates (layerSpecs), 4 bytes per float32.
func (c ModelConfig) MemBytes(micro bool) int64 {
	per := int64(tensorsPerParam)
	if micro {
		per += accumPerParam
	}
	var n int64
	for _, ls := range c.layerSpecs() {
		for _, p := range ls.params {
			n += per * int64(p.rows) * int64(p.cols)
		}
		if ls.mean {
			n += int64(c.Heads) * int64(ls.out) * int64(ls.out)
		}
	}
	return 4 * n
}

// CheckpointScratchBytes is the host memory a checkpoint write takes
// beside the model: one parameter's float32 copy, the largest
// (Trainer.writeParams streams the rest).
func (c ModelConfig) CheckpointScratchBytes() int64 {
	var n int64
	for _, ls := range c.layerSpecs() {
		for _, p := range ls.params {
			n = max(n, 4*int64(p.rows)*int64(p.cols))
		}
	}
	return n
}

// NewModel allocates a model on be with Glorot-uniform weights drawn from a
// generator seeded by seed, zero biases and zero Adam moments.
func NewModel(be kernels.Backend, cfg ModelConfig, seed uint64) (m *Model, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m = &Model{be: be, cfg: cfg}
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	newParam := func(name string, r, c int, glorot bool) (*Param, error) {
		p := &Param{Name: name, Rows: r, Cols: c}
		for _, dst := range []*kernels.Tensor{&p.W, &p.G, &p.M, &p.V} {
			x, err := be.Alloc(r, c)
			if err != nil {
				return nil, err
			}
			be.Zero(x)
			*dst = x
		}
		m.params = append(m.params, p)
		if glorot {
			lim := math.Sqrt(6 / float64(r+c))
			v := make([]float32, r*c)
			for i := range v {
				v[i] = float32((2*rng.Float64() - 1) * lim)
			}
			be.Upload(p.W, v)
		}
		return p, nil
	}
	for _, ls := range cfg.layerSpecs() {
		ps := make([]*Param, len(ls.params))
		for i, sp := range ls.params {
			if ps[i], err = newParam(sp.name, sp.rows, sp.cols, sp.glorot); err != nil {
				return nil, err
			}
		}
		switch cfg.Kind {
		case ModelSAGE:
			m.layers = append(m.layers, &sageLayer{in: ls.in, ws: ps[0], wn: ps[1], b: ps[2]})
		case ModelGCN:
			m.layers = append(m.layers, &gcnLayer{in: ls.in, w: ps[0], b: ps[1]})
		case ModelGAT:
			ly := &gatLayer{in: ls.in, heads: cfg.Heads, f: ls.out, w: ps[0], al: ps[1], ar: ps[2], b: ps[3]}
			if ls.mean {
				h, out := cfg.Heads, ls.out
				mean, err := be.Alloc(h*out, out)
				if err != nil {
					return nil, err
				}
				m.consts = append(m.consts, mean)
				v := make([]float32, h*out*out)
				for k := 0; k < h; k++ {
					for c := 0; c < out; c++ {
						v[(k*out+c)*out+c] = 1 / float32(h)
					}
				}
				be.Upload(mean, v)
				ly.mean = mean
			}
			m.layers = append(m.layers, ly)
		}
	}
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() ModelConfig { return m.cfg }

// Params returns the parameters in a fixed order (the checkpoint order).
func (m *Model) Params() []*Param { return m.params }

// NumParams is the number of trainable scalars.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range m.params {
		n += p.Rows * p.Cols
	}
	return n
}

// Close frees the model's tensors.
func (m *Model) Close() {
	for _, p := range m.params {
		for _, x := range []kernels.Tensor{p.W, p.G, p.M, p.V} {
			if x != nil {
				m.be.Free(x)
			}
		}
	}
	for _, x := range m.consts {
		m.be.Free(x)
	}
	m.params, m.consts = nil, nil
}

// hist is the historical-embedding substitution of one batch: rows reused
// of the layer-(L−1) output are replaced by pulled embeddings, and the
// gradient at that output is captured for the cache.
type hist struct {
	reused   []int32   // local ids, ascending
	computed []int32   // the other rows, ascending
	pulled   []float32 // len(reused)·width
	// filled by forward/backward
	emb               []float32 // computed layer-(L−1) output, all rows (reused rows hold the pulled values)
	grad              []float32 // gradient at that output, all rows
	wantEmb, wantGrad bool      // download emb and grad
}

// pass is one forward (and optionally backward) pass over a batch.
type pass struct {
	train bool
	// inputDropped says dropout of the input layer was already applied to
	// x on the host (hostDropout), with the mask the backend would draw.
	inputDropped bool
	seed         uint64 // dropout seed
	blocks       []*devBlock
	x            kernels.Tensor
	// xAgg, when set, is the streamed input layer's aggregate: x then
	// holds only the destinations' own rows (nil for GCN), the input
	// dropout is already applied, and layer 0 is a preAggregated.
	xAgg    kernels.Tensor
	hist    *hist
	masks   []kernels.Tensor
	relus   []kernels.Tensor
	compIdx kernels.IntTensor
}

// forward returns the logits of the last block's destinations.
func (m *Model) forward(t *tape, p *pass) kernels.Tensor {
	be := t.be
	L := len(m.layers)
	p.masks = make([]kernels.Tensor, L)
	p.relus = make([]kernels.Tensor, L)
	h := p.x
	for l, ly := range m.layers {
		if p.train && m.cfg.Dropout > 0 && !(l == 0 && (p.inputDropped || p.xAgg != nil)) {
			mask := t.alloc(h.Rows(), h.Cols())
			d := t.alloc(h.Rows(), h.Cols())
			be.Dropout(d, h, mask, m.cfg.Dropout, mixSeed(p.seed, uint64(l)))
			p.masks[l] = mask
			h = d
		}
		if l == 0 && p.xAgg != nil {
			h = ly.(preAggregated).forwardPre(t, p.blocks[0], h, p.xAgg)
		} else {
			h = ly.forward(t, p.blocks[l], h)
		}
		if l == L-1 {
			break
		}
		be.ReLU(h, h)
		p.relus[l] = h
		if l == L-2 && p.hist != nil {
			h = m.substitute(t, p, h)
		}
	}
	return h
}

// substitute replaces the reused rows of h by the pulled embeddings.
func (m *Model) substitute(t *tape, p *pass, h kernels.Tensor) kernels.Tensor {
	hs := p.hist
	be := t.be
	if len(hs.reused) > 0 {
		w := h.Cols()
		out := t.zeros(h.Rows(), w)
		p.compIdx = t.ints(hs.computed)
		if len(hs.computed) > 0 {
			hc := t.alloc(len(hs.computed), w)
			be.GatherRows(hc, h, p.compIdx)
			be.ScatterAddRows(out, hc, p.compIdx)
		}
		pt := t.upload(len(hs.reused), w, hs.pulled)
		be.ScatterAddRows(out, pt, t.ints(hs.reused))
		h = out
	}
	if hs.wantEmb {
		hs.emb = make([]float32, h.Rows()*h.Cols())
		if err := be.Download(hs.emb, h); err != nil {
			panic(tapeError{err})
		}
	}
	return h
}

// backward propagates dLogits and fills every parameter gradient.
func (m *Model) backward(t *tape, p *pass, dLogits kernels.Tensor) {
	be := t.be
	L := len(m.layers)
	dh := dLogits
	for l := L - 1; l >= 0; l-- {
		dx := m.layers[l].backward(t, p.blocks[l], dh, l > 0)
		if l == 0 {
			return
		}
		if p.masks[l] != nil {
			be.DropoutBackward(dx, dx, p.masks[l])
		}
		if l-1 == L-2 && p.hist != nil {
			hs := p.hist
			if hs.wantGrad {
				hs.grad = make([]float32, dx.Rows()*dx.Cols())
				if err := be.Download(hs.grad, dx); err != nil {
					panic(tapeError{err})
				}
			}
			if len(hs.reused) > 0 {
				nd := t.zeros(dx.Rows(), dx.Cols())
				if len(hs.computed) > 0 {
					g := t.alloc(len(hs.computed), dx.Cols())
					be.GatherRows(g, dx, p.compIdx)
					be.ScatterAddRows(nd, g, p.compIdx)
				}
				dx = nd
			}
		}
		be.ReLUBackward(dx, dx, p.relus[l-1])
		dh = dx
	}
}

// step applies one Adam step (t >= 1) to every parameter.
func (m *Model) step(t int, cfg kernels.AdamConfig) {
	for _, p := range m.params {
		m.be.Adam(p.W, p.G, p.M, p.V, t, cfg)
	}
}

// mixSeed derives a seed from a and b (SplitMix64 of a combination).
func mixSeed(a, b uint64) uint64 {
	z := a ^ (b+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// dropSpan applies hostDropout's mask to x, elements base, base+1, ... of
// the input (kernels.DropoutKeep: the mask Backend.Dropout draws).
func dropSpan(x []float32, keep *kernels.DropoutKeep, seed, base uint64) {
	for i := range x {
		x[i] *= keep.Factor(seed, base+uint64(i))
	}
}

// hostDropout applies the input layer's dropout to the gathered features
// on the host, element e kept (scaled by 1/(1−p)) iff
// kernels.DropoutUniform(seed, e) >= p: bit for bit what Backend.Dropout
// computes with the same seed. The input layer's mask is never needed by
// backward (no gradient flows to the input), so doing it here saves the
// backend two tensors of the batch's largest shape (mask and output).
// The work is split over GOMAXPROCS goroutines, joined before it returns.
func hostDropout(x []float32, p float32, seed uint64) {
	keep := kernels.NewDropoutKeep(p)
	part := func(lo, hi int) { dropSpan(x[lo:hi], &keep, seed, uint64(lo)) }
	const grain = 1 << 16
	w := min(runtime.GOMAXPROCS(0), len(x)/grain)
	if w <= 1 {
		part(0, len(x))
		return
	}
	var wg sync.WaitGroup
	chunk := (len(x) + w - 1) / w
	for lo := 0; lo < len(x); lo += chunk {
		wg.Go(func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true))
			part(lo, min(lo+chunk, len(x)))
		})
	}
	wg.Wait()
}
