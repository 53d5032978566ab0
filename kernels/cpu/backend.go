// Package cpu is the pure-Go float32 implementation of kernels.Backend.
//
// Tensors live in ordinary Go slices that the backend owns; nothing outside
// the package sees them. Work is split over a fixed pool of Options.Workers
// goroutines (the calling goroutine counts as one), started by New and
// stopped by Close. Every parallel op partitions its output by disjoint row
// (or column) ranges and every reduction runs in a fixed order, so results
// are bit-identical for a given worker count regardless of scheduling; the
// element-wise, aggregation and GAT ops are also independent of the worker
// count. GEMM goes through a tiled kernel on the backend's pool (an AVX2 +
// FMA micro-kernel where the CPU has them), gonum's Sgemm (which runs its
// own short-lived goroutines, joined before it returns) or a row-parallel
// kernel on the backend's pool built from gonum's assembly AXPY/DOT,
// chosen per call by Options.GEMM.
//
// Backward aggregation uses a transposed CSR built at UploadBlock, so each
// source row's gradient is one ordered sum with no atomics. Aggregations
// add rows with internal/f32 (its AVX2 assembly where the CPU has AVX2: a
// product, then a sum, the bits of a Go loop).
package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// GEMMKernel selects the matrix-multiply implementation.
type GEMMKernel int

const (
	// GEMMAuto picks GEMMTiled where its assembly micro-kernel runs (amd64
	// with AVX2 and FMA). Elsewhere it picks GEMMRows when the vectorised
	// inner loop is long (n >= 128, or k >= 128 with op(B) = Bᵀ) and
	// GEMMGonum otherwise, from benchmarks on a 2-core AMD EPYC (see
	// bench_test.go).
	GEMMAuto GEMMKernel = iota
	// GEMMGonum uses gonum.org/v1/gonum/blas/gonum Implementation.Sgemm.
	GEMMGonum
	// GEMMRows splits C's rows over the backend pool and runs the
	// vectorised gonum level-1 routines per row.
	GEMMRows
	// GEMMTiled packs op(A) and op(B) into panels and multiplies them with
	// a 6×16 register-blocked micro-kernel (gemm_tiled.go), C's row panels
	// split over the backend pool. The micro-kernel is AVX2 + FMA assembly
	// on amd64 CPUs that have both, Go elsewhere. Its sums do not depend
	// on the worker count.
	GEMMTiled
)

// Options configures a CPU backend. A nil *Options means the defaults.
type Options struct {
	// Workers is the number of goroutines that run an op, the caller
	// included. 0 means runtime.GOMAXPROCS(0).
	Workers int
	// GEMM selects the GEMM kernel; default GEMMAuto.
	GEMM GEMMKernel
	// MaxBytes caps MemStats.Allocated; Alloc beyond it fails with
	// kernels.ErrOutOfMemory. 0 means no cap.
	MaxBytes int64
	// Grain is the smallest number of elements worth handing to another
	// worker; 0 means 16384. Tests set 1 to drive the parallel paths with
	// tiny inputs.
	Grain int
}

// Validate reports invalid settings.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: cpu: Workers %d < 0", kernels.ErrInvalidArg, o.Workers)
	}
	if o.GEMM < GEMMAuto || o.GEMM > GEMMTiled {
		return fmt.Errorf("%w: cpu: unknown GEMM kernel %d", kernels.ErrInvalidArg, o.GEMM)
	}
	if o.Grain < 0 {
		return fmt.Errorf("%w: cpu: Grain %d < 0", kernels.ErrInvalidArg, o.Grain)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("%w: cpu: MaxBytes %d < 0", kernels.ErrInvalidArg, o.MaxBytes)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Workers == 0 {
		r.Workers = runtime.GOMAXPROCS(0)
	}
	if r.Grain == 0 {
		r.Grain = defaultGrain
	}
	return r
}

// Backend is the CPU backend. Not safe for concurrent use except MemStats.
type Backend struct {
	opts   Options
	grain  int
	pool   *pool
	err    error
	closed bool
	// st recycles tensor storage (store.go) and counts it in memacct.
	st store
	// gemm holds the tiled GEMM's packing buffers for reuse, at most one
	// per worker, counted in memacct.Backend until Close (gemmBytes);
	// buffers made beyond those by concurrent callers are dropped when
	// returned.
	gemm      chan *tiledScratch
	gemmBytes atomic.Int64

	acct kernels.MemAccount
}

