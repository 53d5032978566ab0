package extsort

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/radix"
)

// Edge is a directed edge. Ids must be non-negative.
type Edge struct{ Src, Dst int64 }

// Stats describes the work a Sorter did.
type Stats struct {
	Edges        int64 // edges accepted by Add/AddBatch
	Runs         int64 // runs spilled from the buffer (not counting intermediate merge outputs)
	MergePasses  int64 // merges of run files, each of at most MaxFanIn inputs, the final streaming merge included
	SpilledBytes int64 // bytes written to run files, intermediate merges included
	Duplicates   int64 // pairs dropped by Dedup; final once iteration has completed
}

// initialRecords is the starting buffer capacity in records.
const initialRecords = 4096

type state uint8

const (
	stateAdding state = iota
	stateSorted
	stateClosed
)

// Sorter accumulates edges and sorts them. It is not safe for concurrent
// use. Always call Close.
type Sorter struct {
	opts  Options
	state state
	err   error // sticky failure; temp files are already gone when set

	packed  bool     // buffer holds packed keys (all ids so far < 2^32)
	keys    []uint64 // packed buffer; with ByRow, Src<<32 | position in the buffer
	dsts    []uint32 // ByRow packed buffer: Dst of the edge at each position
	wide    []Edge   // wide buffer
	maxKeys int      // buffer limits in records
	maxWide int
	counted int64 // buffer bytes counted in memacct.EdgeSort

	runs  []run               // spilled, unmerged runs, oldest first
	files map[string]struct{} // temp files on disk that this Sorter owns
	it    *Iterator
	stats Stats
}

// New returns a Sorter. A nil opts means the defaults. New checks that
// TempDir is a directory but creates nothing in it.
func New(opts *Options) (*Sorter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	fi, err := os.Stat(o.TempDir)
	if err != nil {
		return nil, opterr.Errorf(ErrInvalidOptions, "%s: %w", opterr.Field("TempDir"), err)
	}
	if !fi.IsDir() {
		return nil, opterr.Errorf(ErrInvalidOptions, "%s %s is not a directory", opterr.Field("TempDir"), o.TempDir)
	}
	return &Sorter{
		opts:    o,
		packed:  true,
		maxKeys: int(min(o.MemBytes/int64(packedBytes(o.ByRow)), math.MaxInt32)),
		maxWide: int(min(o.MemBytes/16, math.MaxInt32)),
		files:   make(map[string]struct{}),
	}, nil
}

// packedBytes is the buffer memory of one packed record: the key, and
// with ByRow the Dst beside it (the key holds the position instead).
func packedBytes(byRow bool) int {
	if byRow {
		return 12
	}
	return 8
}

// growCap returns the capacity to grow a full buffer of capacity c to
// under limit (both in records), or c when it cannot grow. The ladder
// doubles while the old and the new buffer together, as a growth step
// holds them, stay within limit; the last step takes what the old buffer
// leaves. So the buffer never holds more than limit records, a growth
// step included, and its final capacity lies between 1/2 and 2/3 of
// limit (or is the first capacity, min(initialRecords, limit), when that
// is more than limit/2): with old + new ≤ limit and new ≥ old, new is at
// most 2/3 of it (TestGrowCapLadder).
func growCap(c, limit int) int {
	if 3*c <= limit {
		return 2 * c
	}
	return max(c, limit-c)
}

// collectBeforeBytes is the smallest buffer allocation that runs the
// garbage collector first (collectBefore).
const collectBeforeBytes = 8 << 20

// collectBefore runs the garbage collector before a buffer of size bytes
// is allocated, when it is large: the buffers of the earlier growth steps
// are garbage by then, and a large allocation is made before the collector
// it triggers can free them, so without this the process briefly holds
// them, the live buffer and the new one (measured: 173 MiB anonymous
// memory for a 136 MiB budget under a 152 MiB Go memory limit). A growth
// ladder has about a dozen steps, few of them this large, and the heap is
// mostly the pointer-free buffer, so each collection is cheap.
func collectBefore(size int64) {
	if size >= collectBeforeBytes {
		runtime.GC()
	}
}

