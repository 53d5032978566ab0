//go:build cuda && cgo && linux

package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// Available reports whether this build contains the CUDA backend.
const Available = true

// Backend is the CUDA backend. Not safe for concurrent use except MemStats,
// HostStats and PoolStats.
type Backend struct {
	opts   Options
	dev    *device
	err    error
	closed bool

	acct kernels.MemAccount
	mem  struct {
		sync.Mutex
		host HostStats
	}
}

var _ kernels.Backend = (*Backend)(nil)

// New creates a context on opts.Device, JIT-compiles the embedded PTX and
// starts the context-owner goroutine; Close stops it. It returns an error
// wrapping ErrNoGPU when the device is missing or older than compute
// capability 8.0.
//
// Note: importing this package (in a cuda-tagged build) runs
// gorgonia.org/cu's init, which calls cuInit and exits the process when no
// driver or device is present, before New can report anything.
func New(opts *Options) (*Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	rss := memstat.RSS()
	d, err := newDevice(o)
	if err != nil {
		return nil, err
	}
	b := &Backend{opts: o, dev: d}
	b.acct.SetMax(o.MaxBytes)
	b.mem.host.PinnedBytes = int64(len(d.staging)) * o.StagingBytes
	b.mem.host.ZeroCopy = d.zeroCopy
	b.mem.host.OpenBytes = max(0, memstat.RSS()-rss)
	return b, nil
}

// HostBytes is HostStats().OpenBytes (kernels.HostFootprint): the host
// memory the driver's context, the module and the staging ring took.
func (b *Backend) HostBytes() int64 { return b.HostStats().OpenBytes }

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU: name and compute capability.
func (b *Backend) Device() string {
	return fmt.Sprintf("%s (sm_%d%d)", b.dev.name, b.dev.ccMajor, b.dev.ccMinor)
}

// Close waits for queued work, releases the staging ring, the pool, the
// streams, the module and the context, and stops the owner goroutine.
// Handles must not be used afterwards. Close is idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.dev.stop()
	return nil
}

// Err returns the first recorded error. On this backend it is a sync
// point: it waits for queued work so that device-side failures (launch
// errors, out-of-range indices or labels found by a kernel) are seen.
func (b *Backend) Err() error {
	if b.err != nil || b.closed {
		return b.err
	}
	b.sync()
	return b.err
}

// sync drains the queue, waits for the device and folds device errors into
// b.err.
func (b *Backend) sync() {
	err := b.dev.call(func() error {
		if e := b.dev.getErr(); e != nil {
			return e
		}
		return b.dev.syncCheck()
	})
	if err != nil && b.err == nil {
		b.err = err
		b.dev.setErr(err)
	}
}

func (b *Backend) fail(err error) {
	if b.err != nil {
		return
	}
	if b.dev.failed.Load() {
		// An earlier asynchronous failure happened first.
		b.err = b.dev.getErr()
		return
	}
	b.err = err
}

func (b *Backend) failf(op string, format string, args ...any) {
	b.fail(fmt.Errorf("cuda: %s: %w", op, fmt.Errorf(format, args...)))
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
	if b.dev.failed.Load() {
		b.err = b.dev.getErr()
		return false
	}
	return true
}

// enqueue queues fn on the owner goroutine; a failure becomes the sticky
// error.
func (b *Backend) enqueue(op string, fn func(d *device) error) {
	d := b.dev
	d.submit(op, false, func() error { return fn(d) })
}

// MemStats returns the accounting of live handles. Bytes are the sizes the
// interface promises (rows·cols·4, block arrays); the pool's rounding and
// cached free lists are reported by PoolStats.
func (b *Backend) MemStats() kernels.MemStats { return b.acct.Stats() }

// HostStats returns the pinned and registered host memory accounting.
func (b *Backend) HostStats() HostStats {
	b.mem.Lock()
	defer b.mem.Unlock()
	return b.mem.host
}

