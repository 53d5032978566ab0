//go:build cuda && cgo && linux

package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ssdgnn/ssdgnn/internal/hostreg"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// kernelsPTX is kernels.cu compiled with `nvcc -arch=compute_80 -ptx`
// (make ptx). The driver JIT-compiles it for the device at New.
//
//go:embed kernels.ptx
var kernelsPTX string

// Device error codes written by the kernels into the error flag.
const (
	errCodeGather  = 1
	errCodeScatter = 2
	errCodeLabel   = 3
)

const (
	blockThreads = 256     // threads per block of the grid-stride kernels
	maxBlocks    = 1 << 18 // grid-stride kernels never launch more blocks
	redThreads   = 256     // RED_THREADS in kernels.cu
	colChunk     = 256     // rows per partial sum in colreduce_partial
)

// device is the context-owner goroutine and everything it owns. Fields
// below "owner-only" are touched only on the owner's locked OS thread,
// inside closures sent over work.
type device struct {
	work chan func()
	done chan struct{}

	failed atomic.Bool // a queued closure failed; err holds why
	mu     struct {
		sync.Mutex
		err error
	}

	// Fixed after init; readable from any goroutine.
	name     string
	ccMajor  int
	ccMinor  int
	caps     hostreg.Capabilities
	zeroCopy bool

	// owner-only
	dev       cu.Device
	ctx       cu.CUContext
	mod       cu.Module
	fns       map[string]cu.Function
	arity     map[string]int
	compute   cu.Stream
	copyS     cu.Stream
	evCompute cu.Event
	evCopy    cu.Event
	staging   []stagingBuf
	nextStage int
	pool      pool
	errBuf    cu.DevicePtr // unsigned long long[2]: code, position
	args      []uint64
	argp      []unsafe.Pointer
}

// stagingBuf is one pinned host buffer of the staging ring; ev is recorded
// after the last copy that used it.
type stagingBuf struct {
	p    unsafe.Pointer
	size int64
	ev   cu.Event
	used bool
}

// newDevice starts the owner goroutine and initialises the context, the
// streams, the module and the staging ring on it.
func newDevice(o Options) (*device, error) {
	d := &device{work: make(chan func(), o.QueueDepth), done: make(chan struct{})}
	initErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(d.done)
		if err := d.init(o); err != nil {
			d.teardown()
			initErr <- err
			return
		}
		initErr <- nil
		for fn := range d.work {
			fn()
		}
		d.teardown()
	}()
	if err := <-initErr; err != nil {
		<-d.done
		return nil, err
	}
	return d, nil
}

// cuErr wraps a driver error with the op name; CUDA_ERROR_OUT_OF_MEMORY
// also matches kernels.ErrOutOfMemory.
func cuErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, cu.OutOfMemory) {
		return fmt.Errorf("cuda: %s: %w: %w", op, kernels.ErrOutOfMemory, err)
	}
	return fmt.Errorf("cuda: %s: %w", op, err)
}

