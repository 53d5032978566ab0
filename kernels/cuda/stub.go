//go:build !(cuda && cgo && linux)

package cuda

import "github.com/ssdgnn/ssdgnn/kernels"

// Available reports whether this build contains the CUDA backend (build tag
// cuda, cgo, linux). When false New always returns ErrNoGPU.
const Available = false

// Backend is the CUDA backend. In builds without the cuda tag it is a stub
// that New never returns; it exists so that callers compile unchanged.
type Backend struct {
	kernels.Backend
}

// New returns ErrNoGPU: the package was built without the cuda tag.
func New(opts *Options) (*Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return nil, ErrNoGPU
}

// HostTensor is a host buffer registered with RegisterHost.
type HostTensor struct{ rows, cols int }

// Rows is the number of rows of the registered buffer.
func (h *HostTensor) Rows() int { return h.rows }

// Cols is the row length of the registered buffer.
func (h *HostTensor) Cols() int { return h.cols }

// ZeroCopy reports whether kernels read the buffer directly.
func (h *HostTensor) ZeroCopy() bool { return false }

// RegisterHost returns ErrNoGPU.
func (b *Backend) RegisterHost(data []float32, cols int) (*HostTensor, error) { return nil, ErrNoGPU }

// UnregisterHost returns ErrNoGPU.
func (b *Backend) UnregisterHost(h *HostTensor) error { return ErrNoGPU }

// GatherHostRows does nothing.
func (b *Backend) GatherHostRows(dst kernels.Tensor, src kernels.HostRows, idx []int32) {}

// RegisterHostRows returns ErrNoGPU.
func (b *Backend) RegisterHostRows(data []float32, cols int) (kernels.HostRows, error) {
	return nil, ErrNoGPU
}

// UnregisterHostRows returns ErrNoGPU.
func (b *Backend) UnregisterHostRows(h kernels.HostRows) error { return ErrNoGPU }

// GatherHostRowsDevice does nothing.
func (b *Backend) GatherHostRowsDevice(dst kernels.Tensor, src *HostTensor, idx kernels.IntTensor) {}

// HostStats returns zeros.
func (b *Backend) HostStats() HostStats { return HostStats{} }

// HostBytes returns 0.
func (b *Backend) HostBytes() int64 { return 0 }
