package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadMode selects how a RowReader fetches bytes.
type ReadMode int

// Read modes.
const (
	// ReadBuffered preads exactly the requested bytes through the page
	// cache.
	ReadBuffered ReadMode = iota
	// ReadDirect opens the file with O_DIRECT and reads the aligned blocks
	// that contain the requested bytes, bypassing the page cache. Bytes
	// read is then exact and independent of what the page cache holds.
	ReadDirect
	// ReadAuto is ReadDirect where the file system accepts O_DIRECT and
	// ReadBuffered where it refuses it (tmpfs, some overlay file
	// systems). RowReader.Mode says which one a reader got.
	ReadAuto
)

// String names the mode as the CLI spells it.
func (m ReadMode) String() string {
	switch m {
	case ReadDirect:
		return "direct"
	case ReadAuto:
		return "auto"
	}
	return "buffered"
}

// ParseReadMode parses "buffered", "direct" or "auto".
func ParseReadMode(s string) (ReadMode, error) {
	switch s {
	case "buffered", "":
		return ReadBuffered, nil
	case "direct":
		return ReadDirect, nil
	case "auto":
		return ReadAuto, nil
	}
	return 0, fmt.Errorf("storage: read mode %q: want auto, buffered or direct", s)
}

// ErrDirectUnsupported is returned when the file system refuses O_DIRECT
// (tmpfs, some overlay file systems).
var ErrDirectUnsupported = errors.New("storage: O_DIRECT not supported on this file system")

// directAlign is the alignment of O_DIRECT buffers, and of offsets and
// lengths where the file system does not report its own (statx
// STATX_DIOALIGN, Linux 6.1+). 4 KiB covers every NVMe logical block size
// in use.
const directAlign = 4096

// dioOffsetAlign is the O_DIRECT offset and length alignment of f: the
// file system's stx_dio_offset_align when it reports one that divides
// directAlign, else directAlign. On a device with 512-byte logical blocks
// a 512-byte feature row then costs 512 or 1024 bytes of I/O, not 4096.
func dioOffsetAlign(f *os.File) int64 {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st); err != nil {
		return directAlign
	}
	a := int64(st.Dio_offset_align)
	if st.Mask&unix.STATX_DIOALIGN == 0 || a <= 0 || a > directAlign || directAlign%a != 0 ||
		st.Dio_mem_align == 0 || directAlign%int64(st.Dio_mem_align) != 0 {
		return directAlign
	}
	return a
}

// RowReader reads rows of one array file with pread, bypassing the
// mapping. It is safe for concurrent use. Every read is counted on its
// StageCounters: requested bytes, and bytes read from the file (for
// ReadDirect, the aligned blocks).
type RowReader struct {
	name     string
	f        *os.File
	mode     ReadMode
	dataOff  int64
	dataEnd  int64
	rowBytes int64
	align    int64 // ReadDirect offset and length alignment (dioOffsetAlign)
	stage    *StageCounters
	bufs     sync.Pool // *[]byte aligned scratch for ReadDirect
	engine   IOEngine  // ReadScattered's submission (SetEngine); IOAuto until set: pread
	sessMu   sync.Mutex
	sessions []*session // idle ReadScattered state, counted in memacct.BatchBuffers
}

// OpenRowReader opens file name of the dataset for pread access. rowBytes
// is the unit ReadRows reads (a feature row, or one id for indices).
// stage receives the counts; nil uses the dataset's "gather" stage.
func (d *Dataset) OpenRowReader(name string, mode ReadMode, stage *StageCounters) (*RowReader, error) {
	if mode == ReadAuto {
		r, err := d.OpenRowReader(name, ReadDirect, stage)
		if errors.Is(err, ErrDirectUnsupported) {
			return d.OpenRowReader(name, ReadBuffered, stage)
		}
		return r, err
	}
	e := d.m.File(name)
	if e == nil {
		return nil, fmt.Errorf("storage: dataset has no %s", name)
	}
	flags := os.O_RDONLY
	if mode == ReadDirect {
		flags |= unix.O_DIRECT
	}
	path := filepath.Join(d.dir, name)
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if mode == ReadDirect && errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: %s", ErrDirectUnsupported, path)
		}
		return nil, fmt.Errorf("storage: %w", err)
	}
	// The file is opened by path after Open mapped the dataset: one
	// replaced in between (gen, import or relabel --force) would be read
	// with the old manifest's shapes, unnoticed.
	if err := ManifestUnchanged(d.dir, d.manSum); err != nil {
		f.Close()
		return nil, err
	}
	var rowBytes int64
	switch name {
	case FileFeatures:
		rowBytes = d.rowSize
	default:
		rowBytes = int64(elemSize(e.DType))
		if len(e.Shape) == 2 {
			rowBytes *= e.Shape[1]
		}
	}
	if stage == nil {
		stage = d.acct.Stage(StageGather)
	}
	r := &RowReader{name: path, f: f, mode: mode, dataOff: e.DataOffset, dataEnd: e.Bytes, rowBytes: rowBytes, align: directAlign, stage: stage}
	if mode == ReadDirect {
		r.align = dioOffsetAlign(f)
		// Probe once: some file systems accept the flag and fail reads.
		var probe [1]byte
		if err := r.readAt(probe[:], 0); err != nil {
			f.Close()
			if errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("%w: %s", ErrDirectUnsupported, path)
			}
			return nil, err
		}
	}
	return r, nil
}

