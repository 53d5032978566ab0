package kernels

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors. Backends wrap them with %w and context.
var (
	ErrShape         = errors.New("kernels: shape mismatch")
	ErrForeignTensor = errors.New("kernels: handle belongs to another backend")
	ErrFreed         = errors.New("kernels: handle used after free")
	ErrClosed        = errors.New("kernels: backend closed")
	ErrOutOfMemory   = errors.New("kernels: out of memory")
	ErrInvalidArg    = errors.New("kernels: invalid argument")
	ErrBadBlock      = errors.New("kernels: malformed block")
)

// Tensor is an opaque rows×cols float32 matrix in backend memory, row-major.
type Tensor interface {
	Rows() int
	Cols() int
}

// IntTensor is an opaque int32 vector in backend memory (row indices, labels,
// argmax results).
type IntTensor interface {
	Len() int
}

// DeviceBlock is a Block uploaded to a backend with UploadBlock.
type DeviceBlock interface {
	NumDst() int
	NumSrc() int
	NumEdges() int
}

// AggOp selects the neighbourhood reduction of Aggregate.
type AggOp int

const (
	AggMean AggOp = iota // mean over in-edges, 0 for zero in-degree
	AggSum               // sum over in-edges
	AggGCN               // symmetric GCN normalisation with implicit self loop
)

func (o AggOp) String() string {
	switch o {
	case AggMean:
		return "mean"
	case AggSum:
		return "sum"
	case AggGCN:
		return "gcn"
	}
	return fmt.Sprintf("AggOp(%d)", int(o))
}

// Valid reports whether o is one of the defined operators.
func (o AggOp) Valid() bool { return o >= AggMean && o <= AggGCN }

// MemStats is a backend's memory accounting for the handles it holds.
type MemStats struct {
	Allocated int64 // bytes held by live tensors, int tensors and blocks
	Peak      int64 // high-water mark of Allocated
	Handles   int   // number of live handles
}

// AdamConfig holds Adam hyper-parameters. WeightDecay is classic L2
// regularisation added to the gradient (torch.optim.Adam), not decoupled
// AdamW decay.
type AdamConfig struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
}

