package kernels

import "fmt"

// HostRows is a rows×cols float32 host buffer registered with a
// HostGatherer. It is a handle of the backend that registered it: passing
// it to another backend fails with ErrForeignTensor, and using it after
// UnregisterHostRows with ErrFreed.
type HostRows interface {
	Rows() int
	Cols() int
}

// HostGatherer is an optional Backend capability: gathering rows of a
// registered host buffer straight into a tensor. The CUDA backend reads the
// rows over PCIe from page-locked, device-mapped memory (zero-copy through
// unified virtual addressing) or, where the device cannot map host memory,
// through a pinned staging ring; the CPU backend copies them. Callers find
// it with a type assertion on their Backend.
//
// Invariants:
//   - The caller keeps data alive, unmoved and unresized from
//     RegisterHostRows until UnregisterHostRows returns, and does not write
//     rows that a queued gather may still read (a backend may read them
//     asynchronously, until its next sync point). Memory outside the Go
//     heap (an mmap'd cache array) is the natural choice.
//   - Registering does not copy and does not count towards MemStats: the
//     buffer is the caller's memory. A backend may page-lock it, so callers
//     register large buffers once, not per batch.
//   - GatherHostRows(dst, src, idx) sets dst[r] = src[idx[r]] and is bit
//     for bit what Upload of src followed by GatherRows gives. idx is read
//     before the call returns and may be reused afterwards.
//   - Errors follow the Backend contract: shape and index errors (ErrShape,
//     ErrInvalidArg) and foreign or freed handles are recorded as the
//     backend's sticky error by GatherHostRows, and returned by
//     RegisterHostRows and UnregisterHostRows (which are not sticky).
type HostGatherer interface {
	// RegisterHostRows registers data, len(data)/cols rows of cols values
	// (cols >= 1, len(data) a multiple of cols).
	RegisterHostRows(data []float32, cols int) (HostRows, error)
	// GatherHostRows sets dst[r] = src[idx[r]]; dst is len(idx)×src.Cols()
	// and every index is in [0, src.Rows()).
	GatherHostRows(dst Tensor, src HostRows, idx []int32)
	// UnregisterHostRows waits for queued work that may read h and
	// releases the registration; h must not be used afterwards. A second
	// call fails with ErrFreed.
	UnregisterHostRows(h HostRows) error
}

// CheckRegisterHostRows checks RegisterHostRows' arguments: cols >= 1 and n
// (the number of values) a multiple of cols.
func CheckRegisterHostRows(n, cols int) error {
	if cols < 1 || n%cols != 0 {
		return fmt.Errorf("%w: %d values are not rows of %d", ErrInvalidArg, n, cols)
	}
	return nil
}

// CheckGatherHostRows checks GatherHostRows: dst is len(idx)×src.Cols() and
// every index is in [0, src.Rows()) (ErrShape, then ErrInvalidArg naming
// the first bad index).
func CheckGatherHostRows(dst Tensor, src HostRows, idx []int32) error {
	if err := CheckShape("dst", dst, len(idx), src.Cols()); err != nil {
		return err
	}
	return CheckIndexValues(idx, src.Rows())
}

// HostFootprint is implemented by backends that hold host memory of their
// own, outside the tensors and buffers the caller allocates and counts: a
// GPU driver's context, its loaded modules, pinned staging buffers. A
// process budget (train's --mem) must leave room for it.
type HostFootprint interface {
	// HostBytes is the resident host memory the process gained while the
	// backend was opened (measured then, not estimated).
	HostBytes() int64
}