// PoolStats reports the device memory the pool holds from the driver
// (Reserved, including handles' class rounding) and how much of it sits in
// free lists (Cached). It waits for queued work.
func (b *Backend) PoolStats() (reserved, cached int64) {
	if b.closed {
		return 0, 0
	}
	b.dev.call(func() error {
		reserved, cached = b.dev.pool.reserved, b.dev.pool.cached
		return nil
	})
	return reserved, cached
}

func (b *Backend) reserve(bytes int64) error { return b.acct.Reserve("cuda", bytes) }

func (b *Backend) release(bytes int64) { b.acct.Release(bytes) }

// devAlloc reserves bytes in the accounting and gets device memory from
// the pool (nothing for 0 bytes).
func (b *Backend) devAlloc(op string, bytes int64) (cu.DevicePtr, error) {
	if err := b.reserve(bytes); err != nil {
		return 0, err
	}
	if bytes == 0 {
		return 0, nil
	}
	var p cu.DevicePtr
	err := b.dev.call(func() error {
		var err error
		p, err = b.dev.pool.get(bytes)
		return err
	})
	if err != nil {
		b.release(bytes)
		return 0, cuErr(op, err)
	}
	return p, nil
}

// devFree returns memory to the pool, ordered after queued work.
//
// The freed handle keeps its pointer: closures already queued read it when
// they run, after this call returns (Free right after Dropout, say, is
// legal), and the pool takes the memory back only behind them. Retire has
// marked the handle freed, so no later call can use it.
func (b *Backend) devFree(p cu.DevicePtr, bytes int64) {
	b.release(bytes)
	if p == 0 {
		return
	}
	d := b.dev
	d.submit("Free", true, func() error { return d.pool.put(p, bytes) })
}

// tensor is the CUDA Tensor: rows·cols float32 at ptr (0 when empty).
type tensor struct {
	kernels.Handle
	rows, cols int
	ptr        cu.DevicePtr
}

func (t *tensor) Rows() int      { return t.rows }
func (t *tensor) Cols() int      { return t.cols }
func (t *tensor) n() int64       { return int64(t.rows) * int64(t.cols) }
func (t *tensor) bytes() int64   { return t.n() * 4 }
func (t *tensor) String() string { return fmt.Sprintf("cuda tensor %d×%d", t.rows, t.cols) }

type intTensor struct {
	kernels.Handle
	n   int
	ptr cu.DevicePtr
}

func (t *intTensor) Len() int { return t.n }

// Alloc returns a rows×cols tensor with unspecified contents.
func (b *Backend) Alloc(rows, cols int) (kernels.Tensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if rows < 0 || cols < 0 || (cols > 0 && rows > (1<<62)/4/cols) {
		return nil, fmt.Errorf("%w: cuda: Alloc(%d, %d)", kernels.ErrInvalidArg, rows, cols)
	}
	p, err := b.devAlloc("Alloc", int64(rows)*int64(cols)*4)
	if err != nil {
		return nil, err
	}
	return &tensor{Handle: kernels.Handle{Owner: b}, rows: rows, cols: cols, ptr: p}, nil
}

// Free releases t.
func (b *Backend) Free(t kernels.Tensor) {
	if t == nil {
		return
	}
	ct, err := kernels.Retire[*tensor](b, t)
	if err != nil {
		b.fail(fmt.Errorf("cuda: Free: %w", err))
		return
	}
	if b.closed {
		b.release(ct.bytes())
		return
	}
	b.devFree(ct.ptr, ct.bytes())
}

// AllocInts returns an int32 vector of length n.
func (b *Backend) AllocInts(n int) (kernels.IntTensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if n < 0 || n > 1<<60 {
		return nil, fmt.Errorf("%w: cuda: AllocInts(%d)", kernels.ErrInvalidArg, n)
	}
	p, err := b.devAlloc("AllocInts", int64(n)*4)
	if err != nil {
		return nil, err
	}
	return &intTensor{Handle: kernels.Handle{Owner: b}, n: n, ptr: p}, nil
}