// DefaultAdam returns lr 1e-3, β1 0.9, β2 0.999, ε 1e-8, no weight decay.
func DefaultAdam() AdamConfig {
	return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Backend is a compute device. See the package documentation for the memory,
// error and determinism contracts.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda").
	Name() string
	// Close releases the backend's workers and device context. Handles
	// must not be used afterwards. Close is idempotent.
	Close() error
	// Err returns the first error recorded by an op, or nil.
	Err() error
	// MemStats returns the current memory accounting.
	MemStats() MemStats

	// Alloc returns a rows×cols tensor with unspecified contents.
	Alloc(rows, cols int) (Tensor, error)
	// Free releases t. Freeing nil is a no-op.
	Free(t Tensor)
	// Upload copies len(src) == Rows·Cols values into dst.
	Upload(dst Tensor, src []float32)
	// Download copies src into dst (len Rows·Cols); it is a sync point.
	Download(dst []float32, src Tensor) error
	// Zero sets every element of t to 0.
	Zero(t Tensor)
	// Copy copies src into dst (same shape).
	Copy(dst, src Tensor)

	// AllocInts returns an int32 vector of length n, unspecified contents.
	AllocInts(n int) (IntTensor, error)
	// UploadInts copies src (len == dst.Len()) into dst.
	UploadInts(dst IntTensor, src []int32)
	// DownloadInts copies src into dst; it is a sync point.
	DownloadInts(dst []int32, src IntTensor) error
	// FreeInts releases t. Freeing nil is a no-op.
	FreeInts(t IntTensor)

	// UploadBlock validates b and copies it to the backend, together with
	// whatever derived structures (transposed CSR, degree normalisers) the
	// backend needs. b is not retained.
	UploadBlock(b *Block) (DeviceBlock, error)
	// FreeBlock releases a block. Freeing nil is a no-op.
	FreeBlock(b DeviceBlock)

	// GEMM computes C = alpha·op(A)·op(B) + beta·C, op(X) = Xᵀ when the
	// flag is set. With beta == 0, C's prior contents are ignored (NaNs
	// included).
	GEMM(transA, transB bool, alpha float32, a, b Tensor, beta float32, c Tensor)

	// GatherRows sets dst[r] = src[idx[r]]; dst.Rows() == idx.Len().
	GatherRows(dst, src Tensor, idx IntTensor)
	// ScatterAddRows accumulates dst[idx[r]] += src[r] (the backward of
	// GatherRows). Repeated indices accumulate in increasing r order.
	ScatterAddRows(dst, src Tensor, idx IntTensor)

	// Aggregate sets dst (NumDst×F) from src (NumSrc×F) with op.
	Aggregate(blk DeviceBlock, op AggOp, dst, src Tensor)
	// AggregateBackward sets dSrc (NumSrc×F) = Aᵀ·dDst where A is the
	// linear map of Aggregate(op).
	AggregateBackward(blk DeviceBlock, op AggOp, dSrc, dDst Tensor)

	// ReLU sets dst = max(src, 0); dst may alias src.
	ReLU(dst, src Tensor)
	// ReLUBackward sets dX = dY where Y > 0, else 0, from the forward
	// output Y; dX may alias dY.
	ReLUBackward(dX, dY, y Tensor)
	// Dropout writes mask (same shape as src) with 0 for dropped elements
	// and 1/(1-p) for kept ones, and dst = src·mask (inverted dropout).
	// Element e (flat row-major index) is kept iff
	// DropoutUniform(seed, e) >= p. 0 <= p < 1. dst may alias src.
	Dropout(dst, src, mask Tensor, p float32, seed uint64)
	// DropoutBackward sets dX = dY·mask; dX may alias dY.
	DropoutBackward(dX, dY, mask Tensor)

	// AddBias adds the 1×C bias to every row of x in place.
	AddBias(x, bias Tensor)
	// BiasGrad sets dBias (1×C) to the column sums of dY.
	BiasGrad(dBias, dY Tensor)
	// Add sets dst = a + b; dst may alias a or b.
	Add(dst, a, b Tensor)
	// Scale multiplies x by alpha in place.
	Scale(x Tensor, alpha float32)
	// AXPY sets y += alpha·x.
	AXPY(y Tensor, alpha float32, x Tensor)

	// LogSoftmax sets each row of dst to the log-softmax of src's row;
	// dst may alias src.
	LogSoftmax(dst, src Tensor)
	// CrossEntropy computes the mean over labelled rows (labels[r] >= 0;
	// -1 means ignore) of -log softmax(logits[r])[labels[r]], and, if
	// dLogits is non-nil, writes its gradient w.r.t. logits:
	// (softmax - onehot)/n on labelled rows, 0 on ignored rows. n is the
	// number of labelled rows; with n == 0 the loss is 0. It is a sync
	// point. A label >= Cols is an error (ErrInvalidArg).
	CrossEntropy(dLogits, logits Tensor, labels IntTensor) (loss float32, n int, err error)
	// Argmax sets dst[r] to the column of row r's maximum (lowest index on
	// ties).
	Argmax(dst IntTensor, src Tensor)
	// Accuracy counts rows with labels[r] >= 0 (total) and those whose
	// argmax equals the label (correct). It is a sync point.
	Accuracy(logits Tensor, labels IntTensor) (correct, total int, err error)

	// GATScores sets scores (E×H) to
	// LeakyReLU_slope(Σ_f attnL[h·F+f]·wh[i,h·F+f] + Σ_f attnR[h·F+f]·wh[j,h·F+f])
	// for edge k from source j to destination i (destination i is
	// source row i of wh). wh is NumSrc×(H·F), attnL and attnR are
	// 1×(H·F); H = scores.Cols().
	GATScores(blk DeviceBlock, scores, wh, attnL, attnR Tensor, slope float32)
	// GATScoresBackward sets dWh (NumSrc×H·F), dAttnL and dAttnR (1×H·F)
	// to the gradients of Σ dScores·scores, given the forward output
	// scores (its sign recovers the LeakyReLU branch; slope > 0).
	GATScoresBackward(blk DeviceBlock, dWh, dAttnL, dAttnR, dScores, scores, wh, attnL, attnR Tensor, slope float32)
	// EdgeSoftmax sets alpha (E×H) to the softmax of scores over each
	// destination's in-edges, per head (max-subtracted for stability).
	EdgeSoftmax(blk DeviceBlock, alpha, scores Tensor)
	// EdgeSoftmaxBackward sets dScores from dAlpha and the forward alpha.
	EdgeSoftmaxBackward(blk DeviceBlock, dScores, dAlpha, alpha Tensor)
	// EdgeWeightedSum sets out[i, h·F+f] = Σ_{k∈N(i)} alpha[k,h]·wh[j_k, h·F+f];
	// out is NumDst×(H·F), wh NumSrc×(H·F), alpha E×H.
	EdgeWeightedSum(blk DeviceBlock, out, alpha, wh Tensor)
	// EdgeWeightedSumBackward sets dAlpha (E×H) and dWh (NumSrc×H·F).
	EdgeWeightedSumBackward(blk DeviceBlock, dAlpha, dWh, dOut, alpha, wh Tensor)

	// Adam performs one Adam step in place on param, m and v for step
	// number t >= 1 (bias correction uses t):
	//   g = grad + wd·param; m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²
	//   param -= lr · (m/(1-β1^t)) / (sqrt(v/(1-β2^t)) + ε)
	Adam(param, grad, m, v Tensor, t int, cfg AdamConfig)
}

