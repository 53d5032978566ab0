package graphbolt

import (
	"fmt"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/storage"
)

// intReader reads a 1-D int32 or int64 array of a dataset with pread.
type intReader struct {
	f    *storage.ArrayFile
	wide bool
	buf  []byte

	win     []int64 // elements [winBase, winBase+len(win)) for at
	winBase int64
}

// windowElems is the read-ahead of at.
const windowElems = 1 << 15

func openInts(dir string, e *storage.FileEntry) (*intReader, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: %s: missing manifest entry", storage.ErrMismatch, dir)
	}
	if len(e.Shape) != 1 || (e.DType != "int32" && e.DType != "int64") {
		return nil, fmt.Errorf("%w: %s: %s%v, want a 1-D int32 or int64 array", storage.ErrMismatch, dir, e.DType, e.Shape)
	}
	f, err := storage.OpenArrayFile(dir, e)
	if err != nil {
		return nil, err
	}
	return &intReader{f: f, wide: e.DType == "int64"}, nil
}

func (r *intReader) close() { r.f.Close() }

func (r *intReader) len() int64 { return r.f.Entry.Shape[0] }

// read fills dst with elements start, start+1, ….
func (r *intReader) read(dst []int64, start int64) error {
	w := 4
	if r.wide {
		w = 8
	}
	n := len(dst) * w
	if n == 0 {
		return nil
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if err := r.f.ReadDataAt(b, start*int64(w)); err != nil {
		return err
	}
	if r.wide {
		copy(dst, unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(dst)))
		return nil
	}
	for i, x := range unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(dst)) {
		dst[i] = int64(x)
	}
	return nil
}

// at returns element i, reading ahead a window: a forward scan of
// ascending indices costs one read per window.
func (r *intReader) at(i int64) (int64, error) {
	if i < r.winBase || i >= r.winBase+int64(len(r.win)) {
		n := min(windowElems, r.len()-i)
		if n <= 0 {
			return 0, fmt.Errorf("%w: %s: element %d past the end (%d)", storage.ErrMismatch, r.f.Path, i, r.len())
		}
		if cap(r.win) < int(n) {
			r.win = make([]int64, windowElems)
		}
		r.win = r.win[:n]
		if err := r.read(r.win, i); err != nil {
			return 0, err
		}
		r.winBase = i
	}
	return r.win[i-r.winBase], nil
}
