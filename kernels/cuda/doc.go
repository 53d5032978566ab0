// Package cuda is the CUDA implementation of kernels.Backend, built only
// with the `cuda` build tag (plus cgo on linux). Without the tag the package
// still compiles: Available is false and New returns ErrNoGPU, so callers
// need no build tags of their own.
//
// # Build
//
// The tagged files import gorgonia.org/cu (CUDA driver API) and the cgo
// shim internal/hostreg; both need cuda.h and libcuda.so at build time
// (Debian: nvidia-cuda-dev, libcuda1). Kernels are CUDA C in kernels.cu,
// compiled by `nvcc -arch=compute_80 -ptx` into kernels.ptx, which is
// committed and embedded; New JIT-compiles it with cuModuleLoadData, so
// the device must be compute capability 8.0 or newer (A100, H100, ...).
// See docs/cuda.md.
//
// Caveat: gorgonia.org/cu calls cuInit in its package init and exits the
// process (os.Exit(1)) when it fails, e.g. on a machine without a GPU. Any
// binary built with the tag that links this package therefore exits at
// start-up on such a machine, before main or TestMain runs. The GPU tests
// live in package kernels/cuda/gputest and are run by `make test-cuda`
// only on GPU machines.
//
// # Runtime design
//
// One goroutine owns the CUDA context: it locks its OS thread, creates the
// context, and runs every driver call as a closure received over a bounded
// channel (Options.QueueDepth). Ops validate handles and shapes on the
// caller's goroutine and queue their launches without waiting; sync points
// (Download, DownloadInts, CrossEntropy, Accuracy, Err) wait for the queue
// and the device. Close drains the queue, frees everything and stops the
// goroutine.
//
// Two non-blocking streams: kernels, device-to-host copies and frees run
// on the compute stream; host-to-device copies (Upload, UploadInts,
// UploadBlock, the staging path of GatherHostRows) run on the copy stream
// from a ring of pinned staging buffers. Events order them: the copy stream
// waits for the compute work queued before the copy, and later compute
// work waits for the copy. Device memory comes from a size-class pool
// (quarter-power-of-two classes, cached up to Options.PoolBytes); MemStats
// counts the bytes of live handles as the interface defines them, PoolStats
// what the pool holds from the driver.
//
// Kernel parameters: gorgonia.org/cu's Function.Launch reads 8 bytes behind
// every parameter pointer, so every kernel parameter in kernels.cu is 64
// bits wide (pointers, long long, double, unsigned long long) and the
// launcher widens Go values accordingly (float32 travels as a double, which
// is exact).
//
// # Errors
//
// Sticky, as in package kernels: the first error (a validation error on the
// caller's goroutine, a failed driver call in a queued closure, or a range
// error that a kernel raised in the device error flag) is kept and later
// ops are no-ops. Driver errors are wrapped with the op name; out of device
// memory also matches kernels.ErrOutOfMemory. Out-of-range indices of
// GatherRows/ScatterAddRows and out-of-range labels are detected on the
// device and reported at the next sync point (ErrInvalidArg).
//
// # Determinism
//
// No floating-point atomics. Each output element is computed by one thread
// with a fixed summation order: CSR order for aggregation and the GAT ops
// (backward through a transposed CSR built at UploadBlock), ascending k in
// both GEMM kernels, a fixed two-level chunked sum for column reductions
// (BiasGrad, attention-vector gradients) and a fixed-shape single-block tree
// for the cross-entropy loss. ScatterAddRows adds row-parallel when no index
// repeats and otherwise walks rows in order per column. Results are
// bit-identical run to run on one device and differ from the CPU backend in
// the last bits (FMA contraction, summation blocking). Dropout masks are
// bit-identical to kernels.DropoutUniform.
//
// # Host buffers (zero-copy)
//
// RegisterHost pins a host buffer (cuMemHostRegister with DEVICEMAP, via
// internal/hostreg) when the device can map host memory and uses unified
// addressing; GatherHostRows then gathers rows by index with a kernel that
// reads host memory directly. Without that support (or with
// Options.ZeroCopy = ZeroCopyOff) it gathers into the pinned staging ring
// and copies with cuMemcpyHtoDAsync. HostStats reports the pinned and
// registered bytes.
package cuda