// Block is a message-flow block in host memory, CSR over destinations. See
// the package documentation.
type Block struct {
	NumDst, NumSrc int
	Indptr         []int32 // NumDst+1 offsets into Indices, Indptr[0] == 0
	Indices        []int32 // source-local ids in [0, NumSrc)
	// SrcDegrees, when set (length NumSrc), are the sources' out-degrees
	// in the block this one was cut from (a micro-batch of a larger
	// batch): OutDegrees, and so AggGCN's source normalisation, use them,
	// so a micro-batch computes exactly what its rows of the whole batch
	// compute. nil: counted from Indices.
	SrcDegrees []int32
	// DstDegrees, when set (length NumDst), are the destinations'
	// in-degrees in the graph the block was sampled from: AggGCN then
	// normalises by them and scales each destination's sampled
	// neighbour sum by DstDegrees[i]/deg_i, an unbiased estimate of the
	// full neighbourhood's (see the package documentation). nil: the
	// block's own in-degrees, for which both are the block's sum.
	DstDegrees []int32
}

// BlockError reports a malformed Block: which array and the offending index.
type BlockError struct {
	Field string // "NumDst", "NumSrc", "Indptr", "Indices", "SrcDegrees" or "DstDegrees"
	Index int    // position in Field, -1 when not about one element
	Msg   string
}