func elemSize(dtype string) int {
	switch dtype {
	case "int64", "uint64", "float64":
		return 8
	case "int32", "uint32", "float32":
		return 4
	case "int16", "uint16", "float16":
		return 2
	}
	return 1
}

// Mode is how the reader reads: ReadBuffered or ReadDirect (ReadAuto
// resolves to one of them at OpenRowReader).
func (r *RowReader) Mode() ReadMode { return r.mode }

// DirectAlign is the offset and length alignment of ReadDirect reads (0
// for ReadBuffered).
func (r *RowReader) DirectAlign() int64 {
	if r.mode != ReadDirect {
		return 0
	}
	return r.align
}

// RowBytes is the size of one row.
func (r *RowReader) RowBytes() int64 { return r.rowBytes }

// Close releases ReadScattered's scratch and rings and closes the file.
// No read may be running.
func (r *RowReader) Close() error {
	r.closeSessions()
	return r.f.Close()
}

// ReadRows reads the rows ids into dst, which must hold len(ids)*RowBytes
// bytes, in order.
func (r *RowReader) ReadRows(ids []int64, dst []byte) error {
	if int64(len(dst)) < int64(len(ids))*r.rowBytes {
		return fmt.Errorf("storage: ReadRows: dst holds %d bytes, need %d", len(dst), int64(len(ids))*r.rowBytes)
	}
	for i, id := range ids {
		if err := r.ReadRange(id, 1, dst[int64(i)*r.rowBytes:int64(i+1)*r.rowBytes]); err != nil {
			return err
		}
	}
	return nil
}

// ReadRange reads n consecutive rows starting at row first into dst.
func (r *RowReader) ReadRange(first, n int64, dst []byte) error {
	return r.readRange(first, n, dst, n)
}

// readRange is ReadRange counting requests requests of the range's bytes.
func (r *RowReader) readRange(first, n int64, dst []byte, requests int64) error {
	want := n * r.rowBytes
	if first < 0 || n < 0 || r.dataOff+(first+n)*r.rowBytes > r.dataEnd {
		return fmt.Errorf("storage: %s: rows [%d,%d) out of range", r.name, first, first+n)
	}
	r.stage.Request(requests, want)
	return r.readAt(dst[:want], first*r.rowBytes)
}

// readAt reads len(dst) data bytes at data offset off.
func (r *RowReader) readAt(dst []byte, off int64) error {
	pos := r.dataOff + off
	if r.mode == ReadBuffered {
		if _, err := r.f.ReadAt(dst, pos); err != nil {
			return fmt.Errorf("storage: read %s at byte %d: %w", r.name, pos, ShortRead(err))
		}
		r.stage.Read(int64(len(dst)))
		return nil
	}
	start := pos &^ (r.align - 1)
	end := (pos + int64(len(dst)) + r.align - 1) &^ (r.align - 1)
	buf := r.alignedBuf(int(end - start))
	defer r.bufs.Put(buf)
	b := (*buf)[:end-start]
	got, err := r.f.ReadAt(b, start)
	// The last block of a file is short; that is expected.
	if int64(got) < pos+int64(len(dst))-start {
		if err == nil {
			err = fmt.Errorf("short read")
		}
		return fmt.Errorf("storage: read %s at byte %d: %w", r.name, pos, ShortRead(err))
	}
	r.stage.Read(int64(got))
	copy(dst, b[pos-start:])
	return nil
}

// alignedBuf returns a scratch buffer of at least n bytes whose first byte
// is directAlign-aligned.
func (r *RowReader) alignedBuf(n int) *[]byte {
	if p, ok := r.bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	raw := make([]byte, n+directAlign)
	shift := int(directAlign-uintptr(unsafe.Pointer(&raw[0]))%directAlign) % directAlign
	b := raw[shift : shift+n : shift+n]
	return &b
}

// ReadNeighbors reads v's neighbour list with r, a reader of indices.npy,
// into buf, and returns a view of it. The indptr lookup uses the mapping;
// only the list itself is read with pread. r's stage counts the list as
// one request of its bytes (an empty list too, with no read), as the
// mapping and batch sources count lists, not their ids.
func (d *Dataset) ReadNeighbors(r *RowReader, v int64, buf []byte) (NodeList, []byte, error) {
	lo, hi := d.indptr[v], d.indptr[v+1]
	n := hi - lo
	need := int(n * r.rowBytes)
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	if n == 0 {
		r.stage.Request(1, 0)
		return NodeList{}, buf, nil
	}
	if err := r.readRange(lo, n, buf, 1); err != nil {
		return NodeList{}, buf, err
	}
	if r.rowBytes == 4 {
		return NodeList{i32: unsafe.Slice((*int32)(unsafe.Pointer(&buf[0])), n)}, buf, nil
	}
	return NodeList{i64: unsafe.Slice((*int64)(unsafe.Pointer(&buf[0])), n)}, buf, nil
}
