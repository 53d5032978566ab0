package storage

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/readplan"
	"github.com/ssdgnn/ssdgnn/internal/uring"
	"golang.org/x/sys/unix"
)

// IOEngine selects how RowReader.ReadScattered submits its reads.
type IOEngine int

// I/O engines.
const (
	// IOAuto is IOUring where the kernel accepts io_uring and IOPread
	// where it refuses it. RowReader.Engine says which one a reader got.
	IOAuto IOEngine = iota
	// IOPread issues one pread system call per read from up to Depth
	// goroutines.
	IOPread
	// IOUring queues up to Depth reads on one io_uring and submits each
	// batch in one system call.
	IOUring
)

// String names the engine as the CLI spells it.
func (e IOEngine) String() string {
	switch e {
	case IOPread:
		return "pread"
	case IOUring:
		return "uring"
	}
	return "auto"
}

// ParseIOEngine parses "auto", "pread" or "uring".
func ParseIOEngine(s string) (IOEngine, error) {
	switch s {
	case "auto", "":
		return IOAuto, nil
	case "pread":
		return IOPread, nil
	case "uring":
		return IOUring, nil
	}
	return 0, fmt.Errorf("storage: I/O engine %q: want auto, pread or uring", s)
}

// Defaults of ScatterOptions.
const (
	DefaultScatterDepth = 16
	// DefaultGatherDepth is the reads in flight of the feature gather
	// (featurecache.DefaultIODepth). On docs/ooc.md's virtio disk `ssdgnn
	// probe` read 85 k rows/s at depth 16, 111 k at 32, 128 k at 64 and
	// 143 k at 128. The 3 GiB training child's epoch at 64 against 16:
	// 20.2 and 20.3 s against 22.5 and 26.1 s on the partition-major copy
	// (10–22 % shorter), 24.9 and 25.3 s against 29.0 s on the original
	// layout (13–14 %). 128 gave 24.5 s: its slots took 32 MiB from the
	// caches, and sampling took 18.0 s against 14.7 s at 64. With
	// io_uring the depth costs no thread per read. ProbeDevice still
	// prices random reads at DefaultScatterDepth: priced at 64 (7.9 µs a
	// read) the break-even gap fell from 41 rows to 26–28, and the same
	// child read 17 % fewer bytes but took 5–6 % longer, since in the
	// gather the depth is shared with long merged reads.
	DefaultGatherDepth = 64
	// MaxIODepth bounds the reads in flight a caller may ask for: each
	// holds a read slot of up to DefaultMaxReadBytes, so depth 100,000
	// asked for 25 GiB of slots and exhausted memory. 1024 is already past
	// what an NVMe queue serves in parallel.
	MaxIODepth          = 1024
	DefaultMaxReadBytes = 256 << 10
	// DefaultMaxReadAmplification is the cap on bytes read ÷ bytes the
	// missed rows occupy that callers apply unless told otherwise: the
	// break-even gap alone read 4.6× (11 GiB for 2.4 GiB of rows) on the
	// dense batches of docs/ooc.md's 1.5 GiB run, for device time the
	// model said was cheaper but a shared disk's bandwidth did not give.
	DefaultMaxReadAmplification = 2
)

// ReadAmplification resolves a cap option for a read plan (the
// MaxAmplification of ScatterOptions): 0 takes
// DefaultMaxReadAmplification, a negative value means no cap (0), and
// any other value is kept; a plan that merges nothing (merging false)
// has no cap.
func ReadAmplification(merging bool, opt float64) float64 {
	switch {
	case !merging || opt < 0:
		return 0
	case opt == 0:
		return DefaultMaxReadAmplification
	}
	return opt
}

