package cpu

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/kernels"
)

var _ kernels.HostGatherer = (*Backend)(nil)

// hostRows is the CPU kernels.HostRows: the caller's slice, not copied.
type hostRows struct {
	kernels.Handle
	rows, cols int
	data       []float32
}

func (h *hostRows) Rows() int { return h.rows }
func (h *hostRows) Cols() int { return h.cols }

// RegisterHostRows wraps data (len(data)/cols rows of cols values) without
// copying it. Nothing is pinned and nothing counts towards MemStats: the
// slice stays the caller's memory, and GatherHostRows copies from it.
func (b *Backend) RegisterHostRows(data []float32, cols int) (kernels.HostRows, error) {
	if b.closed {
		return nil, kernels.ErrClosed
	}
	if err := kernels.CheckRegisterHostRows(len(data), cols); err != nil {
		return nil, fmt.Errorf("cpu: RegisterHostRows: %w", err)
	}
	return &hostRows{Handle: kernels.Handle{Owner: b}, rows: len(data) / cols, cols: cols, data: data}, nil
}

// UnregisterHostRows forgets h. It fails with ErrFreed the second time and
// with ErrForeignTensor for another backend's handle.
func (b *Backend) UnregisterHostRows(h kernels.HostRows) error {
	hr, err := kernels.Retire[*hostRows](b, h)
	if err != nil {
		return fmt.Errorf("cpu: UnregisterHostRows: %w", err)
	}
	hr.data = nil
	return nil
}

// GatherHostRows sets dst[r] = src[idx[r]], copying the rows from the
// registered slice with the backend's workers.
func (b *Backend) GatherHostRows(dst kernels.Tensor, src kernels.HostRows, idx []int32) {
	const op = "GatherHostRows"
	if !b.ok() {
		return
	}
	D, S := b.t(op, dst), use[*hostRows](b, op, "host rows", src)
	if D == nil || S == nil || !b.check(op, kernels.CheckGatherHostRows(D, S, idx)) {
		return
	}
	f := S.cols
	b.pool.parallel(len(idx), b.rowGrain(f), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			j := int(idx[r])
			copy(D.data[r*f:(r+1)*f], S.data[j*f:(j+1)*f])
		}
	})
}
