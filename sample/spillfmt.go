package sample

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/decbuf"
)

// Spill file constants (docs/format.md specifies the format).
const (
	SpillMagic   = "SSDGSPIL"
	SpillVersion = 3
	// spillEnd is the length value of the end marker.
	spillEnd = math.MaxUint64
	// maxSpillRecord bounds one record's payload (16 GiB).
	maxSpillRecord = 1 << 34
	// maxSpillLayers bounds the number of blocks per batch.
	maxSpillLayers = 1 << 10
	spillHeaderLen = 16
	numStatFields  = 17
)

// SpillWriter encodes batches into a spill stream. It is not safe for
// concurrent use.
type SpillWriter struct {
	w       *bufio.Writer
	buf     []byte
	records int64
	off     int64
	err     error
}

// NewSpillWriter writes the file header to w and returns a writer.
func NewSpillWriter(w io.Writer) (*SpillWriter, error) {
	sw := &SpillWriter{w: bufio.NewWriterSize(w, 1<<20)}
	var h [spillHeaderLen]byte
	copy(h[:], SpillMagic)
	binary.LittleEndian.PutUint32(h[8:], SpillVersion)
	if _, err := sw.w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("sample: spill: %w", err)
	}
	sw.off = spillHeaderLen
	return sw, nil
}

func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// Write appends one batch record.
func (sw *SpillWriter) Write(b *Batch) error {
	if sw.err != nil {
		return sw.err
	}
	p := sw.buf[:0]
	p = appendU64(p, uint64(b.Epoch))
	p = appendU64(p, uint64(b.Index))
	p = appendU64(p, uint64(int64(b.Macro)))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(b.Blocks)))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(b.Reused)))
	nodes := b.Nodes()
	p = appendU64(p, uint64(len(nodes)))
	for _, v := range nodes {
		p = appendU64(p, uint64(v))
	}
	for i := range b.Blocks {
		blk := &b.Blocks[i]
		p = appendU64(p, uint64(blk.NumDst))
		p = appendU64(p, uint64(len(blk.Src)))
		p = appendU64(p, uint64(len(blk.Indices)))
		for _, x := range blk.Indptr {
			p = appendU64(p, uint64(x))
		}
		for _, x := range blk.Indices {
			p = binary.LittleEndian.AppendUint32(p, uint32(x))
		}
	}
	for _, x := range b.Reused {
		p = binary.LittleEndian.AppendUint32(p, uint32(x))
	}
	for _, x := range statFields(&b.Stats) {
		p = appendU64(p, uint64(*x))
	}
	p = appendU64(p, math.Float64bits(b.SampleSeconds))
	p = appendU64(p, uint64(b.DynamicBytes))
	sw.buf = p
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(p)))
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], xxhash.Sum64(p))
	for _, part := range [][]byte{hdr[:], p, sum[:]} {
		if _, err := sw.w.Write(part); err != nil {
			sw.err = fmt.Errorf("sample: spill: %w", err)
			return sw.err
		}
	}
	sw.records++
	sw.off += int64(16 + len(p))
	return nil
}

// Flush writes buffered records to the underlying writer.
func (sw *SpillWriter) Flush() error {
	if sw.err != nil {
		return sw.err
	}
	if err := sw.w.Flush(); err != nil {
		sw.err = fmt.Errorf("sample: spill: %w", err)
	}
	return sw.err
}

// Finish writes the end marker (length 2^64-1, then the record count) and
// flushes.
func (sw *SpillWriter) Finish() error {
	if sw.err != nil {
		return sw.err
	}
	var end [16]byte
	binary.LittleEndian.PutUint64(end[:], spillEnd)
	binary.LittleEndian.PutUint64(end[8:], uint64(sw.records))
	if _, err := sw.w.Write(end[:]); err != nil {
		sw.err = fmt.Errorf("sample: spill: %w", err)
		return sw.err
	}
	return sw.Flush()
}

func statFields(s *LookupStats) [numStatFields]*int64 {
	return [numStatFields]*int64{&s.Lookups,
		&s.Global.Hits, &s.Global.Misses, &s.Global.BytesSaved, &s.Global.BytesRead,
		&s.Dynamic.Hits, &s.Dynamic.Misses, &s.Dynamic.BytesSaved, &s.Dynamic.BytesRead,
		&s.Storage.Hits, &s.Storage.Misses, &s.Storage.BytesSaved, &s.Storage.BytesRead,
		&s.LoadBytes,
		&s.Global.Sampled, &s.Dynamic.Sampled, &s.Storage.Sampled}
}