var _ kernels.Backend = (*Backend)(nil)

// New starts a CPU backend and its worker pool; Close stops it.
func New(opts *Options) (*Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	b := &Backend{opts: o, grain: o.Grain, pool: newPool(o.Workers), gemm: make(chan *tiledScratch, o.Workers)}
	b.acct.SetMax(o.MaxBytes)
	return b, nil
}

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Workers returns the number of goroutines an op may use.
func (b *Backend) Workers() int { return b.opts.Workers }

// Close stops the worker pool. It is idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.pool.stop()
	b.st.drain()
	for len(b.gemm) > 0 {
		<-b.gemm
	}
	memacct.Add(memacct.Backend, -b.gemmBytes.Swap(0))
	return nil
}

// Err returns the first recorded error.
func (b *Backend) Err() error { return b.err }

func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Backend) failf(op string, format string, args ...any) {
	b.fail(fmt.Errorf("cpu: %s: %w", op, fmt.Errorf(format, args...)))
}

// ok reports whether an op may run: no sticky error and not closed.
func (b *Backend) ok() bool {
	if b.err != nil {
		return false
	}
	if b.closed {
		b.err = kernels.ErrClosed
		return false
	}
	return true
}

// ReleasePooled drops the storage the backend keeps for reuse by later
// tensors (the store's pooled buffers), so that the heap it took is the
// garbage collector's again: training calls it before a layer-wise
// evaluation, whose host arrays take the working set that training's
// tensors held, and which would otherwise sit beside the pool.
func (b *Backend) ReleasePooled() { b.st.drain() }

// MemStats returns the memory accounting.
func (b *Backend) MemStats() kernels.MemStats { return b.acct.Stats() }

// reserve and release keep the backend's account (MemStats) and the
// process's memacct.Backend count for int tensors and blocks; tensors'
// storage is counted by the store (store.go), which may hold more than
// the live tensors (pooled buffers, class rounding); adopted host slices
// are counted by their owner, so Adopt and their Free touch only the
// account.
func (b *Backend) reserve(bytes int64) error {
	if err := b.acct.Reserve("cpu", bytes); err != nil {
		return err
	}
	memacct.Add(memacct.Backend, bytes)
	return nil
}

func (b *Backend) release(bytes int64) {
	b.acct.Release(bytes)
	memacct.Add(memacct.Backend, -bytes)
}

// tensor is the CPU Tensor.
// use resolves x, a what handle passed to op, recording an error and
// returning nil if it is nil, foreign or freed.
func use[P kernels.Resource](b *Backend, op, what string, x any) P {
	p, err := kernels.Lookup[P](b, x, what)
	if err != nil {
		b.failf(op, "%w", err)
	}
	return p
}

// retire marks a non-nil x freed for op and returns it, or records the
// reason it cannot be freed and reports false.
func retire[P kernels.Resource](b *Backend, op string, x any) (P, bool) {
	p, err := kernels.Retire[P](b, x)
	if err != nil {
		b.fail(fmt.Errorf("cpu: %s: %w", op, err))
		return p, false
	}
	return p, true
}

