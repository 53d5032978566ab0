package cuda

import (
	"errors"
	"fmt"

	"github.com/ssdgnn/ssdgnn/kernels"
)

// ErrNoGPU is returned by New when the package was built without the cuda
// tag (or without cgo) or when the driver reports no usable device.
var ErrNoGPU = errors.New("cuda: no GPU available")

// ErrNotRegistered reports a HostTensor used after UnregisterHost or with
// another backend.
var ErrNotRegistered = errors.New("cuda: host buffer not registered with this backend")

// GEMMKernel selects the matrix-multiply kernel.
type GEMMKernel int

const (
	// GEMMTiled is the shared-memory tiled kernel (64×64 tiles of C, 4×4
	// per thread). The default.
	GEMMTiled GEMMKernel = iota
	// GEMMNaive is one thread per C element reading A and B from global
	// memory; it exists as the benchmark baseline.
	GEMMNaive
)

func (k GEMMKernel) String() string {
	switch k {
	case GEMMTiled:
		return "tiled"
	case GEMMNaive:
		return "naive"
	}
	return fmt.Sprintf("GEMMKernel(%d)", int(k))
}

// ZeroCopy selects how GatherHostRows reads registered host buffers.
type ZeroCopy int

const (
	// ZeroCopyAuto maps registered host memory into the device address
	// space when the device supports it (CAN_MAP_HOST_MEMORY, unified
	// addressing, HOST_REGISTER_SUPPORTED), else uses the staging path.
	ZeroCopyAuto ZeroCopy = iota
	// ZeroCopyOff always gathers on the host into the pinned staging ring
	// and copies with cuMemcpyHtoDAsync.
	ZeroCopyOff
)

// Options configures a CUDA backend. A nil *Options means the defaults.
type Options struct {
	// Device is the CUDA device ordinal; default 0.
	Device int
	// GEMM selects the GEMM kernel; default GEMMTiled.
	GEMM GEMMKernel
	// MaxBytes caps MemStats.Allocated (bytes held by live handles);
	// allocations beyond it fail with kernels.ErrOutOfMemory. 0 means
	// the device's memory is the only limit.
	MaxBytes int64
	// PoolBytes caps the device memory kept in the size-class free lists
	// after Free; beyond it freed buffers go back to the driver. 0 means
	// 1 GiB.
	PoolBytes int64
	// StagingBytes is the size of each pinned host staging buffer used by
	// Upload, Download and the non-zero-copy host gather; 0 means 4 MiB.
	StagingBytes int64
	// StagingBuffers is the number of staging buffers in the ring; 0
	// means 4.
	StagingBuffers int
	// QueueDepth bounds the channel of closures queued for the
	// context-owner goroutine; 0 means 256.
	QueueDepth int
	// ZeroCopy selects the host-gather path; default ZeroCopyAuto.
	ZeroCopy ZeroCopy
	// ReadOnlyHost registers host buffers with
	// CU_MEMHOSTREGISTER_READ_ONLY, which read-only (PROT_READ) mappings
	// need.
	ReadOnlyHost bool
}

// Validate reports invalid settings.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.Device < 0:
		return fmt.Errorf("%w: cuda: Device %d < 0", kernels.ErrInvalidArg, o.Device)
	case o.GEMM < GEMMTiled || o.GEMM > GEMMNaive:
		return fmt.Errorf("%w: cuda: unknown GEMM kernel %d", kernels.ErrInvalidArg, o.GEMM)
	case o.MaxBytes < 0:
		return fmt.Errorf("%w: cuda: MaxBytes %d < 0", kernels.ErrInvalidArg, o.MaxBytes)
	case o.PoolBytes < 0:
		return fmt.Errorf("%w: cuda: PoolBytes %d < 0", kernels.ErrInvalidArg, o.PoolBytes)
	case o.StagingBytes < 0 || (o.StagingBytes > 0 && o.StagingBytes < 4096):
		return fmt.Errorf("%w: cuda: StagingBytes %d: want 0 or >= 4096", kernels.ErrInvalidArg, o.StagingBytes)
	case o.StagingBuffers < 0:
		return fmt.Errorf("%w: cuda: StagingBuffers %d < 0", kernels.ErrInvalidArg, o.StagingBuffers)
	case o.QueueDepth < 0:
		return fmt.Errorf("%w: cuda: QueueDepth %d < 0", kernels.ErrInvalidArg, o.QueueDepth)
	case o.ZeroCopy < ZeroCopyAuto || o.ZeroCopy > ZeroCopyOff:
		return fmt.Errorf("%w: cuda: unknown ZeroCopy mode %d", kernels.ErrInvalidArg, o.ZeroCopy)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.PoolBytes == 0 {
		r.PoolBytes = 1 << 30
	}
	if r.StagingBytes == 0 {
		r.StagingBytes = 4 << 20
	}
	r.StagingBytes &^= 255 // keep staging chunks 256-byte aligned
	if r.StagingBuffers == 0 {
		r.StagingBuffers = 4
	}
	if r.QueueDepth == 0 {
		r.QueueDepth = 256
	}
	return r
}

// HostStats is the accounting of host memory the backend pins: its staging
// ring and the buffers registered with RegisterHost.
type HostStats struct {
	PinnedBytes     int64 // cuMemAllocHost staging ring
	RegisteredBytes int64 // live RegisterHost buffers
	Registered      int   // number of live RegisterHost buffers
	ZeroCopy        bool  // whether GatherHostRows reads host memory directly
	// OpenBytes is the resident host memory the process gained while New
	// opened the device (driver context, module, staging ring), measured
	// from /proc/self/status around it; what kernels.HostFootprint reports.
	OpenBytes int64
}
