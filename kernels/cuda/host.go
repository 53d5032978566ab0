//go:build cuda && cgo && linux

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ssdgnn/ssdgnn/internal/hostreg"
	"github.com/ssdgnn/ssdgnn/kernels"
)

// HostTensor is a rows×cols float32 host buffer registered with
// RegisterHost. On the zero-copy path the buffer is page-locked and mapped
// into the device address space, and GatherHostRows' kernel reads the rows
// it needs straight over PCIe/NVLink (UVA); on the staging path the rows
// are gathered on the host into the pinned staging ring and copied.
type HostTensor struct {
	owner      *Backend
	rows, cols int
	data       []float32
	dptr       cu.DevicePtr // device address of data[0] (zero-copy only)
	zeroCopy   bool
	freed      bool
}

// Rows is the number of rows of the registered buffer.
func (h *HostTensor) Rows() int { return h.rows }

// Cols is the row length of the registered buffer.
func (h *HostTensor) Cols() int { return h.cols }

// ZeroCopy reports whether kernels read the buffer directly.
func (h *HostTensor) ZeroCopy() bool { return h.zeroCopy }

// RegisterHost registers data, len(data)/cols rows of cols float32, for
// GatherHostRows. On a device that can map host memory (and unless
// Options.ZeroCopy is ZeroCopyOff) the pages are locked with
// cuMemHostRegister(DEVICEMAP|PORTABLE[|READ_ONLY]); otherwise nothing is
// pinned and gathers use the staging ring.
//
// The caller keeps data alive, mapped and unmoved, and does not write rows
// that queued gathers may still read, until UnregisterHost. Prefer memory
// outside the Go heap (an mmap'd region such as the feature cache's or the
// history cache's backing array): see package internal/hostreg.
func (b *Backend) RegisterHost(data []float32, cols int) (*HostTensor, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if cols <= 0 || len(data)%cols != 0 {
		return nil, fmt.Errorf("%w: cuda: RegisterHost: %d values are not rows of %d", kernels.ErrInvalidArg, len(data), cols)
	}
	h := &HostTensor{owner: b, rows: len(data) / cols, cols: cols, data: data}
	if b.dev.zeroCopy && len(data) > 0 {
		flags := hostreg.FlagPortable | hostreg.FlagDeviceMap
		if b.opts.ReadOnlyHost {
			flags |= hostreg.FlagReadOnly
		}
		p := unsafe.Pointer(&data[0])
		err := b.dev.call(func() error {
			if err := hostreg.Register(p, int64(len(data))*4, flags); err != nil {
				return err
			}
			dp, err := hostreg.DevicePointer(p)
			if err != nil {
				hostreg.Unregister(p)
				return err
			}
			h.dptr = cu.DevicePtr(dp)
			return nil
		})
		if err != nil {
			return nil, cuErr("RegisterHost", err)
		}
		h.zeroCopy = true
	}
	b.mem.Lock()
	b.mem.host.RegisteredBytes += int64(len(data)) * 4
	b.mem.host.Registered++
	b.mem.Unlock()
	return h, nil
}

// RegisterHostRows is RegisterHost behind the backend-neutral
// kernels.HostGatherer interface.
func (b *Backend) RegisterHostRows(data []float32, cols int) (kernels.HostRows, error) {
	h, err := b.RegisterHost(data, cols)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// UnregisterHostRows is UnregisterHost for a kernels.HostRows: h must be a
// *HostTensor of this backend (else the error wraps ErrNotRegistered and
// kernels.ErrForeignTensor; after unregistering, ErrNotRegistered and
// kernels.ErrFreed).
func (b *Backend) UnregisterHostRows(h kernels.HostRows) error {
	ht, err := b.resolveHost(h)
	if err != nil {
		return err
	}
	return b.UnregisterHost(ht)
}

var _ kernels.HostGatherer = (*Backend)(nil)

// resolveHost returns x as this backend's live *HostTensor, or an error
// wrapping ErrNotRegistered and the kernels sentinel of the Handle rules
// (ErrInvalidArg for nil, ErrForeignTensor, ErrFreed).
func (b *Backend) resolveHost(x kernels.HostRows) (*HostTensor, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: %w: nil host rows", ErrNotRegistered, kernels.ErrInvalidArg)
	}
	h, ok := x.(*HostTensor)
	if !ok || h == nil || h.owner != b {
		return nil, fmt.Errorf("%w: %w", ErrNotRegistered, kernels.ErrForeignTensor)
	}
	if h.freed {
		return nil, fmt.Errorf("%w: %w", ErrNotRegistered, kernels.ErrFreed)
	}
	return h, nil
}