type tensor struct {
	kernels.Handle
	rows, cols int
	data       []float32
	adopted    bool // data is a caller's slice (Adopt), counted by its owner
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

type intTensor struct {
	kernels.Handle
	data []int32
}

func (t *intTensor) Len() int { return len(t.data) }

// Alloc returns a zeroed rows×cols tensor.
func (b *Backend) Alloc(rows, cols int) (kernels.Tensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if rows < 0 || cols < 0 || (cols > 0 && rows > (1<<62)/4/cols) {
		return nil, fmt.Errorf("%w: cpu: Alloc(%d, %d)", kernels.ErrInvalidArg, rows, cols)
	}
	if err := b.acct.Reserve("cpu", int64(rows)*int64(cols)*4); err != nil {
		return nil, err
	}
	return &tensor{Handle: kernels.Handle{Owner: b}, rows: rows, cols: cols, data: b.st.get(rows * cols)}, nil
}

// Adopt returns a rows×cols tensor whose storage is data (len(data) must
// be rows·cols) without copying it: a zero-copy Upload for callers that
// recycle host buffers. The backend owns data until Free(t); the caller must
// neither read nor write it before then, and may reuse it after. The bytes
// count towards MemStats and MaxBytes like an Alloc.
func (b *Backend) Adopt(rows, cols int, data []float32) (kernels.Tensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if rows < 0 || cols < 0 || int64(rows)*int64(cols) != int64(len(data)) {
		return nil, fmt.Errorf("%w: cpu: Adopt(%d, %d) of %d values", kernels.ErrInvalidArg, rows, cols, len(data))
	}
	if err := b.acct.Reserve("cpu", int64(len(data))*4); err != nil {
		return nil, err
	}
	return &tensor{Handle: kernels.Handle{Owner: b}, rows: rows, cols: cols, data: data, adopted: true}, nil
}

// Free releases t.
func (b *Backend) Free(t kernels.Tensor) {
	if t == nil {
		return
	}
	ct, ok := retire[*tensor](b, "Free", t)
	if !ok {
		return
	}
	b.acct.Release(int64(len(ct.data)) * 4)
	if !ct.adopted {
		b.st.put(ct.data)
	}
	ct.data = nil
}

// AllocInts returns a zeroed int32 vector.
func (b *Backend) AllocInts(n int) (kernels.IntTensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: cpu: AllocInts(%d)", kernels.ErrInvalidArg, n)
	}
	if err := b.reserve(int64(n) * 4); err != nil {
		return nil, err
	}
	return &intTensor{Handle: kernels.Handle{Owner: b}, data: make([]int32, n)}, nil
}

// FreeInts releases t.
func (b *Backend) FreeInts(t kernels.IntTensor) {
	if t == nil {
		return
	}
	it, ok := retire[*intTensor](b, "FreeInts", t)
	if !ok {
		return
	}
	b.release(int64(len(it.data)) * 4)
	it.data = nil
}

// t resolves a Tensor handle for op, recording an error if it is unusable.
func (b *Backend) t(op string, x kernels.Tensor) *tensor { return use[*tensor](b, op, "tensor", x) }

// it resolves an IntTensor handle for op, recording an error if it is
// unusable.
func (b *Backend) it(op string, x kernels.IntTensor) *intTensor {
	return use[*intTensor](b, op, "int tensor", x)
}

// check records err, the result of a kernels.CheckX validator, as op's
// error; it reports whether err is nil.
func (b *Backend) check(op string, err error) bool {
	if err != nil {
		b.fail(fmt.Errorf("cpu: %s: %w", op, err))
		return false
	}
	return true
}

// Upload copies src into dst.
func (b *Backend) Upload(dst kernels.Tensor, src []float32) {
	if !b.ok() {
		return
	}
	d := b.t("Upload", dst)
	if d == nil {
		return
	}
	if !b.check("Upload", kernels.CheckTransfer(d, len(src))) {
		return
	}
	copy(d.data, src)
}

// Download copies src into dst.
func (b *Backend) Download(dst []float32, src kernels.Tensor) error {
	if !b.ok() {
		return b.err
	}
	s := b.t("Download", src)
	if s == nil {
		return b.err
	}
	if !b.check("Download", kernels.CheckTransfer(s, len(dst))) {
		return b.err
	}
	copy(dst, s.data)
	return nil
}

// UploadInts copies src into dst.
func (b *Backend) UploadInts(dst kernels.IntTensor, src []int32) {
	if !b.ok() {
		return
	}
	d := b.it("UploadInts", dst)
	if d == nil {
		return
	}
	if !b.check("UploadInts", kernels.CheckTransferInts(d, len(src))) {
		return
	}
	copy(d.data, src)
}

// DownloadInts copies src into dst.
func (b *Backend) DownloadInts(dst []int32, src kernels.IntTensor) error {
	if !b.ok() {
		return b.err
	}
	s := b.it("DownloadInts", src)
	if s == nil {
		return b.err
	}
	if !b.check("DownloadInts", kernels.CheckTransferInts(s, len(dst))) {
		return b.err
	}
	copy(dst, s.data)
	return nil
}

// Zero clears t.
func (b *Backend) Zero(t kernels.Tensor) {
	if !b.ok() {
		return
	}
	if x := b.t("Zero", t); x != nil {
		clear(x.data)
	}
}

// Copy copies src into dst.
func (b *Backend) Copy(dst, src kernels.Tensor) {
	if !b.ok() {
		return
	}
	d, s := b.t("Copy", dst), b.t("Copy", src)
	if d == nil || s == nil || !b.check("Copy", kernels.CheckSame(d, s)) {
		return
	}
	copy(d.data, s.data)
}