func (d *device) init(o Options) error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoGPU, cuErr("cuDeviceGetCount", err))
	}
	if o.Device >= n {
		return fmt.Errorf("%w: device %d of %d", ErrNoGPU, o.Device, n)
	}
	if d.dev, err = cu.GetDevice(o.Device); err != nil {
		return cuErr("cuDeviceGet", err)
	}
	if d.name, err = d.dev.Name(); err != nil {
		return cuErr("cuDeviceGetName", err)
	}
	if d.ccMajor, d.ccMinor, err = d.dev.ComputeCapability(); err != nil {
		return cuErr("cuDeviceGetAttribute", err)
	}
	if d.ccMajor < 8 {
		return fmt.Errorf("%w: %s has compute capability %d.%d; the embedded PTX targets compute_80", ErrNoGPU, d.name, d.ccMajor, d.ccMinor)
	}
	if d.caps, err = hostreg.Query(o.Device); err != nil {
		return cuErr("device attributes", err)
	}
	d.zeroCopy = o.ZeroCopy == ZeroCopyAuto && d.caps.ZeroCopy()
	// cuCtxCreate makes the new context current on this (locked) thread.
	if d.ctx, err = d.dev.MakeContext(cu.SchedBlockingSync); err != nil {
		return cuErr("cuCtxCreate", err)
	}
	if d.mod, err = cu.LoadData(kernelsPTX); err != nil {
		return cuErr("cuModuleLoadData (JIT of kernels.ptx)", err)
	}
	params, err := ptxParams(kernelsPTX)
	if err != nil {
		return err
	}
	d.fns = make(map[string]cu.Function, len(kernelNames))
	d.arity = make(map[string]int, len(kernelNames))
	for _, name := range kernelNames {
		d.arity[name] = len(params[name])
		f, err := d.mod.Function(name)
		if err != nil {
			return cuErr("cuModuleGetFunction "+name, err)
		}
		d.fns[name] = f
	}
	if d.compute, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return cuErr("cuStreamCreate", err)
	}
	if d.copyS, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return cuErr("cuStreamCreate", err)
	}
	if d.evCompute, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return cuErr("cuEventCreate", err)
	}
	if d.evCopy, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return cuErr("cuEventCreate", err)
	}
	for range o.StagingBuffers {
		p, err := hostreg.AllocPinned(o.StagingBytes)
		if err != nil {
			return cuErr("staging ring", err)
		}
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			hostreg.FreePinned(p)
			return cuErr("cuEventCreate", err)
		}
		d.staging = append(d.staging, stagingBuf{p: p, size: o.StagingBytes, ev: ev})
	}
	d.pool = pool{limit: o.PoolBytes, free: map[int64][]cu.DevicePtr{}, drain: d.compute.Synchronize}
	if d.errBuf, err = d.pool.get(16); err != nil {
		return cuErr("error flag", err)
	}
	if err := cu.MemsetD32Async(d.errBuf, 0, 4, d.compute); err != nil {
		return cuErr("cuMemsetD32Async", err)
	}
	// The position word starts at the maximum so that atomicMin works.
	if err := cu.MemsetD32Async(d.errBuf+8, math.MaxUint32, 2, d.compute); err != nil {
		return cuErr("cuMemsetD32Async", err)
	}
	return cuErr("cuStreamSynchronize", d.compute.Synchronize())
}

// teardown releases everything init created, in reverse order. Destroying
// the context also frees device memory still held by live handles.
func (d *device) teardown() {
	if d.ctx == (cu.CUContext{}) {
		return
	}
	if d.compute != (cu.Stream{}) {
		d.compute.Synchronize()
	}
	if d.copyS != (cu.Stream{}) {
		d.copyS.Synchronize()
	}
	for i := range d.staging {
		hostreg.FreePinned(d.staging[i].p)
		cu.DestroyEvent(&d.staging[i].ev)
	}
	d.staging = nil
	d.pool.trim(0)
	if d.errBuf != 0 {
		cu.MemFree(d.errBuf)
	}
	for _, ev := range []*cu.Event{&d.evCompute, &d.evCopy} {
		if *ev != (cu.Event{}) {
			cu.DestroyEvent(ev)
		}
	}
	for _, s := range []*cu.Stream{&d.compute, &d.copyS} {
		if *s != (cu.Stream{}) {
			s.Destroy()
		}
	}
	if d.mod != (cu.Module{}) {
		d.mod.Unload()
	}
	d.ctx.Destroy()
}

// stop closes the work channel and waits for the owner to tear down.
func (d *device) stop() {
	close(d.work)
	<-d.done
}

// call runs fn on the owner thread and waits for it.
func (d *device) call(fn func() error) error {
	res := make(chan error, 1)
	d.work <- func() { res <- fn() }
	return <-res
}

// submit queues fn on the owner thread without waiting. Once a queued
// closure has failed, later ones are skipped (the sticky error); always
// closures (frees) run regardless.
func (d *device) submit(op string, always bool, fn func() error) {
	d.work <- func() {
		if d.failed.Load() && !always {
			return
		}
		if err := fn(); err != nil {
			d.setErr(cuErr(op, err))
		}
	}
}

// setErr records the first device-side error.
func (d *device) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.err == nil {
		d.mu.err = err
		d.failed.Store(true)
	}
}