// ScatterOptions tunes ReadScattered. The zero value reads one row per
// read at DefaultScatterDepth.
type ScatterOptions struct {
	// GapRows merges rows into one read when fewer than GapRows unneeded
	// rows lie between them (readplan.Options.GapRows). 0: one read per
	// row.
	GapRows int64
	// MaxAmplification caps bytes read ÷ bytes the rows occupy
	// (readplan.Options.MaxAmplification): 0, no cap; otherwise >= 1.
	MaxAmplification float64
	// CreditRows are rows the caller needs among the requested rows but
	// serves itself (a cache's hits): the cap counts them as needed
	// (readplan.Options.CreditBytes), spread over the call's read plans
	// in proportion to the rows each plans. 0: none.
	CreditRows int64
	// MaxReadBytes caps one merged read. Default DefaultMaxReadBytes.
	MaxReadBytes int64
	// Depth bounds the reads in flight. Default DefaultScatterDepth.
	Depth int
	// Chunk is the most rows or ranges one read plan covers: a call
	// plans and reads its sorted requests Chunk at a time, so that its
	// session keeps SessionItemBytes for at most Chunk items (and the
	// pieces of long ranges) however large the call. A chunk boundary
	// stops one merge. Default DefaultScatterChunk.
	Chunk int
}

// DefaultScatterChunk is ScatterOptions.Chunk's default.
const DefaultScatterChunk = 16 << 10

func (o ScatterOptions) withDefaults() ScatterOptions {
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.Depth <= 0 {
		o.Depth = DefaultScatterDepth
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultScatterChunk
	}
	return o
}

// RowReq asks for row ID to be copied to row slot Pos of a destination
// buffer.
type RowReq struct {
	ID, Pos int64
}

// RangeReq asks for the N rows from Row to be copied to the row slots
// from Pos of a destination buffer: a variable-length item such as a
// neighbour list (rows of indices.npy) or a node's two offsets (rows of
// indptr.npy).
type RangeReq struct {
	Row, N, Pos int64
}

// ScratchBytesFor is the scratch one ReadScattered call holds for reads
// in flight: Depth slots of MaxReadBytes (or one aligned row, if larger).
// It is counted in memacct.BatchBuffers while the reader keeps it.
func (r *RowReader) ScratchBytesFor(o ScatterOptions) int64 {
	o = o.withDefaults()
	return int64(o.Depth) * r.slotBytes(o)
}

func (r *RowReader) slotBytes(o ScatterOptions) int64 {
	a := max(r.align, 1)
	if r.mode != ReadDirect {
		a = 1
	}
	return slotBytes(r.rowBytes, a, o)
}

// slotBytes is one read slot for rows of rowBytes at alignment a.
func slotBytes(rowBytes, a int64, o ScatterOptions) int64 {
	one := (rowBytes + 2*a - 1) &^ (a - 1) // an unaligned row spans one block more
	return max(o.MaxReadBytes&^(a-1), one)
}

// SessionBytesBound bounds what one ReadScattered call of items rows of
// rowBytes, with o, counts in memacct.BatchBuffers and its reader keeps
// until Close: SlotBytesBound, and SessionItemBytes for each item of its
// largest chunk (at most o.Chunk). Callers that plan memory before a
// reader is open count it once per concurrent caller.
func SessionBytesBound(rowBytes, items int64, o ScatterOptions) int64 {
	return SlotBytesBound(rowBytes, o) + SessionItemsBound(items, o)
}

// SessionItemsBound is the part of SessionBytesBound that depends on the
// call: SessionItemBytes for each item of its largest chunk.
func SessionItemsBound(items int64, o ScatterOptions) int64 {
	o = o.withDefaults()
	return SessionItemBytes * min(items, int64(o.Chunk))
}

// SlotBytesBound is the part of SessionBytesBound that does not depend on
// the call: ScratchBytesFor's read slots for any reader, the larger of a
// buffered reader's (MaxReadBytes as given) and an O_DIRECT reader's at
// the largest alignment (MaxReadBytes rounded down, one row rounded up).
func SlotBytesBound(rowBytes int64, o ScatterOptions) int64 {
	o = o.withDefaults()
	return int64(o.Depth) * max(slotBytes(rowBytes, 1, o), slotBytes(rowBytes, directAlign, o))
}

// session is the per-call state ReadScattered reuses: the slab of read
// slots, the plan, the ids and, for IOUring, the ring.
type session struct {
	slab    []byte     // aligned
	counted int64      // the slab's and the slices' bytes in memacct.BatchBuffers
	reqs    []RangeReq // sorted by Row, none longer than a slot
	exts    []readplan.Extent
	planner readplan.Planner
	ring    *uring.Ring
}

