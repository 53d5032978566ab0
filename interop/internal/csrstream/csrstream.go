// Package csrstream reads a dataset's CSR (indptr.npy, indices.npy) as a
// stream of edges in CSR order, with pread and fixed buffers: memory is
// O(chunk) whatever the graph's size or degrees, and the process keeps no
// resident pages of the arrays.
//
// Every value the stream indexes with is checked as it is read (indptr
// starts at 0, never decreases, ends at num_edges; every neighbour is in
// [0, N)); a violation is a *storage.CorruptError naming the file and
// element, never a panic.
package csrstream

import (
	"fmt"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/storage"
)

// ptrChunk is the number of indptr entries read at a time.
const ptrChunk = 1 << 14

// Reader streams the edges of one dataset. It is not safe for concurrent
// use.
type Reader struct {
	n, e    int64
	indptr  *storage.ArrayFile
	indices *storage.ArrayFile
	wide    bool // indices are int64

	ptr    []int64 // indptr[ptrBase : ptrBase+len(ptr)]
	ptrBuf []byte
	idxBuf []byte

	ptrBase int64 // node of ptr[0]
	row     int64 // node of the next edge
	pos     int64 // index of the next edge
	last    int64 // indptr value checked last (monotonicity)
}

// Open opens the CSR of the dataset in dir described by m.
func Open(dir string, m *storage.Manifest) (*Reader, error) {
	ie, xe := m.File(storage.FileIndptr), m.File(storage.FileIndices)
	if ie == nil || xe == nil {
		return nil, fmt.Errorf("%w: %s: manifest lacks %s or %s", storage.ErrMismatch, dir, storage.FileIndptr, storage.FileIndices)
	}
	ip, err := storage.OpenArrayFile(dir, ie)
	if err != nil {
		return nil, err
	}
	ix, err := storage.OpenArrayFile(dir, xe)
	if err != nil {
		ip.Close()
		return nil, err
	}
	r := &Reader{n: m.NumNodes, e: m.NumEdges, indptr: ip, indices: ix, wide: xe.DType == "int64"}
	w := int64(4)
	if r.wide {
		w = 8
	}
	if ip.DataBytes() != 8*(r.n+1) || ix.DataBytes() != w*r.e {
		r.Close()
		return nil, fmt.Errorf("%w: %s: indptr/indices sizes disagree with num_nodes %d / num_edges %d", storage.ErrMismatch, dir, r.n, r.e)
	}
	r.ptrBuf = make([]byte, 8*ptrChunk)
	r.Reset()
	return r, nil
}

// Close closes both files.
func (r *Reader) Close() error {
	err := r.indptr.Close()
	if err2 := r.indices.Close(); err == nil {
		err = err2
	}
	return err
}

// NumNodes and NumEdges are the graph's sizes.
func (r *Reader) NumNodes() int64 { return r.n }

// NumEdges is the number of directed edges stored.
func (r *Reader) NumEdges() int64 { return r.e }

// Reset rewinds the stream to the first edge.
func (r *Reader) Reset() {
	r.ptr, r.ptrBase, r.row, r.pos, r.last = nil, 0, 0, 0, 0
}

// ptrAt returns indptr[v] for v >= the current row, reading and checking
// the next chunk when needed.
func (r *Reader) ptrAt(v int64) (int64, error) {
	if v < r.ptrBase || v >= r.ptrBase+int64(len(r.ptr)) {
		base := v
		if r.ptr == nil {
			base = 0 // the first chunk starts at indptr[0], which must be 0
		}
		cnt := min(int64(ptrChunk), r.n+1-base)
		buf := r.ptrBuf[:8*cnt]
		if err := r.indptr.ReadDataAt(buf, 8*base); err != nil {
			return 0, err
		}
		r.ptr = unsafe.Slice((*int64)(unsafe.Pointer(&buf[0])), cnt)
		r.ptrBase = base
		for i, p := range r.ptr {
			at := base + int64(i)
			switch {
			case at == 0 && p != 0:
				return 0, &storage.CorruptError{File: r.indptr.Path, Field: "indptr", Index: 0, Offset: -1, Msg: fmt.Sprintf("is %d, want 0", p)}
			case p < r.last:
				return 0, &storage.CorruptError{File: r.indptr.Path, Field: "indptr", Index: at, Offset: -1, Msg: fmt.Sprintf("%d decreases (previous %d)", p, r.last)}
			case p > r.e || (at == r.n && p != r.e):
				return 0, &storage.CorruptError{File: r.indptr.Path, Field: "indptr", Index: at, Offset: -1, Msg: fmt.Sprintf("%d, want at most (and at indptr[N], exactly) num_edges %d", p, r.e)}
			}
			r.last = p
		}
	}
	return r.ptr[v-r.ptrBase], nil
}

// Next fills dst[i] (the CSR row, i.e. the node whose neighbour list holds
// the edge) and nbr[i] (the neighbour) for the next edges, at most
// min(len(dst), len(nbr)), and returns how many it filled; 0 at the end.
func (r *Reader) Next(dst, nbr []int64) (int, error) {
	want := int64(min(len(dst), len(nbr)))
	want = min(want, r.e-r.pos)
	if want <= 0 {
		return 0, nil
	}
	w := int64(4)
	if r.wide {
		w = 8
	}
	if int64(cap(r.idxBuf)) < want*w {
		r.idxBuf = make([]byte, want*w)
	}
	buf := r.idxBuf[:want*w]
	if err := r.indices.ReadDataAt(buf, r.pos*w); err != nil {
		return 0, err
	}
	if r.wide {
		copy(nbr, unsafe.Slice((*int64)(unsafe.Pointer(&buf[0])), want))
	} else {
		for i, x := range unsafe.Slice((*int32)(unsafe.Pointer(&buf[0])), want) {
			nbr[i] = int64(x)
		}
	}
	for i := range want {
		if u := nbr[i]; u < 0 || u >= r.n {
			return 0, &storage.CorruptError{File: r.indices.Path, Field: "indices", Index: r.pos + i, Offset: -1,
				Msg: fmt.Sprintf("node id %d out of range [0,%d)", u, r.n)}
		}
	}
	// Assign rows: advance r.row while its list ends at or before the edge.
	for i := range want {
		e := r.pos + i
		for {
			end, err := r.ptrAt(r.row + 1)
			if err != nil {
				return 0, err
			}
			if e < end {
				break
			}
			r.row++
			if r.row >= r.n {
				return 0, &storage.CorruptError{File: r.indptr.Path, Field: "indptr", Index: r.n, Offset: -1, Msg: fmt.Sprintf("edge %d lies past the last row", e)}
			}
		}
		dst[i] = r.row
	}
	r.pos += want
	return int(want), nil
}