func (d *device) getErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.err
}

// --- owner-only helpers below ---

// launch starts kernel name with a gx×gy grid of bx threads on the compute
// stream. Every argument is widened to 64 bits (see kernels.cu): device
// pointers and integers as 64-bit integers, float32/float64 as double.
func (d *device) launch(name string, gx, gy, bx int, args ...any) error {
	fn, ok := d.fns[name]
	if !ok {
		return fmt.Errorf("unknown kernel %q", name)
	}
	if len(args) != d.arity[name] {
		return fmt.Errorf("kernel %s takes %d parameters, launched with %d", name, d.arity[name], len(args))
	}
	if cap(d.args) < len(args) {
		d.args = make([]uint64, len(args))
		d.argp = make([]unsafe.Pointer, len(args))
	}
	vals, ptrs := d.args[:len(args)], d.argp[:len(args)]
	for i, a := range args {
		switch v := a.(type) {
		case cu.DevicePtr:
			vals[i] = uint64(v)
		case int:
			vals[i] = uint64(int64(v))
		case int64:
			vals[i] = uint64(v)
		case uint64:
			vals[i] = v
		case float32:
			vals[i] = math.Float64bits(float64(v))
		case float64:
			vals[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("kernel %s: argument %d has unsupported type %T", name, i, a)
		}
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	if err := fn.Launch(gx, gy, 1, bx, 1, 1, 0, d.compute, ptrs); err != nil {
		return fmt.Errorf("launch %s (grid %d×%d, block %d): %w", name, gx, gy, bx, err)
	}
	return nil
}

// grid launches a grid-stride kernel over n work items; n == 0 is a no-op.
func (d *device) grid(name string, n int64, args ...any) error {
	if n <= 0 {
		return nil
	}
	blocks := min((n+blockThreads-1)/blockThreads, maxBlocks)
	return d.launch(name, int(blocks), 1, blockThreads, args...)
}

// single launches a one-block reduction kernel.
func (d *device) single(name string, args ...any) error {
	return d.launch(name, 1, 1, redThreads, args...)
}

// acquireStaging returns the next staging buffer, waiting for its last copy.
func (d *device) acquireStaging() (*stagingBuf, error) {
	s := &d.staging[d.nextStage]
	d.nextStage = (d.nextStage + 1) % len(d.staging)
	if s.used {
		if err := s.ev.Synchronize(); err != nil {
			return nil, err
		}
		s.used = false
	}
	return s, nil
}

// copyAfterCompute makes the copy stream wait for the work queued so far
// on the compute stream (the destination may still be read or written by
// it, and pooled memory may have been reused).
func (d *device) copyAfterCompute() error {
	if err := d.evCompute.Record(d.compute); err != nil {
		return err
	}
	return d.copyS.Wait(d.evCompute, 0)
}

// computeAfterCopy makes later compute work wait for the copies queued so
// far on the copy stream.
func (d *device) computeAfterCopy() error {
	if err := d.evCopy.Record(d.copyS); err != nil {
		return err
	}
	return d.compute.Wait(d.evCopy, 0)
}

// htod copies src to dst through the pinned staging ring on the copy
// stream, ordered after queued compute work and before later compute
// work. src may be reused when htod returns.
func (d *device) htod(dst cu.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := d.copyAfterCompute(); err != nil {
		return err
	}
	for off := 0; off < len(src); {
		s, err := d.acquireStaging()
		if err != nil {
			return err
		}
		n := min(int64(len(src)-off), s.size)
		copy(unsafe.Slice((*byte)(s.p), n), src[off:off+int(n)])
		if err := cu.MemcpyHtoDAsync(dst+cu.DevicePtr(off), s.p, n, d.copyS); err != nil {
			return err
		}
		if err := s.ev.Record(d.copyS); err != nil {
			return err
		}
		s.used = true
		off += int(n)
	}
	return d.computeAfterCopy()
}

// dtoh copies src into dst after all queued compute work; it synchronises.
func (d *device) dtoh(dst []byte, src cu.DevicePtr) error {
	for off := 0; off < len(dst); {
		s, err := d.acquireStaging()
		if err != nil {
			return err
		}
		n := min(int64(len(dst)-off), s.size)
		if err := cu.MemcpyDtoHAsync(s.p, src+cu.DevicePtr(off), n, d.compute); err != nil {
			return err
		}
		if err := s.ev.Record(d.compute); err != nil {
			return err
		}
		if err := s.ev.Synchronize(); err != nil {
			return err
		}
		copy(dst[off:off+int(n)], unsafe.Slice((*byte)(s.p), n))
		off += int(n)
	}
	return nil
}

// syncCheck waits for the compute stream and turns a raised device error
// flag into an error.
func (d *device) syncCheck() error {
	var flag [16]byte
	if err := d.dtoh(flag[:], d.errBuf); err != nil {
		return cuErr("sync", err)
	}
	code := *(*uint64)(unsafe.Pointer(&flag[0]))
	pos := *(*uint64)(unsafe.Pointer(&flag[8]))
	if code == 0 {
		return nil
	}
	var op, what string
	switch code {
	case errCodeGather:
		op, what = "GatherRows", "idx"
	case errCodeScatter:
		op, what = "ScatterAddRows", "idx"
	case errCodeLabel:
		op, what = "CrossEntropy/Accuracy", "label"
	default:
		op, what = "kernel", "element"
	}
	return fmt.Errorf("cuda: %s: %w: %s[%d] out of range (detected on the device)", op, kernels.ErrInvalidArg, what, pos)
}

// memset32 sets n 32-bit words at p to v on the compute stream.
func (d *device) memset32(p cu.DevicePtr, v uint32, n int64) error {
	if n == 0 {
		return nil
	}
	return cu.MemsetD32Async(p, uint(v), n, d.compute)
}

// pool is a size-class free list of device allocations. Classes are
// 256 bytes and, above that, multiples of a quarter of the largest power of
// two not above the size (at most 25% waste). Reuse is safe without events
// because every use of pooled memory is ordered on the compute stream (the
// copy stream first waits for it).
type pool struct {
	// drain waits for the device before buffers go back to the driver
	// (queued kernels may still use a buffer that was just put back).
	drain    func() error
	limit    int64 // bytes kept cached at most
	cached   int64 // bytes in free lists
	reserved int64 // bytes obtained from the driver and not yet returned
	free     map[int64][]cu.DevicePtr
}

func sizeClass(n int64) int64 {
	if n <= 256 {
		return 256
	}
	p := int64(1) << (63 - bits.LeadingZeros64(uint64(n)))
	step := p / 4
	return (n + step - 1) / step * step
}

// get returns a device buffer of at least n bytes (class size).
func (p *pool) get(n int64) (cu.DevicePtr, error) {
	c := sizeClass(n)
	if l := p.free[c]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.free[c] = l[:len(l)-1]
		p.cached -= c
		return ptr, nil
	}
	ptr, err := cu.MemAlloc(c)
	if errors.Is(err, cu.OutOfMemory) && p.cached > 0 {
		p.trim(0)
		ptr, err = cu.MemAlloc(c)
	}
	if err != nil {
		return 0, err
	}
	p.reserved += c
	return ptr, nil
}

// put returns a buffer of n requested bytes to its free list.
func (p *pool) put(ptr cu.DevicePtr, n int64) error {
	if ptr == 0 {
		return nil
	}
	c := sizeClass(n)
	p.free[c] = append(p.free[c], ptr)
	p.cached += c
	if p.cached > p.limit {
		return p.trim(p.limit / 2)
	}
	return nil
}

// trim frees cached buffers, largest classes first, until at most keep
// bytes stay cached.
func (p *pool) trim(keep int64) error {
	var first error
	if p.cached > keep && p.drain != nil {
		first = p.drain()
	}
	for p.cached > keep {
		var big int64
		for c, l := range p.free {
			if len(l) > 0 && c > big {
				big = c
			}
		}
		if big == 0 {
			break
		}
		l := p.free[big]
		ptr := l[len(l)-1]
		p.free[big] = l[:len(l)-1]
		p.cached -= big
		p.reserved -= big
		if err := cu.MemFree(ptr); err != nil && first == nil {
			first = err
		}
	}
	return first
}