// FreeInts releases t.
func (b *Backend) FreeInts(t kernels.IntTensor) {
	if t == nil {
		return
	}
	it, err := kernels.Retire[*intTensor](b, t)
	if err != nil {
		b.fail(fmt.Errorf("cuda: FreeInts: %w", err))
		return
	}
	if b.closed {
		b.release(int64(it.n) * 4)
		return
	}
	b.devFree(it.ptr, int64(it.n)*4)
}

func (b *Backend) t(op string, x kernels.Tensor) *tensor {
	p, err := kernels.Lookup[*tensor](b, x, "tensor")
	if err != nil {
		b.failf(op, "%w", err)
		return nil
	}
	return p
}

func (b *Backend) it(op string, x kernels.IntTensor) *intTensor {
	p, err := kernels.Lookup[*intTensor](b, x, "int tensor")
	if err != nil {
		b.failf(op, "%w", err)
		return nil
	}
	return p
}

// check records err, the result of a kernels.CheckX validator, as op's
// error; it reports whether err is nil.
func (b *Backend) check(op string, err error) bool {
	if err != nil {
		b.fail(fmt.Errorf("cuda: %s: %w", op, err))
		return false
	}
	return true
}

func f32bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*4)
}

func i32bytes(x []int32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*4)
}

// Upload copies src into dst through the staging ring; src may be reused
// as soon as Upload returns.
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
	b.hostCall("Upload", func(dv *device) error { return dv.htod(d.ptr, f32bytes(src)) })
}

// hostCall runs fn synchronously on the owner (it reads caller memory)
// unless a previous failure makes it a no-op.
func (b *Backend) hostCall(op string, fn func(d *device) error) {
	dv := b.dev
	err := dv.call(func() error {
		if dv.failed.Load() {
			return nil
		}
		if err := fn(dv); err != nil {
			err = cuErr(op, err)
			dv.setErr(err)
			return err
		}
		return nil
	})
	if err != nil {
		b.fail(err)
	}
}

// syncRead runs fn (which issues device-to-host copies) after all queued
// work and checks the device error flag; it is the body of every sync
// point.
func (b *Backend) syncRead(op string, fn func(d *device) error) error {
	dv := b.dev
	err := dv.call(func() error {
		if e := dv.getErr(); e != nil {
			return e
		}
		if err := fn(dv); err != nil {
			return cuErr(op, err)
		}
		return dv.syncCheck()
	})
	if err != nil {
		b.fail(err)
		dv.setErr(err)
		return b.err
	}
	return nil
}

// Download copies src into dst; it is a sync point.
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
	return b.syncRead("Download", func(d *device) error { return d.dtoh(f32bytes(dst), s.ptr) })
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
	b.hostCall("UploadInts", func(dv *device) error { return dv.htod(d.ptr, i32bytes(src)) })
}

// DownloadInts copies src into dst; it is a sync point.
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
	return b.syncRead("DownloadInts", func(d *device) error { return d.dtoh(i32bytes(dst), s.ptr) })
}

// Zero sets t to 0.
func (b *Backend) Zero(t kernels.Tensor) {
	if !b.ok() {
		return
	}
	x := b.t("Zero", t)
	if x == nil {
		return
	}
	b.enqueue("Zero", func(d *device) error { return d.memset32(x.ptr, 0, x.n()) })
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
	if d.n() == 0 || d.ptr == s.ptr {
		return
	}
	b.enqueue("Copy", func(dv *device) error { return cu.MemcpyDtoDAsync(d.ptr, s.ptr, d.bytes(), dv.compute) })
}

