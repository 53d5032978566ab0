// Package hostreg is a small cgo shim over the CUDA driver calls that
// gorgonia.org/cu v0.9.6 does not wrap: cuMemHostRegister,
// cuMemHostUnregister, cuMemHostGetDevicePointer, cuMemAllocHost and the
// device attributes that say whether registered host memory can be mapped
// into the device's address space.
//
// The shim is compiled only with the `cuda` build tag (and cgo on linux);
// without it the package is empty apart from this documentation and
// Supported is false. Every function must be called on the OS thread that
// has the CUDA context current: in ssdgnn that is the context-owner
// goroutine of package kernels/cuda, which is the only caller.
//
// Invariants and caveats:
//   - Register pins the pages of [p, p+bytes) until Unregister. The memory
//     must stay mapped and must not move for that time. Go's heap does not
//     move objects today, but the cgo rules forbid C from keeping a Go
//     pointer after a call returns, so callers should register memory that
//     is not on the Go heap (mmap'd buffers, cuMemAllocHost buffers).
//   - File-backed read-only mappings need FlagReadOnly (driver >= 11.1).
//   - With unified addressing (every 64-bit Linux device since Fermi) the
//     device pointer returned by DevicePointer equals the host address.
//   - Errors are *Error values carrying the driver call and its CUresult.
package hostreg