// SetEngine chooses how ReadScattered submits reads. Call it before
// concurrent use; IOAuto resolves to IOUring or IOPread here (a read of
// the first block through a ring decides), IOUring fails where the kernel
// refuses io_uring.
func (r *RowReader) SetEngine(e IOEngine) error {
	if e == IOPread {
		r.engine = IOPread
		return nil
	}
	ring, err := uring.New(4)
	if err == nil {
		err = r.probeRing(ring)
		ring.Close()
	}
	if err != nil {
		if e == IOAuto {
			r.engine = IOPread
			return nil
		}
		return fmt.Errorf("storage: %s: io_uring: %w", r.name, err)
	}
	r.engine = IOUring
	return nil
}

// probeRing reads the first block of the file through ring.
func (r *RowReader) probeRing(ring *uring.Ring) error {
	buf := r.alignedBuf(int(directAlign))
	defer r.bufs.Put(buf)
	if !ring.PrepRead(int(r.f.Fd()), (*buf)[:directAlign], 0, 0) {
		return errors.New("ring full")
	}
	if err := ring.Submit(1); err != nil {
		return err
	}
	var res int32
	ring.Reap(func(_ uint64, x int32) { res = x })
	if res < 0 {
		return unix.Errno(-res)
	}
	return nil
}

// Engine is the resolved I/O engine of ReadScattered: IOPread or IOUring.
func (r *RowReader) Engine() IOEngine {
	if r.engine == IOAuto {
		return IOPread
	}
	return r.engine
}

func (r *RowReader) getSession(o ScatterOptions) (*session, error) {
	need := r.ScratchBytesFor(o)
	r.sessMu.Lock()
	var s *session
	if n := len(r.sessions); n > 0 {
		s = r.sessions[n-1]
		r.sessions = r.sessions[:n-1]
	}
	r.sessMu.Unlock()
	if s == nil {
		s = &session{}
	}
	if int64(len(s.slab)) < need {
		b := r.alignedBuf(int(need))
		s.slab = *b
		s.recount()
	}
	if r.engine == IOUring && (s.ring == nil || s.ring.Entries() < o.withDefaults().Depth) {
		if s.ring != nil {
			s.ring.Close()
		}
		ring, err := uring.New(uint32(o.withDefaults().Depth))
		if err != nil {
			r.putSession(s)
			return nil, fmt.Errorf("storage: %s: %w", r.name, err)
		}
		s.ring = ring
	}
	return s, nil
}

// Session bytes beyond the slab: a request and an extent per item, and
// the planner's gap per item.
const (
	rangeReqBytes = int64(unsafe.Sizeof(RangeReq{}))
	extentBytes   = int64(unsafe.Sizeof(readplan.Extent{}))
)

// SessionItemBytes is what a ReadScattered or ReadRanges session keeps
// per row or range (after splitting) of its largest chunk until Close: a
// request, an extent and the planner's gap, with a quarter's slack. A
// caller's bound counts it per item of one chunk (ScatterOptions.Chunk,
// and for ReadRanges the pieces of its long ranges), once per concurrent
// caller.
const SessionItemBytes = (rangeReqBytes + extentBytes + 8) * 5 / 4

// recount brings s's share of memacct.BatchBuffers up to date with its
// slab and slices, which keep the capacity of the largest call.
func (s *session) recount() {
	n := int64(len(s.slab)) + rangeReqBytes*int64(cap(s.reqs)) + extentBytes*int64(cap(s.exts)) + s.planner.GapsBytes()
	memacct.Add(memacct.BatchBuffers, n-s.counted)
	s.counted = n
}

// reserve gives s room for n items with a quarter's slack, so that its
// slices stay within SessionItemBytes per item.
func (s *session) reserve(n int) {
	if cap(s.reqs) < n {
		s.reqs = make([]RangeReq, 0, n+n/4)
	}
	if cap(s.exts) < n {
		s.exts = make([]readplan.Extent, 0, n+n/4)
	}
}

func (r *RowReader) putSession(s *session) {
	s.recount()
	r.sessMu.Lock()
	r.sessions = append(r.sessions, s)
	r.sessMu.Unlock()
}

// closeSessions releases every idle session (Close).
func (r *RowReader) closeSessions() {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	for _, s := range r.sessions {
		if s.ring != nil {
			s.ring.Close()
		}
		memacct.Add(memacct.BatchBuffers, -s.counted)
	}
	r.sessions = nil
}