func (e *BlockError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("kernels: malformed block: %s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("kernels: malformed block: %s[%d]: %s", e.Field, e.Index, e.Msg)
}

// Unwrap makes errors.Is(err, ErrBadBlock) hold.
func (e *BlockError) Unwrap() error { return ErrBadBlock }

// NumEdges is len(Indices).
func (b *Block) NumEdges() int { return len(b.Indices) }

// Validate checks the CSR invariants; it returns a *BlockError.
func (b *Block) Validate() error {
	if b.NumDst < 0 {
		return &BlockError{Field: "NumDst", Index: -1, Msg: "negative"}
	}
	if b.NumSrc < b.NumDst {
		return &BlockError{Field: "NumSrc", Index: -1, Msg: fmt.Sprintf("%d < NumDst %d (destinations must be the first sources)", b.NumSrc, b.NumDst)}
	}
	if b.NumSrc > math.MaxInt32 {
		return &BlockError{Field: "NumSrc", Index: -1, Msg: "exceeds int32"}
	}
	if len(b.Indptr) != b.NumDst+1 {
		return &BlockError{Field: "Indptr", Index: -1, Msg: fmt.Sprintf("length %d, want NumDst+1 = %d", len(b.Indptr), b.NumDst+1)}
	}
	if b.Indptr[0] != 0 {
		return &BlockError{Field: "Indptr", Index: 0, Msg: "must be 0"}
	}
	for i := 1; i <= b.NumDst; i++ {
		if b.Indptr[i] < b.Indptr[i-1] {
			return &BlockError{Field: "Indptr", Index: i, Msg: "decreasing"}
		}
	}
	if int(b.Indptr[b.NumDst]) != len(b.Indices) {
		return &BlockError{Field: "Indptr", Index: b.NumDst, Msg: fmt.Sprintf("%d != len(Indices) %d", b.Indptr[b.NumDst], len(b.Indices))}
	}
	for k, j := range b.Indices {
		if j < 0 || int(j) >= b.NumSrc {
			return &BlockError{Field: "Indices", Index: k, Msg: fmt.Sprintf("source %d out of range [0,%d)", j, b.NumSrc)}
		}
	}
	if b.SrcDegrees != nil && len(b.SrcDegrees) != b.NumSrc {
		return &BlockError{Field: "SrcDegrees", Index: -1, Msg: fmt.Sprintf("length %d, want NumSrc = %d", len(b.SrcDegrees), b.NumSrc)}
	}
	for j, d := range b.SrcDegrees {
		if d < 0 {
			return &BlockError{Field: "SrcDegrees", Index: j, Msg: fmt.Sprintf("negative degree %d", d)}
		}
	}
	if b.DstDegrees != nil && len(b.DstDegrees) != b.NumDst {
		return &BlockError{Field: "DstDegrees", Index: -1, Msg: fmt.Sprintf("length %d, want NumDst = %d", len(b.DstDegrees), b.NumDst)}
	}
	for i, d := range b.DstDegrees {
		if d < 0 {
			return &BlockError{Field: "DstDegrees", Index: i, Msg: fmt.Sprintf("negative degree %d", d)}
		}
	}
	return nil
}

// OutDegrees returns, for each source j, the number of entries of Indices
// equal to j, or SrcDegrees when set.
func (b *Block) OutDegrees() []int32 {
	if b.SrcDegrees != nil {
		return b.SrcDegrees
	}
	out := make([]int32, b.NumSrc)
	for _, j := range b.Indices {
		out[j]++
	}
	return out
}

// BySource lists b's edges by source, the transpose of its CSR:
// tDst[tOff[j]:tOff[j+1]] are the destinations source j feeds, in
// destination order, and tEdge (when not nil) holds those edges'
// positions in Indices. tOff must hold NumSrc+1 values and tDst (and
// tEdge) len(Indices); next is scratch of NumSrc values (nil: allocated).
func (b *Block) BySource(tOff, tDst, tEdge, next []int32) {
	clear(tOff)
	for _, j := range b.Indices {
		tOff[j+1]++
	}
	for j := range b.NumSrc {
		tOff[j+1] += tOff[j]
	}
	if next == nil {
		next = make([]int32, b.NumSrc)
	}
	copy(next, tOff[:b.NumSrc])
	for i := range b.NumDst {
		for e := b.Indptr[i]; e < b.Indptr[i+1]; e++ {
			j := b.Indices[e]
			p := next[j]
			next[j]++
			tDst[p] = int32(i)
			if tEdge != nil {
				tEdge[p] = e
			}
		}
	}
}

// GCNNorms returns the AggGCN normalisers, computed in float64 and
// rounded to float32: nbrNorm[i] scales destination i's neighbour sum,
// selfNorm[i] its self term, srcNorm[j] = 1/sqrt(out_j+1) every source
// (GCNDstNorms gives the destinations'). Without DstDegrees nbrNorm and
// selfNorm are the same slice.
func (b *Block) GCNNorms() (nbrNorm, selfNorm, srcNorm []float32) {
	nbrNorm = make([]float32, b.NumDst)
	selfNorm = nbrNorm
	if b.DstDegrees != nil {
		selfNorm = make([]float32, b.NumDst)
	}
	for i := range nbrNorm {
		deg := b.Indptr[i+1] - b.Indptr[i]
		if b.DstDegrees == nil {
			nbrNorm[i] = GCNNorm(deg)
			continue
		}
		nbrNorm[i], selfNorm[i] = GCNDstNorms(deg, b.DstDegrees[i])
	}
	srcNorm = make([]float32, b.NumSrc)
	for j, d := range b.OutDegrees() {
		srcNorm[j] = GCNNorm(d)
	}
	return nbrNorm, selfNorm, srcNorm
}

// GCNNorm is AggGCN's normaliser of a node of degree deg (in-degree for a
// destination, out-degree for a source): 1/sqrt(deg+1), the +1 being the
// implicit self loop. GCNNorms is it for every node.
func GCNNorm(deg int32) float32 { return float32(1 / math.Sqrt(float64(deg+1))) }

// GCNDstNorms are AggGCN's factors of a destination with deg sampled
// in-edges out of full in the graph (Block.DstDegrees): the neighbour
// sum's full/(deg·sqrt(full+1)) and the self term's 1/sqrt(full+1). With
// deg == full both are GCNNorm(deg); with deg == 0 the neighbour factor
// multiplies an empty sum and is 0.
func GCNDstNorms(deg, full int32) (nbr, self float32) {
	s := 1 / math.Sqrt(float64(full)+1)
	if deg == 0 {
		return 0, float32(s)
	}
	return float32(float64(full) / float64(deg) * s), float32(s)
}

// DropoutUniform is the counter-based generator behind Dropout: a uniform
// value in [0,1) with 24 random bits, a pure function of (seed, e). It is the
// SplitMix64 finaliser applied to seed + (e+1)·0x9E3779B97F4A7C15, top 24
// bits. Every backend must reproduce it bit for bit.
func DropoutUniform(seed, e uint64) float32 {
	return float32(dropoutBits(seed, e)) * (1.0 / (1 << 24))
}

// dropoutBits is DropoutUniform's 24 random bits as an integer u:
// DropoutUniform(seed, e) = u·2⁻²⁴ exactly.
func dropoutBits(seed, e uint64) uint64 {
	z := seed + (e+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return z >> 40
}

// dropoutThreshold is the integer form of Dropout's keep test:
// dropoutBits(seed, e) >= dropoutThreshold(p) exactly when
// DropoutUniform(seed, e) >= p, for every p that is not NaN. (u·2⁻²⁴ is
// exact in float32, so u·2⁻²⁴ >= p iff u >= ⌈p·2²⁴⌉.)
func dropoutThreshold(p float32) uint64 {
	t := math.Ceil(float64(p) * (1 << 24))
	return uint64(min(max(t, 0), 1<<24))
}

// DropoutKeep is the mask of Dropout with probability p for host loops:
// Factor(seed, e) is DropoutScale(p) where DropoutUniform(seed, e) >= p
// and 0 elsewhere, decided on the integer bits (no conversion to float)
// and picked from a table (no branch the random mask would mispredict).
type DropoutKeep struct {
	thr    uint64
	factor [2]float32
}

// NewDropoutKeep is the mask of probability p.
func NewDropoutKeep(p float32) DropoutKeep {
	return DropoutKeep{thr: dropoutThreshold(p), factor: [2]float32{0, DropoutScale(p)}}
}

// Factor is element e's mask value under seed: 0 or DropoutScale(p).
func (k *DropoutKeep) Factor(seed, e uint64) float32 {
	i := 0
	if dropoutBits(seed, e) >= k.thr {
		i = 1
	}
	return k.factor[i]
}

// DropoutScale is the kept-element mask value 1/(1-p), as float32.
func DropoutScale(p float32) float32 { return float32(1 / (1 - float64(p))) }
