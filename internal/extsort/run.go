package extsort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/cespare/xxhash/v2"
)

// Run file layout; see docs/format.md, "External-sort run files".
const (
	runPattern   = "ssdgnn-sort-*.run"
	runMagic     = "SSDGSORT"
	runVersion   = 1
	headerSize   = 16
	blockHdrSize = 16
)

// encoding is the record layout of a run.
type encoding uint16

const (
	encPacked encoding = 1 // one uint64: src<<32 | dst
	encWide   encoding = 2 // two uint64: src, dst
)

func (e encoding) recSize() int {
	if e == encPacked {
		return 8
	}
	return 16
}

// maxBlockRecords is the most records one block of encoding e holds.
func (e encoding) maxBlockRecords() int { return (BlockSize - blockHdrSize) / e.recSize() }

func packEdge(e Edge) uint64 { return uint64(e.Src)<<32 | uint64(e.Dst) }

func unpackEdge(k uint64) Edge { return Edge{Src: int64(k >> 32), Dst: int64(k & math.MaxUint32)} }

// run describes a finished run file.
type run struct {
	path    string
	enc     encoding
	records int64
}

// runWriter writes one run file through a BlockSize buffer.
type runWriter struct {
	f     *os.File
	path  string
	enc   encoding
	buf   []byte // block being filled; header bytes reserved at the front
	n     int    // records in buf
	max   int    // records per block
	total int64
	bytes int64 // bytes written to the file
}

// createRun creates a new run file in dir. On error no file is left.
func createRun(dir string, enc encoding) (*runWriter, error) {
	f, err := os.CreateTemp(dir, runPattern)
	if err != nil {
		return nil, fmt.Errorf("extsort: create run: %w", err)
	}
	w := &runWriter{f: f, path: f.Name(), enc: enc, buf: make([]byte, BlockSize), max: enc.maxBlockRecords()}
	var hdr [headerSize]byte
	copy(hdr[:8], runMagic)
	binary.LittleEndian.PutUint16(hdr[8:], runVersion)
	binary.LittleEndian.PutUint16(hdr[10:], uint16(enc))
	if err := w.write(hdr[:]); err != nil {
		w.abort()
		return nil, err
	}
	return w, nil
}

func (w *runWriter) write(p []byte) error {
	n, err := w.f.Write(p)
	w.bytes += int64(n)
	if err != nil {
		return fmt.Errorf("extsort: write run: %w", err)
	}
	return nil
}

func (w *runWriter) putKey(k uint64) error {
	off := blockHdrSize + w.n*8
	binary.LittleEndian.PutUint64(w.buf[off:], k)
	w.n++
	if w.n == w.max {
		return w.flush()
	}
	return nil
}

func (w *runWriter) putEdge(e Edge) error {
	if w.enc == encPacked {
		return w.putKey(packEdge(e))
	}
	off := blockHdrSize + w.n*16
	binary.LittleEndian.PutUint64(w.buf[off:], uint64(e.Src))
	binary.LittleEndian.PutUint64(w.buf[off+8:], uint64(e.Dst))
	w.n++
	if w.n == w.max {
		return w.flush()
	}
	return nil
}

func (w *runWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	end := blockHdrSize + w.n*w.enc.recSize()
	binary.LittleEndian.PutUint32(w.buf[0:], uint32(w.n))
	binary.LittleEndian.PutUint32(w.buf[4:], 0)
	binary.LittleEndian.PutUint64(w.buf[8:], xxhash.Sum64(w.buf[blockHdrSize:end]))
	w.total += int64(w.n)
	w.n = 0
	return w.write(w.buf[:end])
}

// finish writes the end marker and closes the file. On error the caller
// must still call abort.
func (w *runWriter) finish() (run, error) {
	if err := w.flush(); err != nil {
		return run{}, err
	}
	var end [blockHdrSize]byte
	binary.LittleEndian.PutUint64(end[8:], uint64(w.total))
	if err := w.write(end[:]); err != nil {
		return run{}, err
	}
	f := w.f
	w.f = nil
	if err := f.Close(); err != nil {
		return run{}, fmt.Errorf("extsort: close run: %w", err)
	}
	return run{path: w.path, enc: w.enc, records: w.total}, nil
}

// abort closes and removes the file.
func (w *runWriter) abort() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	_ = os.Remove(w.path)
}

// runReader streams the records of one run file, verifying each block
// before returning any of its records.
type runReader struct {
	f       *os.File
	path    string
	enc     encoding
	ord     order  // the order records must be in
	buf     []byte // BlockSize
	payload []byte // verified, unread part of the current block
	off     int64  // file offset of the next block header
	blkOff  int64  // file offset of the current block, for errors
	total   int64  // records returned so far
	prev    Edge
	started bool
	done    bool
}

// order is the order of a run's records.
type order uint8

