// Package intarray reads 1-D int32 or int64 arrays of a dataset with
// pread and a fixed read-ahead window, converting to int64: sequential
// chunks (Read) or ascending random access (At).
package intarray

import (
	"fmt"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/storage"
)

// Reader reads a 1-D int32 or int64 array of a dataset with pread.
type Reader struct {
	f    *storage.ArrayFile
	wide bool
	buf  []byte

	win     []int64 // elements [winBase, winBase+len(win)) for at
	winBase int64
}

// windowElems is the read-ahead of at.
const windowElems = 1 << 15

// Open opens array e of dir after checking it against e.
func Open(dir string, e *storage.FileEntry) (*Reader, error) {
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
	return &Reader{f: f, wide: e.DType == "int64"}, nil
}

// Close closes the file.
func (r *Reader) Close() { r.f.Close() }

// Path is the file's path, for errors.
func (r *Reader) Path() string { return r.f.Path }

// Len is the number of elements.
func (r *Reader) Len() int64 { return r.f.Entry.Shape[0] }

// Read fills dst with elements start, start+1, ….
func (r *Reader) Read(dst []int64, start int64) error {
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

// At returns element i, reading ahead a window: a forward scan of
// ascending indices costs one read per window.
func (r *Reader) At(i int64) (int64, error) {
	if i < r.winBase || i >= r.winBase+int64(len(r.win)) {
		n := min(windowElems, r.Len()-i)
		if n <= 0 {
			return 0, fmt.Errorf("%w: %s: element %d past the end (%d)", storage.ErrMismatch, r.f.Path, i, r.Len())
		}
		if cap(r.win) < int(n) {
			r.win = make([]int64, windowElems)
		}
		r.win = r.win[:n]
		if err := r.Read(r.win, i); err != nil {
			return 0, err
		}
		r.winBase = i
	}
	return r.win[i-r.winBase], nil
}