// SpillReader decodes a spill stream record by record, verifying each
// record's checksum and structure.
type SpillReader struct {
	r       *bufio.Reader
	name    string
	off     int64
	records int64
	buf     []byte
	done    bool
}

// NewSpillReader reads and checks the header of the spill stream r; name
// is used in errors.
func NewSpillReader(r io.Reader, name string) (*SpillReader, error) {
	sr := &SpillReader{r: bufio.NewReaderSize(r, 1<<20), name: name}
	var h [spillHeaderLen]byte
	if _, err := io.ReadFull(sr.r, h[:]); err != nil {
		return nil, sr.corrupt(0, "header: %v", err)
	}
	if string(h[:8]) != SpillMagic {
		return nil, sr.corrupt(0, "bad magic %q", h[:8])
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != SpillVersion {
		return nil, sr.corrupt(8, "version %d, this build reads %d", v, SpillVersion)
	}
	if f := binary.LittleEndian.Uint32(h[12:]); f != 0 {
		return nil, sr.corrupt(12, "reserved header field %#x, want 0", f)
	}
	sr.off = spillHeaderLen
	return sr, nil
}

func (sr *SpillReader) corrupt(off int64, format string, args ...any) error {
	return &CorruptError{File: sr.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Offset is the byte offset of the next record.
func (sr *SpillReader) Offset() int64 { return sr.off }

// Next decodes the next batch; io.EOF after the end marker. A stream that
// ends without the end marker is corrupt (truncated).
func (sr *SpillReader) Next() (*Batch, error) {
	if sr.done {
		return nil, io.EOF
	}
	start := sr.off
	var hdr [8]byte
	if _, err := io.ReadFull(sr.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, sr.corrupt(start, "truncated: record length missing (no end marker)")
		}
		return nil, fmt.Errorf("sample: read %s at byte %d: %w", sr.name, start, err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n == spillEnd {
		var cnt [8]byte
		if _, err := io.ReadFull(sr.r, cnt[:]); err != nil {
			return nil, sr.corrupt(start, "truncated end marker")
		}
		if c := binary.LittleEndian.Uint64(cnt[:]); c != uint64(sr.records) {
			return nil, sr.corrupt(start, "end marker counts %d records, read %d", c, sr.records)
		}
		sr.done = true
		return nil, io.EOF
	}
	if n > maxSpillRecord {
		return nil, sr.corrupt(start, "record length %d exceeds %d", n, int64(maxSpillRecord))
	}
	// Grow the buffer as bytes actually arrive, so a corrupt length
	// cannot force a huge allocation.
	sr.buf = sr.buf[:0]
	for remaining := int64(n) + 8; remaining > 0; {
		chunk := min(remaining, 1<<20)
		l := len(sr.buf)
		sr.buf = append(sr.buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(sr.r, sr.buf[l:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, sr.corrupt(start, "truncated record: %d payload bytes announced", n)
			}
			return nil, fmt.Errorf("sample: read %s at byte %d: %w", sr.name, start, err)
		}
		remaining -= chunk
	}
	payload := sr.buf[:n]
	if got, want := xxhash.Sum64(payload), binary.LittleEndian.Uint64(sr.buf[n:]); got != want {
		return nil, sr.corrupt(start, "checksum mismatch: xxhash64 %016x, stored %016x", got, want)
	}
	b, err := decodeBatch(payload)
	if err != nil {
		return nil, sr.corrupt(start, "%v", err)
	}
	sr.off += int64(n) + 16
	sr.records++
	return b, nil
}

// decoder names the field of a record that runs short; the reading and the
// sticky error are internal/decbuf's.
type decoder struct {
	decbuf.Decbuf
}

// need reports whether n more bytes of field what are there, recording
// the error when they are not.
func (d *decoder) need(n uint64, what string) bool {
	if d.Err() != nil {
		return false
	}
	if n > uint64(d.Len()) {
		d.Fail(fmt.Errorf("%s: need %d bytes, %d left in record", what, n, d.Len()))
		return false
	}
	return true
}

func (d *decoder) u64(what string) uint64 {
	if !d.need(8, what) {
		return 0
	}
	return d.U64()
}

func (d *decoder) u32(what string) uint32 {
	if !d.need(4, what) {
		return 0
	}
	return d.U32()
}

func (d *decoder) i64s(n uint64, what string) []int64 {
	if n > math.MaxInt64/8 {
		d.Fail(fmt.Errorf("%s: %d entries do not fit", what, n))
	}
	if !d.need(n*8, what) {
		return nil
	}
	b := d.Bytes(int(8 * n))
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func (d *decoder) i32s(n uint64, what string) []int32 {
	if n > math.MaxInt64/4 {
		d.Fail(fmt.Errorf("%s: %d entries do not fit", what, n))
	}
	if !d.need(n*4, what) {
		return nil
	}
	b := d.Bytes(int(4 * n))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// decodeBatch decodes and validates one record payload.
func decodeBatch(p []byte) (*Batch, error) {
	d := &decoder{*decbuf.New(p, 0)}
	b := &Batch{}
	b.Epoch = int(int64(d.u64("epoch")))
	b.Index = int(int64(d.u64("index")))
	b.Macro = int(int64(d.u64("macro")))
	L := d.u32("layers")
	R := d.u32("reused count")
	nn := d.u64("node count")
	if d.Err() == nil && (L == 0 || L > maxSpillLayers) {
		d.Fail(fmt.Errorf("layers %d, want in [1,%d]", L, maxSpillLayers))
	}
	if d.Err() == nil && nn > math.MaxInt32 {
		d.Fail(fmt.Errorf("node count %d exceeds 2^31-1", nn))
	}
	nodes := d.i64s(nn, "nodes")
	if d.Err() != nil {
		return nil, d.Err()
	}
	b.Blocks = make([]Block, L)
	for l := range b.Blocks {
		blk := &b.Blocks[l]
		nd, ns, ne := d.u64("dst count"), d.u64("src count"), d.u64("edge count")
		if d.Err() != nil {
			return nil, d.Err()
		}
		if ns > nn || nd > ns {
			return nil, fmt.Errorf("block %d: %d dst, %d src of %d nodes", l, nd, ns, nn)
		}
		if l == 0 && ns != nn {
			return nil, fmt.Errorf("block 0: %d src, want all %d nodes", ns, nn)
		}
		if l > 0 && ns != uint64(b.Blocks[l-1].NumDst) {
			return nil, fmt.Errorf("block %d: %d src, want block %d's %d dst", l, ns, l-1, b.Blocks[l-1].NumDst)
		}
		blk.NumDst = int(nd)
		blk.Src = nodes[:ns:ns]
		blk.Indptr = d.i64s(nd+1, "indptr")
		blk.Indices = d.i32s(ne, "indices")
		if d.Err() != nil {
			return nil, fmt.Errorf("block %d: %w", l, d.Err())
		}
		if blk.Indptr[0] != 0 || blk.Indptr[nd] != int64(ne) {
			return nil, fmt.Errorf("block %d: indptr runs %d..%d, want 0..%d", l, blk.Indptr[0], blk.Indptr[nd], ne)
		}
		for i := uint64(0); i < nd; i++ {
			if blk.Indptr[i] > blk.Indptr[i+1] {
				return nil, fmt.Errorf("block %d: indptr decreases at %d", l, i)
			}
		}
		for i, x := range blk.Indices {
			if x < 0 || uint64(x) >= ns {
				return nil, fmt.Errorf("block %d: indices[%d] = %d out of [0,%d)", l, i, x, ns)
			}
		}
	}
	b.Reused = d.i32s(uint64(R), "reused")
	st := statFields(&b.Stats)
	for _, f := range st {
		*f = int64(d.u64("stats"))
	}
	b.SampleSeconds = math.Float64frombits(d.u64("sample seconds"))
	b.DynamicBytes = int64(d.u64("dynamic bytes"))
	if d.Err() != nil {
		return nil, d.Err()
	}
	if !(b.SampleSeconds >= 0) || math.IsInf(b.SampleSeconds, 1) {
		return nil, fmt.Errorf("sample seconds %v, want finite and >= 0", b.SampleSeconds)
	}
	if b.DynamicBytes < 0 {
		return nil, fmt.Errorf("dynamic bytes %d, want >= 0", b.DynamicBytes)
	}
	for i, x := range b.Reused {
		if x < 0 || uint64(x) >= nn {
			return nil, fmt.Errorf("reused[%d] = %d out of [0,%d)", i, x, nn)
		}
	}
	if d.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes in record", d.Len())
	}
	if len(b.Reused) == 0 {
		b.Reused = nil
	}
	return b, nil
}