const (
	orderAsc    order = iota // ascending (Src, Dst), repeats allowed
	orderStrict              // strictly ascending (Src, Dst): Dedup
	orderByRow               // ascending Src, any Dst order: ByRow
)

func openRun(path string, ord order) (*runReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("extsort: open run: %w", err)
	}
	r := &runReader{f: f, path: path, ord: ord, buf: make([]byte, BlockSize)}
	if err := r.readHeader(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return r, nil
}

func (r *runReader) corrupt(off int64, format string, args ...any) error {
	return &CorruptError{Path: r.path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// readFull reads len(p) bytes; a short file is corruption, not EOF.
func (r *runReader) readFull(p []byte, what string) error {
	_, err := io.ReadFull(r.f, p)
	switch {
	case err == nil:
		r.off += int64(len(p))
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return r.corrupt(r.off, "truncated %s", what)
	default:
		return fmt.Errorf("extsort: read run %s: %w", r.path, err)
	}
}

func (r *runReader) readHeader() error {
	hdr := r.buf[:headerSize]
	if err := r.readFull(hdr, "header"); err != nil {
		return err
	}
	if string(hdr[:8]) != runMagic {
		return r.corrupt(0, "bad magic %q", hdr[:8])
	}
	if v := binary.LittleEndian.Uint16(hdr[8:]); v != runVersion {
		return r.corrupt(0, "unsupported version %d", v)
	}
	switch enc := encoding(binary.LittleEndian.Uint16(hdr[10:])); enc {
	case encPacked, encWide:
		r.enc = enc
	default:
		return r.corrupt(0, "unknown encoding %d", enc)
	}
	if binary.LittleEndian.Uint32(hdr[12:]) != 0 {
		return r.corrupt(0, "nonzero reserved header field")
	}
	return nil
}

// loadBlock reads and verifies the next block. It returns false at a valid
// end marker.
func (r *runReader) loadBlock() (bool, error) {
	r.blkOff = r.off
	hdr := r.buf[:blockHdrSize]
	if err := r.readFull(hdr, "block header"); err != nil {
		return false, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[0:]))
	if binary.LittleEndian.Uint32(hdr[4:]) != 0 {
		return false, r.corrupt(r.blkOff, "nonzero reserved block field")
	}
	sum := binary.LittleEndian.Uint64(hdr[8:])
	if n == 0 {
		if sum != uint64(r.total) {
			return false, r.corrupt(r.blkOff, "end marker counts %d records, read %d", sum, r.total)
		}
		var one [1]byte
		if k, err := r.f.Read(one[:]); k != 0 || (err != nil && !errors.Is(err, io.EOF)) {
			if err != nil && !errors.Is(err, io.EOF) {
				return false, fmt.Errorf("extsort: read run %s: %w", r.path, err)
			}
			return false, r.corrupt(r.off, "data after end marker")
		}
		return false, nil
	}
	if n > r.enc.maxBlockRecords() {
		return false, r.corrupt(r.blkOff, "block of %d records exceeds maximum %d", n, r.enc.maxBlockRecords())
	}
	p := r.buf[blockHdrSize : blockHdrSize+n*r.enc.recSize()]
	if err := r.readFull(p, "block"); err != nil {
		return false, err
	}
	if got := xxhash.Sum64(p); got != sum {
		return false, r.corrupt(r.blkOff, "block checksum %#x, want %#x", got, sum)
	}
	r.payload = p
	return true, nil
}

// next returns the next record, or false at the end of the run or on error.
func (r *runReader) next() (Edge, bool, error) {
	if len(r.payload) == 0 {
		if r.done {
			return Edge{}, false, nil
		}
		ok, err := r.loadBlock()
		if err != nil || !ok {
			r.done = true
			return Edge{}, false, err
		}
	}
	var e Edge
	if r.enc == encPacked {
		e = unpackEdge(binary.LittleEndian.Uint64(r.payload))
		r.payload = r.payload[8:]
	} else {
		s, d := binary.LittleEndian.Uint64(r.payload), binary.LittleEndian.Uint64(r.payload[8:])
		r.payload = r.payload[16:]
		if s > math.MaxInt64 || d > math.MaxInt64 {
			r.done = true
			return Edge{}, false, r.corrupt(r.blkOff, "negative id")
		}
		e = Edge{Src: int64(s), Dst: int64(d)}
	}
	if r.started {
		bad := false
		switch c := cmpEdge(r.prev, e); r.ord {
		case orderByRow:
			bad = r.prev.Src > e.Src
		case orderStrict:
			bad = c >= 0
		default:
			bad = c > 0
		}
		if bad {
			r.done = true
			return Edge{}, false, r.corrupt(r.blkOff, "records out of order: %v then %v", r.prev, e)
		}
	}
	r.prev, r.started = e, true
	r.total++
	return e, true, nil
}

func (r *runReader) close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	r.buf, r.payload = nil, nil
	return err
}