// block is the CPU DeviceBlock: the CSR plus its transpose and normalisers.
type block struct {
	kernels.Handle
	numDst, numSrc int
	indptr         []int32
	indices        []int32
	// Transposed CSR over sources: source j's in-edges are
	// tEdge[tIndptr[j]:tIndptr[j+1]] (edge ids, ascending), whose
	// destinations are tDst at the same positions.
	tIndptr []int32
	tEdge   []int32
	tDst    []int32
	// GCN's normalisers (kernels.Block.GCNNorms): the neighbour sum's
	// and the self term's per destination (one slice without
	// DstDegrees), 1/sqrt(out+1) per source.
	nbrNorm, selfNorm []float32
	srcNorm           []float32
	bytes             int64
}

func (k *block) NumDst() int   { return k.numDst }
func (k *block) NumSrc() int   { return k.numSrc }
func (k *block) NumEdges() int { return len(k.indices) }

// UploadBlock validates and copies hb, building the transposed CSR.
func (b *Backend) UploadBlock(hb *kernels.Block) (kernels.DeviceBlock, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if hb == nil {
		return nil, fmt.Errorf("%w: cpu: nil block", kernels.ErrInvalidArg)
	}
	if err := hb.Validate(); err != nil {
		return nil, err
	}
	e := len(hb.Indices)
	bytes := int64(4 * (len(hb.Indptr) + e + (hb.NumSrc + 1) + 2*e + hb.NumDst + hb.NumSrc))
	if hb.DstDegrees != nil {
		bytes += 4 * int64(hb.NumDst) // selfNorm
	}
	if err := b.reserve(bytes); err != nil {
		return nil, err
	}
	k := &block{
		Handle:  kernels.Handle{Owner: b},
		numDst:  hb.NumDst,
		numSrc:  hb.NumSrc,
		indptr:  append([]int32(nil), hb.Indptr...),
		indices: append([]int32(nil), hb.Indices...),
		tIndptr: make([]int32, hb.NumSrc+1),
		tEdge:   make([]int32, e),
		tDst:    make([]int32, e),
		bytes:   bytes,
	}
	hb.BySource(k.tIndptr, k.tDst, k.tEdge, nil)
	k.nbrNorm, k.selfNorm, k.srcNorm = hb.GCNNorms()
	return k, nil
}

// FreeBlock releases a block.
func (b *Backend) FreeBlock(db kernels.DeviceBlock) {
	if db == nil {
		return
	}
	k, ok := retire[*block](b, "FreeBlock", db)
	if !ok {
		return
	}
	b.release(k.bytes)
	*k = block{Handle: kernels.Handle{Owner: b, Freed: true}}
}

func (b *Backend) blk(op string, db kernels.DeviceBlock) *block {
	return use[*block](b, op, "block", db)
}

// pool runs chunks of a parallel loop on a fixed set of goroutines.
type pool struct {
	workers int
	jobs    chan *job
	wg      sync.WaitGroup
}

type job struct {
	fn     func(lo, hi int)
	n      int
	chunk  int
	chunks int
	next   atomic.Int64
	done   sync.WaitGroup
}

func newPool(workers int) *pool {
	p := &pool{workers: workers, jobs: make(chan *job)}
	for i := 1; i < workers; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				j.work()
				j.done.Done()
			}
		}()
	}
	return p
}

func (p *pool) stop() {
	close(p.jobs)
	p.wg.Wait()
}

func (j *job) work() {
	for {
		c := int(j.next.Add(1)) - 1
		if c >= j.chunks {
			return
		}
		lo := c * j.chunk
		j.fn(lo, min(lo+j.chunk, j.n))
	}
}

// parallel calls fn over disjoint ranges covering [0, n). grain is the
// smallest range worth handing to another goroutine. Ranges are claimed
// dynamically, so fn must write only outputs owned by its range.
func (p *pool) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	if p.workers <= 1 || n < 2*grain {
		fn(0, n)
		return
	}
	chunks := min(4*p.workers, n/grain)
	chunk := (n + chunks - 1) / chunks
	chunks = (n + chunk - 1) / chunk
	j := &job{fn: fn, n: n, chunk: chunk, chunks: chunks}
	helpers := min(p.workers-1, chunks-1)
	j.done.Add(helpers)
	for range helpers {
		p.jobs <- j
	}
	j.work()
	j.done.Wait()
}