// ReadScattered copies row reqs[k].ID into dst[reqs[k].Pos·RowBytes:] for
// every k. It sorts reqs by ID (in place), plans the reads o.Chunk rows at
// a time with o.GapRows under o.MaxAmplification (internal/readplan),
// reads each planned extent with one read call into a scratch slot, and
// copies the rows out. Duplicate ids are allowed.
// Accounting: the rows and their bytes as requested, and every extent as
// one read call of its full length.
func (r *RowReader) ReadScattered(reqs []RowReq, dst []byte, o ScatterOptions) error {
	if len(reqs) == 0 {
		return nil
	}
	o = o.withDefaults()
	nrows := (r.dataEnd - r.dataOff) / r.rowBytes
	for _, q := range reqs {
		if q.ID < 0 || q.ID >= nrows || q.Pos < 0 || (q.Pos+1)*r.rowBytes > int64(len(dst)) {
			return fmt.Errorf("storage: %s: row %d to slot %d out of range (%d rows, %d-byte destination)", r.name, q.ID, q.Pos, nrows, len(dst))
		}
	}
	slices.SortFunc(reqs, func(a, b RowReq) int { return cmp.Compare(a.ID, b.ID) })
	s, err := r.getSession(o)
	if err != nil {
		return err
	}
	defer r.putSession(s)
	r.stage.Request(int64(len(reqs)), int64(len(reqs))*r.rowBytes)
	total := int64(len(reqs))
	for len(reqs) > 0 {
		chunk := reqs[:min(len(reqs), o.Chunk)]
		reqs = reqs[len(chunk):]
		s.reserve(len(chunk))
		s.reqs = s.reqs[:0]
		for _, q := range chunk {
			s.reqs = append(s.reqs, RangeReq{Row: q.ID, N: 1, Pos: q.Pos})
		}
		if err := r.scatter(s, dst, o, creditBytes(o.CreditRows, int64(len(chunk)), total, r.rowBytes)); err != nil {
			return err
		}
	}
	return nil
}

// creditBytes is the share of credit rows (ScatterOptions.CreditRows)
// one read plan of rows of a call's total gets, in bytes.
func creditBytes(credit, rows, total, rowBytes int64) int64 {
	if credit <= 0 || total <= 0 {
		return 0
	}
	return int64(float64(credit) * float64(rows) / float64(total) * float64(rowBytes))
}

// ReadRanges copies rows [q.Row, q.Row+q.N) into dst[q.Pos·RowBytes:] for
// every q in reqs, as ReadScattered copies single rows: it sorts reqs by
// Row (in place), plans the reads o.Chunk ranges at a time with o.GapRows
// under o.MaxAmplification,
// reads each planned extent with one read call into a scratch slot, and
// copies the ranges out. A range longer than one slot is read in pieces.
// Ranges may overlap. Accounting: every range as one request of its
// bytes, and every extent as one read call of its full length.
func (r *RowReader) ReadRanges(reqs []RangeReq, dst []byte, o ScatterOptions) error {
	if len(reqs) == 0 {
		return nil
	}
	o = o.withDefaults()
	nrows := (r.dataEnd - r.dataOff) / r.rowBytes
	var rows int64
	for _, q := range reqs {
		if q.N < 1 || q.Row < 0 || q.Row > nrows-q.N || q.Pos < 0 || q.Pos+q.N > int64(len(dst))/r.rowBytes {
			return fmt.Errorf("storage: %s: %d rows from %d to slot %d out of range (%d rows, %d-byte destination)", r.name, q.N, q.Row, q.Pos, nrows, len(dst))
		}
		rows += q.N
	}
	slices.SortFunc(reqs, func(a, b RangeReq) int { return cmp.Compare(a.Row, b.Row) })
	s, err := r.getSession(o)
	if err != nil {
		return err
	}
	defer r.putSession(s)
	r.stage.Request(int64(len(reqs)), rows*r.rowBytes)
	// A piece of k rows spans at most k·RowBytes plus one block at each
	// end: keep it within a slot.
	a := r.planAlign()
	piece := max(1, (r.slotBytes(o)-2*a)/r.rowBytes)
	for len(reqs) > 0 {
		chunk := reqs[:min(len(reqs), o.Chunk)]
		reqs = reqs[len(chunk):]
		items := 0
		for _, q := range chunk {
			items += int((q.N + piece - 1) / piece)
		}
		s.reserve(items)
		s.reqs = s.reqs[:0]
		for _, q := range chunk {
			for q.N > piece {
				s.reqs = append(s.reqs, RangeReq{Row: q.Row, N: piece, Pos: q.Pos})
				q.Row, q.N, q.Pos = q.Row+piece, q.N-piece, q.Pos+piece
			}
			s.reqs = append(s.reqs, q)
		}
		if len(s.reqs) > len(chunk) { // pieces of a long range follow later ranges' starts
			slices.SortFunc(s.reqs, func(a, b RangeReq) int { return cmp.Compare(a.Row, b.Row) })
		}
		var crows int64
		for _, q := range chunk {
			crows += q.N
		}
		if err := r.scatter(s, dst, o, creditBytes(o.CreditRows, crows, rows, r.rowBytes)); err != nil {
			return err
		}
	}
	return nil
}