// account counts the buffer bytes held now in memacct.EdgeSort.
func (s *Sorter) account() {
	b := int64(cap(s.keys))*8 + int64(cap(s.dsts))*4 + int64(cap(s.wide))*16
	memacct.Add(memacct.EdgeSort, b-s.counted)
	s.counted = b
}

func (s *Sorter) check() error {
	switch {
	case s.err != nil:
		return s.err
	case s.state == stateClosed:
		return ErrClosed
	case s.state == stateSorted:
		return ErrSorted
	}
	return nil
}

// Add buffers one edge, spilling a sorted run when the buffer is full.
// Negative ids are rejected with ErrNegativeID and leave the Sorter usable;
// any other error is final.
func (s *Sorter) Add(e Edge) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.add(e)
}

func (s *Sorter) add(e Edge) error {
	if e.Src < 0 || e.Dst < 0 {
		return fmt.Errorf("%w: edge (%d, %d)", ErrNegativeID, e.Src, e.Dst)
	}
	if s.packed {
		if uint64(e.Src)|uint64(e.Dst) <= math.MaxUint32 {
			if len(s.keys) == cap(s.keys) {
				if err := s.makeRoomKeys(); err != nil {
					return err
				}
			}
			if s.opts.ByRow {
				// The position makes every key distinct, so sorting
				// the keys sorts by (Src, input order).
				s.keys = append(s.keys, uint64(e.Src)<<32|uint64(len(s.keys)))
				s.dsts = append(s.dsts, uint32(e.Dst))
			} else {
				s.keys = append(s.keys, packEdge(e))
			}
			s.stats.Edges++
			return nil
		}
		if err := s.switchToWide(); err != nil {
			return err
		}
	}
	if len(s.wide) == cap(s.wide) {
		if err := s.makeRoomWide(); err != nil {
			return err
		}
	}
	s.wide = append(s.wide, e)
	s.stats.Edges++
	return nil
}

