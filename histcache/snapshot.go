package histcache

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

// Snapshot format constants (see the package doc).
const (
	snapMagic   = "SSDHIST\x00"
	snapVersion = 2
	headerBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8
	// trailerBytes is version 2's PolicyGrad threshold after the
	// records: a flag byte (1: set) and the float32.
	trailerBytes = 1 + 4
)

// CorruptError reports a damaged snapshot: the file when ReadFrom's reader
// names one (else "": a snapshot inside a checkpoint is named by its
// reader's caller), the byte offset from the start of the snapshot, the
// field that failed, and why.
type CorruptError struct {
	File   string
	Offset int64
	Field  string
	Reason string
}

func (e *CorruptError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("histcache: corrupt snapshot %s at byte %d (%s): %s", e.File, e.Offset, e.Field, e.Reason)
	}
	return fmt.Sprintf("histcache: corrupt snapshot at byte %d (%s): %s", e.Offset, e.Field, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// SnapshotBytes is the size of the snapshot WriteTo would write now:
// the header, one record per entry and the checksum. A writer that must
// state the size first (a checkpoint section) writes the snapshot
// streaming and checks WriteTo's count against it, instead of buffering
// it (a second copy of the cache's embeddings).
func (c *Cache) SnapshotBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return headerBytes + c.entriesLocked()*int64(17+4*c.hidden) + trailerBytes + 8
}

// entriesLocked is the entries a snapshot holds (slots not Empty); c.mu
// is held.
func (c *Cache) entriesLocked() int64 {
	var n int64
	for _, st := range c.mu.state {
		if st != Empty {
			n++
		}
	}
	return n
}

// WriteTo writes a snapshot of the contents (see the package doc) and
// returns the bytes written.
func (c *Cache) WriteTo(w io.Writer) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bw := bufio.NewWriter(w)
	d := xxhash.New()
	mw := io.MultiWriter(bw, d)
	var n int64
	put := func(b []byte) error {
		k, err := mw.Write(b)
		n += int64(k)
		return err
	}
	entries := c.entriesLocked()
	hdr := make([]byte, 0, headerBytes)
	hdr = append(hdr, snapMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, snapVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(c.hidden))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(c.numNodes))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(c.nodes)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(c.opts.Staleness))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(entries))
	if err := put(hdr); err != nil {
		return n, fmt.Errorf("histcache: write snapshot: %w", err)
	}
	h := c.hidden
	rec := make([]byte, 0, 17+4*h)
	for s, st := range c.mu.state {
		if st == Empty {
			continue
		}
		if st == InBatchCompute {
			st = Valid
		}
		rec = rec[:0]
		rec = binary.LittleEndian.AppendUint64(rec, uint64(c.nodes[s]))
		rec = append(rec, byte(st))
		rec = binary.LittleEndian.AppendUint64(rec, uint64(c.mu.iters[s]))
		for _, x := range c.mu.emb[s*h : (s+1)*h] {
			rec = binary.LittleEndian.AppendUint32(rec, math.Float32bits(x))
		}
		if err := put(rec); err != nil {
			return n, fmt.Errorf("histcache: write snapshot: %w", err)
		}
	}
	// The threshold EvictUnstable compares with until the next Push
	// sets one: a resumed cache must evict as the running one would.
	tr := []byte{0}
	if c.mu.hasThreshold {
		tr[0] = 1
	}
	tr = binary.LittleEndian.AppendUint32(tr, math.Float32bits(c.mu.threshold))
	if err := put(tr); err != nil {
		return n, fmt.Errorf("histcache: write snapshot: %w", err)
	}
	sum := binary.LittleEndian.AppendUint64(nil, d.Sum64())
	k, err := bw.Write(sum)
	n += int64(k)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return n, fmt.Errorf("histcache: write snapshot: %w", err)
	}
	return n, nil
}

// recordChunk is about how many bytes of records ReadFrom decodes at a
// time (at least one record).
const recordChunk = 64 << 10

// snapReader reads a snapshot from r piece by piece (the header, runs of
// records, the checksum), hashing what it reads, and decodes each piece
// with a decbuf.Decbuf whose offsets count from the start of the snapshot.
// It never reads past the snapshot's declared end.
type snapReader struct {
	r    io.Reader
	file string // r's Name, if it has one
	sum  *xxhash.Digest
	off  int64 // bytes read from r
	buf  []byte
}

// next reads the next n bytes (fewer only where r ends) and returns a
// Decbuf over them: a field that runs past a short piece fails there.
func (s *snapReader) next(n int) (*decbuf.Decbuf, error) {
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	k, err := io.ReadFull(s.r, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("histcache: read snapshot: %w", err)
	}
	s.sum.Write(b[:k])
	d := decbuf.New(b[:k], s.off)
	s.off += int64(k)
	return d, nil
}

// corrupt is d's error as a *CorruptError naming the field; a short read
// is reported where the data ends.
func (s *snapReader) corrupt(d *decbuf.Decbuf) error {
	e := &CorruptError{File: s.file, Offset: d.ErrOffset(), Field: d.ErrField(), Reason: d.Err().Error()}
	var se *decbuf.ShortError
	if errors.As(d.Err(), &se) {
		e.Offset = se.Offset + int64(se.Left)
		e.Reason = fmt.Sprintf("truncated: %d bytes wanted at byte %d, %d left", se.Want, se.Offset, se.Left)
	}
	return e
}