// scatter plans s.reqs, with credit bytes of rows the caller serves
// itself, and reads them into dst.
func (r *RowReader) scatter(s *session, dst []byte, o ScatterOptions, credit int64) error {
	po, err := r.planOptions(o)
	if err != nil {
		return err
	}
	po.CreditBytes = credit
	slot := po.MaxBytes // one read slot holds the largest read
	s.exts = s.exts[:0]
	s.planner.WalkFunc(len(s.reqs), func(k int) readplan.Range { return readplan.Range{Row: s.reqs[k].Row, N: s.reqs[k].N} },
		po, func(x readplan.Extent) { s.exts = append(s.exts, x) })
	if r.engine == IOUring {
		return r.scatterRing(s, dst, o.Depth, slot)
	}
	return r.scatterPread(s, dst, o.Depth, slot)
}

// planAlign is the alignment of r's reads: the file system's direct-I/O
// alignment for ReadDirect, else 1.
func (r *RowReader) planAlign() int64 {
	if r.mode == ReadDirect {
		return r.align
	}
	return 1
}

// planOptions is the read plan ReadScattered follows under o (with
// defaults applied).
func (r *RowReader) planOptions(o ScatterOptions) (readplan.Options, error) {
	po := readplan.Options{RowBytes: r.rowBytes, DataOff: r.dataOff, Align: r.planAlign(), GapRows: o.GapRows,
		MaxBytes: r.slotBytes(o), MaxAmplification: o.MaxAmplification}
	if err := po.Validate(); err != nil {
		return po, fmt.Errorf("storage: %w", err)
	}
	return po, nil
}

// ReadModel plans reads exactly as ReadScattered does under one
// ScatterOptions, without reading: the profiling epoch prices each
// batch's reads with it (planner). It keeps the planner's scratch between
// calls and is not safe for concurrent use.
type ReadModel struct {
	po    readplan.Options
	p     readplan.Planner
	chunk int // ScatterOptions.Chunk
}

// ReadModel returns the plan r's ReadScattered follows under o.
func (r *RowReader) ReadModel(o ScatterOptions) (*ReadModel, error) {
	o = o.withDefaults()
	po, err := r.planOptions(o)
	if err != nil {
		return nil, err
	}
	return &ReadModel{po: po, chunk: o.Chunk}, nil
}

// SetChunk makes Walk plan ids in pieces of at most rows, each on its
// own, as a caller reads that hands ReadScattered one piece at a time
// (the streamed input layer's chunks); rows at or above the gather's own
// chunk, or ≤ 0, change nothing.
func (m *ReadModel) SetChunk(rows int) {
	if rows > 0 {
		m.chunk = min(m.chunk, rows)
	}
}

// Walk calls fn once per read that ReadScattered would issue for rows
// ids, which must be sorted ascending, planned in the same chunks: the
// read covers ids[first : first+n] and reads bytes bytes (alignment and
// merged gaps included).
func (m *ReadModel) Walk(ids []int64, fn func(first, n int, bytes int64)) {
	for i := 0; i < len(ids); i += m.chunk {
		m.p.Walk(ids[i:min(len(ids), i+m.chunk)], m.po, func(x readplan.Extent) { fn(i+x.First, x.N, x.Len) })
	}
}