// UnregisterHost waits for queued work that may read h and unlocks its
// pages. h must not be used afterwards.
func (b *Backend) UnregisterHost(h *HostTensor) error {
	if _, err := b.resolveHost(h); err != nil {
		return err
	}
	h.freed = true
	b.mem.Lock()
	b.mem.host.RegisteredBytes -= int64(len(h.data)) * 4
	b.mem.host.Registered--
	b.mem.Unlock()
	if b.closed || !h.zeroCopy {
		return nil
	}
	p := unsafe.Pointer(&h.data[0])
	return b.dev.call(func() error {
		if err := b.dev.compute.Synchronize(); err != nil {
			return cuErr("UnregisterHost", err)
		}
		return cuErr("UnregisterHost", hostreg.Unregister(p))
	})
}

// host resolves a HostRows passed to op, recording the error and returning
// nil when it is not this backend's live *HostTensor.
func (b *Backend) host(op string, x kernels.HostRows) *HostTensor {
	h, err := b.resolveHost(x)
	if err != nil {
		b.failf(op, "%w", err)
		return nil
	}
	return h
}

// GatherHostRows sets dst[r] = src[idx[r]] for host indices idx. Zero-copy:
// idx is uploaded and a kernel reads the rows from host memory. Staging:
// the rows are copied on the host into the pinned ring and sent with
// cuMemcpyHtoDAsync on the copy stream. Both give bit-identical results to
// uploading src and calling GatherRows. idx is validated on the host; idx
// may be reused when the call returns. src must be a *HostTensor of this
// backend (it implements kernels.HostGatherer with this method).
func (b *Backend) GatherHostRows(dst kernels.Tensor, hsrc kernels.HostRows, idx []int32) {
	const op = "GatherHostRows"
	if !b.ok() {
		return
	}
	D := b.t(op, dst)
	if D == nil {
		return
	}
	src := b.host(op, hsrc)
	if src == nil || !b.check(op, kernels.CheckGatherHostRows(D, src, idx)) {
		return
	}
	if len(idx) == 0 {
		return
	}
	f := int64(src.cols)
	if src.zeroCopy {
		n := int64(len(idx))
		b.hostCall(op, func(d *device) error {
			return d.scratch([]int64{n * 4}, func(p []cu.DevicePtr) error {
				if err := d.htod(p[0], i32bytes(idx)); err != nil {
					return err
				}
				return d.grid("gather_rows", n*f, D.ptr, src.dptr, p[0], n, f, int64(src.rows), d.errBuf)
			})
		})
		return
	}
	b.hostCall(op, func(d *device) error { return d.stageRows(D.ptr, src, idx) })
}

// stageRows gathers src rows into staging buffers, filled back to back
// (a row may straddle two buffers), and copies each buffer to the next
// bytes of dst on the copy stream.
func (d *device) stageRows(dst cu.DevicePtr, src *HostTensor, idx []int32) error {
	f := src.cols
	if err := d.copyAfterCompute(); err != nil {
		return err
	}
	var out int64
	r, roff := 0, 0
	for r < len(idx) {
		s, err := d.acquireStaging()
		if err != nil {
			return err
		}
		var fill int
		fill, r, roff = packRows(unsafe.Slice((*byte)(s.p), s.size), src.data, f, idx, r, roff)
		if err := cu.MemcpyHtoDAsync(dst+cu.DevicePtr(out), s.p, int64(fill), d.copyS); err != nil {
			return err
		}
		if err := s.ev.Record(d.copyS); err != nil {
			return err
		}
		s.used = true
		out += int64(fill)
	}
	return d.computeAfterCopy()
}

// GatherHostRowsDevice is GatherHostRows with device-resident indices (for
// example produced by a kernel). On the zero-copy path nothing is
// synchronised and out-of-range indices are reported at the next sync
// point; on the staging path idx is downloaded first (a sync point).
func (b *Backend) GatherHostRowsDevice(dst kernels.Tensor, src *HostTensor, idx kernels.IntTensor) {
	const op = "GatherHostRowsDevice"
	if !b.ok() {
		return
	}
	D, I := b.t(op, dst), b.it(op, idx)
	if D == nil || I == nil || b.host(op, src) == nil || !b.check(op, kernels.CheckShape("dst", D, I.n, src.cols)) {
		return
	}
	if src.zeroCopy {
		f := int64(src.cols)
		b.enqueue(op, func(d *device) error {
			return d.grid("gather_rows", D.n(), D.ptr, src.dptr, I.ptr, int64(I.n), f, int64(src.rows), d.errBuf)
		})
		return
	}
	host := make([]int32, I.n)
	if err := b.DownloadInts(host, I); err != nil {
		return
	}
	b.GatherHostRows(dst, src, host)
}