// block is the CUDA DeviceBlock: one device buffer holding the CSR, the
// edge→destination map, the transposed CSR and the GCN normalisers.
type block struct {
	kernels.Handle
	numDst, numSrc, edges int
	base                  cu.DevicePtr
	bytes                 int64
	indptr, indices, eDst cu.DevicePtr // int32 [numDst+1], [E], [E]
	tIndptr, tEdge, tDst  cu.DevicePtr // int32 [numSrc+1], [E], [E]
	nbrNorm, selfNorm     cu.DevicePtr // float32 [numDst] each (one array without DstDegrees)
	srcNorm               cu.DevicePtr // float32 [numSrc]
	freed                 bool
}

func (k *block) NumDst() int   { return k.numDst }
func (k *block) NumSrc() int   { return k.numSrc }
func (k *block) NumEdges() int { return k.edges }

// UploadBlock validates hb, builds the transposed CSR, the edge→destination
// map and the GCN normalisers on the host and uploads them in one copy.
func (b *Backend) UploadBlock(hb *kernels.Block) (kernels.DeviceBlock, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if hb == nil {
		return nil, fmt.Errorf("%w: cuda: nil block", kernels.ErrInvalidArg)
	}
	if err := hb.Validate(); err != nil {
		return nil, err
	}
	e, nd, ns := len(hb.Indices), hb.NumDst, hb.NumSrc
	eDst := make([]int32, e)
	tIndptr := make([]int32, ns+1)
	tEdge := make([]int32, e)
	tDst := make([]int32, e)
	hb.BySource(tIndptr, tDst, tEdge, nil)
	for i := 0; i < nd; i++ {
		for k := hb.Indptr[i]; k < hb.Indptr[i+1]; k++ {
			eDst[k] = int32(i)
		}
	}
	nbrNorm, selfNorm, srcNorm := hb.GCNNorms()
	if hb.DstDegrees == nil {
		selfNorm = nil // the same values as nbrNorm: not uploaded twice
	}

	// Pack the arrays at 256-byte aligned offsets.
	parts := [][]byte{
		i32bytes(hb.Indptr), i32bytes(hb.Indices), i32bytes(eDst),
		i32bytes(tIndptr), i32bytes(tEdge), i32bytes(tDst),
		f32bytes(nbrNorm), f32bytes(srcNorm), f32bytes(selfNorm),
	}
	offs := make([]int64, len(parts))
	var total int64
	for i, p := range parts {
		offs[i] = total
		total += (int64(len(p)) + 255) &^ 255
	}
	buf := make([]byte, total)
	for i, p := range parts {
		copy(buf[offs[i]:], p)
	}
	base, err := b.devAlloc("UploadBlock", total)
	if err != nil {
		return nil, err
	}
	k := &block{Handle: kernels.Handle{Owner: b}, numDst: nd, numSrc: ns, edges: e, base: base, bytes: total}
	at := func(i int) cu.DevicePtr { return base + cu.DevicePtr(offs[i]) }
	k.indptr, k.indices, k.eDst = at(0), at(1), at(2)
	k.tIndptr, k.tEdge, k.tDst = at(3), at(4), at(5)
	k.nbrNorm, k.srcNorm, k.selfNorm = at(6), at(7), at(8)
	if selfNorm == nil {
		k.selfNorm = k.nbrNorm
	}
	err = b.dev.call(func() error {
		if err := b.dev.htod(base, buf); err != nil {
			return cuErr("UploadBlock", err)
		}
		return nil
	})
	if err != nil {
		b.devFree(base, total)
		return nil, err
	}
	return k, nil
}

// FreeBlock releases a block.
func (b *Backend) FreeBlock(db kernels.DeviceBlock) {
	if db == nil {
		return
	}
	k, err := kernels.Retire[*block](b, db)
	if err != nil {
		b.fail(fmt.Errorf("cuda: FreeBlock: %w", err))
		return
	}
	if b.closed {
		b.release(k.bytes)
		return
	}
	b.devFree(k.base, k.bytes)
}

func (b *Backend) blk(op string, db kernels.DeviceBlock) *block {
	p, err := kernels.Lookup[*block](b, db, "block")
	if err != nil {
		b.failf(op, "%w", err)
		return nil
	}
	return p
}