// copyOut copies the ranges of extent x from buf, which holds x's first
// got bytes.
func (r *RowReader) copyOut(x readplan.Extent, buf []byte, reqs []RangeReq, dst []byte) {
	rb := r.rowBytes
	for _, q := range reqs[x.First : x.First+x.N] {
		p := r.dataOff + q.Row*rb - x.Off
		copy(dst[q.Pos*rb:(q.Pos+q.N)*rb], buf[p:p+q.N*rb])
	}
}

// need is the bytes of extent x that hold its ranges: a read may stop
// short of x.Len at the end of the file, never before this.
func (r *RowReader) need(x readplan.Extent, reqs []RangeReq) int64 {
	var end int64
	for _, q := range reqs[x.First : x.First+x.N] {
		end = max(end, q.Row+q.N)
	}
	return r.dataOff + end*r.rowBytes - x.Off
}

// preadExtent reads extent x into buf with pread, retrying short reads.
func (r *RowReader) preadExtent(x readplan.Extent, reqs []RangeReq, buf []byte) error {
	got, err := r.f.ReadAt(buf[:x.Len], x.Off)
	if int64(got) < r.need(x, reqs) {
		if err == nil {
			err = errors.New("short read")
		}
		return fmt.Errorf("storage: read %s: %d bytes at byte %d: %w", r.name, x.Len, x.Off, ShortRead(err))
	}
	r.stage.Read(int64(got))
	return nil
}

func (r *RowReader) scatterPread(s *session, dst []byte, depth int, slot int64) error {
	exts := s.exts
	workers := min(depth, len(exts))
	if workers <= 1 {
		buf := s.slab[:slot]
		for _, x := range exts {
			if err := r.preadExtent(x, s.reqs, buf); err != nil {
				return err
			}
			r.copyOut(x, buf, s.reqs, dst)
		}
		return nil
	}
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		buf := s.slab[int64(w)*slot : int64(w+1)*slot]
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(exts) {
					return
				}
				if err := r.preadExtent(exts[k], s.reqs, buf); err != nil {
					errs[w] = err
					return
				}
				r.copyOut(exts[k], buf, s.reqs, dst)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *RowReader) scatterRing(s *session, dst []byte, depth int, slot int64) error {
	exts := s.exts
	ring := s.ring
	depth = min(depth, ring.Entries())
	free := make([]int, 0, depth)
	for i := depth - 1; i >= 0; i-- {
		free = append(free, i)
	}
	slotExt := make([]int, depth)
	fd := int(r.f.Fd())
	var firstErr error
	next, done := 0, 0
	for done < next || (next < len(exts) && firstErr == nil) {
		for firstErr == nil && next < len(exts) && len(free) > 0 {
			sl := free[len(free)-1]
			x := exts[next]
			if !ring.PrepRead(fd, s.slab[int64(sl)*slot:int64(sl)*slot+x.Len], x.Off, uint64(sl)) {
				break
			}
			free = free[:len(free)-1]
			slotExt[sl] = next
			next++
		}
		// Wait for a quarter of the reads in flight: each
		// io_uring_enter then submits several, at the cost of a slightly
		// lower depth on average.
		if err := ring.Submit(max(1, ring.InFlight()/4)); err != nil {
			// Close waits for the reads the kernel took; the session
			// gets a fresh ring next time.
			ring.Close()
			s.ring = nil
			return cmp.Or(firstErr, fmt.Errorf("storage: %s: %w", r.name, err))
		}
		ring.Reap(func(ud uint64, res int32) {
			sl := int(ud)
			x := exts[slotExt[sl]]
			buf := s.slab[int64(sl)*slot : int64(sl+1)*slot]
			done++
			free = append(free, sl)
			switch {
			case firstErr != nil:
				return
			case res >= 0 && int64(res) >= r.need(x, s.reqs):
				r.stage.Read(int64(res))
			case res < 0 && unix.Errno(-res) != unix.EAGAIN && unix.Errno(-res) != unix.EINTR:
				firstErr = fmt.Errorf("storage: read %s: %d bytes at byte %d: %w", r.name, x.Len, x.Off, unix.Errno(-res))
				return
			default: // short or retryable: read it again with pread
				if err := r.preadExtent(x, s.reqs, buf); err != nil {
					firstErr = err
					return
				}
			}
			r.copyOut(x, buf, s.reqs, dst)
		})
	}
	return firstErr
}