// ReadFrom replaces the contents with one snapshot read from r, which must
// come from a cache with the same nodes, width and candidates (ErrMismatch
// otherwise). It verifies everything, checksum included, before changing
// the cache, and returns the bytes read: exactly the snapshot's on
// success; on an error at most recordChunk bytes past the failure, never
// past the snapshot's declared end. A batch in progress is ended. Stats'
// counters are kept; Valid is recounted. Damage is a *CorruptError naming
// the field and its byte offset, and the file when r has a Name method
// (an *os.File).
func (c *Cache) ReadFrom(r io.Reader) (int64, error) {
	s := &snapReader{r: r, sum: xxhash.New()}
	if f, ok := r.(interface{ Name() string }); ok {
		s.file = f.Name()
	}
	d, err := s.next(headerBytes)
	if err != nil {
		return s.off, err
	}
	if magic := d.Field("magic").Bytes(len(snapMagic)); d.Err() == nil && string(magic) != snapMagic {
		d.Fail(errors.New("not a histcache snapshot"))
	}
	version := d.Field("version").U32()
	if d.Err() == nil && (version < 1 || version > snapVersion) {
		d.Fail(fmt.Errorf("version %d, want 1 or %d", version, snapVersion))
	}
	hidden := d.Field("hidden").U32()
	numNodes := d.Field("numNodes").I64()
	slots := d.Field("slots").I64()
	if staleness := d.Field("staleness").I64(); d.Err() == nil && staleness < 1 {
		d.Fail(fmt.Errorf("%d, want >= 1", staleness))
	}
	entries := d.Field("entries").I64()
	if d.Err() == nil && (entries < 0 || entries > slots) {
		d.Fail(fmt.Errorf("%d entries for %d slots", entries, slots))
	}
	if d.Err() != nil {
		return s.off, s.corrupt(d)
	}
	if int64(hidden) != int64(c.hidden) || numNodes != c.numNodes || slots != int64(len(c.nodes)) {
		why := ErrMismatch
		if int64(hidden) == int64(c.hidden) && numNodes == c.numNodes {
			why = ErrOtherSize
		}
		return s.off, fmt.Errorf("%w: snapshot has N=%d H=%d slots=%d, cache N=%d H=%d slots=%d",
			why, numNodes, hidden, slots, c.numNodes, c.hidden, len(c.nodes))
	}
	h := c.hidden
	state := make([]State, len(c.nodes))
	for i := range state {
		state[i] = Empty
	}
	iters := make([]int64, len(c.nodes))
	emb := make([]float32, len(c.nodes)*h)
	recBytes := 8 + 1 + 8 + 4*h
	perChunk := int64(max(1, recordChunk/recBytes))
	prev := int64(-1)
	var mismatch error
	for left := entries; left > 0; {
		k := min(left, perChunk)
		left -= k
		if d, err = s.next(int(k) * recBytes); err != nil {
			return s.off, err
		}
		for range k {
			node := d.Field("node").I64()
			switch {
			case d.Err() != nil:
			case node <= prev:
				d.Fail(fmt.Errorf("node %d after %d, want ascending", node, prev))
			case node >= numNodes:
				d.Fail(fmt.Errorf("node %d of %d", node, numNodes))
			}
			st := State(d.Field("state").U8())
			if d.Err() == nil && st != Valid && st != MustRefresh {
				d.Fail(fmt.Errorf("state %v, want Valid or MustRefresh", st))
			}
			iter := d.Field("iter").I64()
			if d.Err() != nil {
				return s.off, s.corrupt(d)
			}
			prev = node
			sl := int(c.slots[node])
			if sl < 0 {
				if mismatch == nil {
					mismatch = fmt.Errorf("%w: node %d has an entry but is not a candidate here", ErrMismatch, node)
				}
				d.Field("embedding").Skip(4 * h)
			} else {
				state[sl], iters[sl] = st, iter
				d.Field("embedding").F32s(emb[sl*h : (sl+1)*h])
			}
			if d.Err() != nil {
				return s.off, s.corrupt(d)
			}
		}
	}
	hasThreshold, threshold := false, float32(0)
	if version >= 2 {
		if d, err = s.next(trailerBytes); err != nil {
			return s.off, err
		}
		flag := d.Field("threshold").U8()
		if d.Err() == nil && flag > 1 {
			d.Fail(fmt.Errorf("flag %d, want 0 or 1", flag))
		}
		bits := d.Field("threshold").U32()
		if d.Err() != nil {
			return s.off, s.corrupt(d)
		}
		hasThreshold, threshold = flag == 1, math.Float32frombits(bits)
	}
	want := s.sum.Sum64()
	if d, err = s.next(8); err != nil {
		return s.off, err
	}
	if got := d.Field("checksum").U64(); d.Err() != nil {
		return s.off, s.corrupt(d)
	} else if got != want {
		return s.off, &CorruptError{File: s.file, Offset: s.off - 8, Field: "checksum", Reason: fmt.Sprintf("xxhash64 %016x, computed %016x", got, want)}
	}
	if mismatch != nil {
		return s.off, mismatch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.state, c.mu.iters, c.mu.emb = state, iters, emb
	c.mu.hasThreshold, c.mu.threshold = hasThreshold, threshold
	c.mu.marked = c.mu.marked[:0]
	c.mu.stats.Valid = 0
	for _, st := range state {
		if st == Valid {
			c.mu.stats.Valid++
		}
	}
	return s.off, nil
}