// AddBatch adds every edge of es in order. On error, the edges before the
// failing one have been added.
func (s *Sorter) AddBatch(es []Edge) error {
	if err := s.check(); err != nil {
		return err
	}
	for _, e := range es {
		if err := s.add(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sorter) makeRoomKeys() error {
	rec := int64(packedBytes(s.opts.ByRow))
	switch c := cap(s.keys); {
	case c == 0:
		s.keys = make([]uint64, 0, min(initialRecords, s.maxKeys))
		if s.opts.ByRow {
			s.dsts = make([]uint32, 0, cap(s.keys))
		}
	case growCap(c, s.maxKeys) > c:
		nc := growCap(c, s.maxKeys)
		collectBefore(rec * int64(nc))
		nk := make([]uint64, len(s.keys), nc)
		copy(nk, s.keys)
		var nd []uint32
		if s.opts.ByRow {
			nd = make([]uint32, len(s.dsts), nc)
			copy(nd, s.dsts)
		}
		s.account() // both buffers, the growth step's peak
		memacct.Add(memacct.EdgeSort, int64(nc)*rec)
		s.counted += int64(nc) * rec
		s.keys, s.dsts = nk, nd
	default:
		return s.spill()
	}
	s.account()
	return nil
}

func (s *Sorter) makeRoomWide() error {
	switch c := cap(s.wide); {
	case c == 0:
		s.wide = make([]Edge, 0, min(initialRecords, s.maxWide))
	case growCap(c, s.maxWide) > c:
		collectBefore(16 * int64(growCap(c, s.maxWide)))
		nw := make([]Edge, len(s.wide), growCap(c, s.maxWide))
		copy(nw, s.wide)
		s.account()
		memacct.Add(memacct.EdgeSort, int64(cap(nw))*16)
		s.counted += int64(cap(nw)) * 16
		s.wide = nw
	default:
		return s.spill()
	}
	s.account()
	return nil
}

// switchToWide moves the Sorter to 16-byte records. The packed buffer is
// converted in memory when the old buffer (8 bytes per record of its
// capacity) and a wide one with room for its records (16 bytes each) fit
// in the budget together; otherwise it is spilled first.
func (s *Sorter) switchToWide() error {
	n := len(s.keys)
	room := int((s.opts.MemBytes - int64(packedBytes(s.opts.ByRow))*int64(cap(s.keys))) / 16) // wide records that fit beside the packed buffer
	if room > s.maxWide {
		room = s.maxWide
	}
	if n > 0 && room <= n {
		if err := s.spill(); err != nil {
			return err
		}
		n, room = 0, 0
	}
	if n == 0 {
		s.keys, s.dsts = nil, nil
		s.account()
		room = min(initialRecords, s.maxWide)
	}
	s.wide = make([]Edge, n, room)
	for i, k := range s.keys {
		if s.opts.ByRow { // not sorted yet: position i holds edge i
			s.wide[i] = Edge{Src: int64(k >> 32), Dst: int64(s.dsts[i])}
		} else {
			s.wide[i] = unpackEdge(k)
		}
	}
	s.account() // both buffers
	s.keys, s.dsts = nil, nil
	s.packed = false
	s.account()
	return nil
}

// sortBuffer sorts (and with Dedup compacts) the in-memory buffer.
func (s *Sorter) sortBuffer() {
	var d int64
	switch {
	case s.packed:
		radix.Sort(s.keys)
		if s.opts.Dedup {
			s.keys, d = dedupKeys(s.keys)
		}
	case s.opts.ByRow:
		sortEdgesByRow(s.wide)
	default:
		sortEdges(s.wide)
		if s.opts.Dedup {
			s.wide, d = dedupEdges(s.wide)
		}
	}
	s.stats.Duplicates += d
}

// spill sorts the buffer and writes it as a run. Any error is final.
func (s *Sorter) spill() error {
	s.sortBuffer()
	enc := encWide
	if s.packed {
		enc = encPacked
	}
	w, err := createRun(s.opts.TempDir, enc)
	if err != nil {
		return s.fail(err)
	}
	s.files[w.path] = struct{}{}
	if s.packed {
		for _, k := range s.keys {
			if s.opts.ByRow {
				k = k&^math.MaxUint32 | uint64(s.dsts[uint32(k)])
			}
			if err = w.putKey(k); err != nil {
				break
			}
		}
	} else {
		for _, e := range s.wide {
			if err = w.putEdge(e); err != nil {
				break
			}
		}
	}
	r, err := s.finishRun(w, err)
	if err != nil {
		return err
	}
	s.runs = append(s.runs, r)
	s.stats.Runs++
	s.keys, s.dsts, s.wide = s.keys[:0], s.dsts[:0], s.wide[:0]
	return nil
}

// finishRun completes w unless err is already set, and accounts its bytes.
func (s *Sorter) finishRun(w *runWriter, err error) (run, error) {
	var r run
	if err == nil {
		r, err = w.finish()
	}
	s.stats.SpilledBytes += w.bytes
	if err != nil {
		w.abort()
		delete(s.files, w.path)
		return run{}, s.fail(err)
	}
	return r, nil
}

// Sort ends the input and returns an iterator over the sorted edges. When
// there are more runs than MaxFanIn, Sort first performs intermediate
// merges. No Add is allowed afterwards. The Iterator is owned by s.
func (s *Sorter) Sort() (*Iterator, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.state = stateSorted
	s.sortBuffer()
	mem := 0
	if len(s.keys)+len(s.wide) > 0 {
		mem = 1
	}
	fan := s.opts.MaxFanIn
	if s.opts.ByRow {
		// Runs must stay in input order, so each merge takes adjacent
		// runs and its output takes their place: a pass over the list
		// merges groups of up to MaxFanIn, each only as large as needed
		// to bring the inputs down to MaxFanIn, and starts over from the
		// front when it reaches the end (every pass reads the data once).
		at := 0
		for total := len(s.runs) + mem; total > fan; total = len(s.runs) + mem {
			if at >= len(s.runs)-1 {
				at = 0
			}
			k := min(fan, total-fan+1, len(s.runs)-at)
			if err := s.mergeRuns(at, k); err != nil {
				return nil, err
			}
			at++
		}
	}
	// Merge the oldest runs first. The first merge takes just enough runs
	// that every later one can take a full MaxFanIn and the last leaves
	// exactly MaxFanIn inputs (the in-memory buffer counts as one).
	for total := len(s.runs) + mem; total > fan; total = len(s.runs) + mem {
		k := 2 + (total-2)%(fan-1)
		if err := s.mergeRuns(0, k); err != nil {
			return nil, err
		}
	}
	srcs := make([]*source, 0, len(s.runs)+mem)
	it := &Iterator{s: s}
	for _, r := range s.runs {
		rr, err := openRun(r.path, s.order())
		if err != nil {
			for _, src := range srcs {
				_ = src.r.close()
			}
			return nil, s.fail(err)
		}
		srcs = append(srcs, &source{r: rr})
	}
	if mem == 1 { // the newest input: last, for ByRow's ties
		srcs = append(srcs, &source{keys: s.keys, dsts: s.dsts, wide: s.wide})
	}
	if len(s.runs) > 0 {
		s.stats.MergePasses++
	}
	it.runs, s.runs = s.runs, nil
	it.m = newMerger(srcs, s.order(), &s.stats.Duplicates)
	s.it = it
	return it, nil
}

// order is the order of s's runs and output.
func (s *Sorter) order() order {
	switch {
	case s.opts.ByRow:
		return orderByRow
	case s.opts.Dedup:
		return orderStrict
	}
	return orderAsc
}

// mergeRuns merges the k runs from index at into one new run. With ByRow
// the new run takes their place, so runs stay in input order; otherwise
// (at is 0, the oldest) it is appended at the end.
func (s *Sorter) mergeRuns(at, k int) error {
	in := s.runs[at : at+k]
	enc := encPacked
	srcs := make([]*source, 0, k)
	for _, r := range in {
		if r.enc == encWide {
			enc = encWide
		}
		rr, err := openRun(r.path, s.order())
		if err != nil {
			newMerger(srcs, orderAsc, nil).close()
			return s.fail(err)
		}
		srcs = append(srcs, &source{r: rr})
	}
	m := newMerger(srcs, s.order(), &s.stats.Duplicates)
	w, err := createRun(s.opts.TempDir, enc)
	if err != nil {
		m.close()
		return s.fail(err)
	}
	s.files[w.path] = struct{}{}
	for {
		e, ok := m.next()
		if !ok {
			err = m.err
			break
		}
		if err = w.putEdge(e); err != nil {
			break
		}
	}
	if cerr := m.close(); err == nil {
		err = cerr
	}
	out, err := s.finishRun(w, err)
	if err != nil {
		return err
	}
	for _, r := range in {
		if err := s.removeFile(r.path); err != nil {
			return s.fail(err)
		}
	}
	if s.opts.ByRow {
		s.runs = slices.Replace(s.runs, at, at+k, out)
	} else {
		s.runs = append(s.runs[k:], out)
	}
	s.stats.MergePasses++
	return nil
}

// fail records a final error and removes every temp file.
func (s *Sorter) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	_ = s.cleanup()
	return err
}

// cleanup closes the iterator, removes every temp file and drops buffers.
func (s *Sorter) cleanup() error {
	var first error
	if s.it != nil {
		first = s.it.Close()
	}
	for p := range s.files {
		if err := s.removeFile(p); err != nil && first == nil {
			first = err
		}
	}
	s.runs = nil
	s.releaseBuffers()
	return first
}

func (s *Sorter) removeFile(path string) error {
	delete(s.files, path)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("extsort: remove run: %w", err)
	}
	return nil
}

func (s *Sorter) releaseBuffers() {
	s.keys, s.dsts, s.wide = nil, nil, nil
	s.account()
}

// Close releases the buffer, closes the iterator and removes every temp
// file. It is safe to call more than once and after errors.
func (s *Sorter) Close() error {
	if s.state == stateClosed {
		return nil
	}
	s.state = stateClosed
	return s.cleanup()
}

// Stats returns counters of the work done so far.
func (s *Sorter) Stats() Stats { return s.stats }
