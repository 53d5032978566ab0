package histcache

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Snapshot format constants (see the package doc).
const (
	snapMagic   = "SSDHIST\x00"
	snapVersion = 1
	headerBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8
)

// CorruptError reports a damaged snapshot: the byte offset (from the start
// of the snapshot) of the field that failed, and why.
type CorruptError struct {
	Offset int64
	Field  string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("histcache: corrupt snapshot at byte %d (%s): %s", e.Offset, e.Field, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

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
	var entries int64
	for _, st := range c.mu.state {
		if st != Empty {
			entries++
		}
	}
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

// decoder reads little-endian fields with a sticky error and hashes what
// it reads.
type decoder struct {
	r   io.Reader
	d   *xxhash.Digest
	off int64
	err error
	buf [8]byte
}

func (dc *decoder) read(field string, b []byte) {
	if dc.err != nil {
		return
	}
	k, err := io.ReadFull(dc.r, b)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			dc.err = &CorruptError{Offset: dc.off + int64(k), Field: field, Reason: "truncated"}
		} else {
			dc.err = fmt.Errorf("histcache: read snapshot: %w", err)
		}
		return
	}
	if dc.d != nil {
		dc.d.Write(b)
	}
	dc.off += int64(k)
}

func (dc *decoder) u32(field string) uint32 {
	dc.read(field, dc.buf[:4])
	return binary.LittleEndian.Uint32(dc.buf[:4])
}

func (dc *decoder) u64(field string) uint64 {
	dc.read(field, dc.buf[:8])
	return binary.LittleEndian.Uint64(dc.buf[:8])
}

func (dc *decoder) fail(field, format string, args ...any) {
	if dc.err == nil {
		dc.err = &CorruptError{Offset: dc.off, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

// ReadFrom replaces the contents with one snapshot read from r, which must
// come from a cache with the same nodes, width and candidates (ErrMismatch
// otherwise). It reads exactly the snapshot's bytes, verifies everything,
// checksum included, before changing the cache, and returns the bytes
// read. A batch in progress is ended. Stats' counters are kept; Valid is
// recounted.
func (c *Cache) ReadFrom(r io.Reader) (int64, error) {
	dc := &decoder{r: r, d: xxhash.New()}
	var magic [8]byte
	dc.read("magic", magic[:])
	if dc.err == nil && string(magic[:]) != snapMagic {
		dc.fail("magic", "not a histcache snapshot")
	}
	version := dc.u32("version")
	if dc.err == nil && version != snapVersion {
		dc.fail("version", "version %d, want %d", version, snapVersion)
	}
	hidden := dc.u32("hidden")
	numNodes := int64(dc.u64("numNodes"))
	slots := int64(dc.u64("slots"))
	staleness := int64(dc.u64("staleness"))
	entries := int64(dc.u64("entries"))
	if dc.err != nil {
		return dc.off, dc.err
	}
	if staleness < 1 {
		dc.fail("staleness", "%d, want >= 1", staleness)
	}
	if entries < 0 || entries > slots {
		dc.fail("entries", "%d entries for %d slots", entries, slots)
	}
	if dc.err != nil {
		return dc.off, dc.err
	}
	if int64(hidden) != int64(c.hidden) || numNodes != c.numNodes || slots != int64(len(c.nodes)) {
		return dc.off, fmt.Errorf("%w: snapshot has N=%d H=%d slots=%d, cache N=%d H=%d slots=%d",
			ErrMismatch, numNodes, hidden, slots, c.numNodes, c.hidden, len(c.nodes))
	}
	h := c.hidden
	state := make([]State, len(c.nodes))
	for i := range state {
		state[i] = Empty
	}
	iters := make([]int64, len(c.nodes))
	emb := make([]float32, len(c.nodes)*h)
	rec := make([]byte, 4*h)
	prev := int64(-1)
	var mismatch error
	for range entries {
		node := int64(dc.u64("node"))
		var sb [1]byte
		dc.read("state", sb[:])
		st := State(sb[0])
		iter := int64(dc.u64("iter"))
		dc.read("embedding", rec)
		if dc.err != nil {
			return dc.off, dc.err
		}
		switch {
		case node <= prev:
			dc.fail("node", "node %d after %d, want ascending", node, prev)
		case node >= numNodes:
			dc.fail("node", "node %d of %d", node, numNodes)
		case st != Valid && st != MustRefresh:
			dc.fail("state", "state %v, want Valid or MustRefresh", st)
		}
		if dc.err != nil {
			return dc.off, dc.err
		}
		prev = node
		s := c.slots[node]
		if s < 0 {
			if mismatch == nil {
				mismatch = fmt.Errorf("%w: node %d has an entry but is not a candidate here", ErrMismatch, node)
			}
			continue
		}
		state[s] = st
		iters[s] = iter
		for j := range h {
			emb[int(s)*h+j] = math.Float32frombits(binary.LittleEndian.Uint32(rec[4*j:]))
		}
	}
	want := dc.d.Sum64()
	dc.d = nil
	got := dc.u64("checksum")
	if dc.err != nil {
		return dc.off, dc.err
	}
	if got != want {
		return dc.off, &CorruptError{Offset: dc.off - 8, Field: "checksum", Reason: fmt.Sprintf("xxhash64 %016x, computed %016x", got, want)}
	}
	if mismatch != nil {
		return dc.off, mismatch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.state, c.mu.iters, c.mu.emb = state, iters, emb
	c.mu.marked = c.mu.marked[:0]
	c.mu.stats.Valid = 0
	for _, st := range state {
		if st == Valid {
			c.mu.stats.Valid++
		}
	}
	return dc.off, nil
}
