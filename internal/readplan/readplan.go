// Package readplan turns a batch of row reads into a few large reads.
//
// Given the row ids a batch misses, sorted ascending, Plan merges rows
// whose gap is small into one extent (one read call) and leaves the rest
// as single-row extents. Reading a gap costs bandwidth; starting a read
// costs a random access. Gap derives the break-even gap from the two
// measured costs (see docs/ooc.md, "Gather in big pieces").
//
// Invariants of Plan's result, for ids sorted ascending (duplicates
// allowed):
//   - the extents are in ascending offset order and cover the indexes of
//     ids in order: extent k covers ids[First:First+N], and the First of
//     extent k+1 is First+N of extent k; every index is covered exactly
//     once;
//   - an extent's bytes [Off, Off+Len) hold the whole of every row it
//     covers, and Off and Len are multiples of Options.Align;
//   - Len is at most max(Options.MaxBytes, the aligned span of one row);
//   - with GapRows 0 every extent covers one index (a row read on its own,
//     as ssdgnn read before plans existed);
//   - with MaxAmplification a > 1, the bytes the plan reads are at most
//     a times the bytes of the union of the rows' aligned spans (what
//     the rows themselves occupy) plus Options.CreditBytes (rows the
//     caller needs but serves itself), not counting blocks that two extents
//     share (rows sharing a block, split by MaxBytes), which any plan
//     reads twice: gaps are merged
//     smallest first while they fit, so the plan saves the most read
//     calls the byte budget allows.
package readplan

import (
	"fmt"
	"math"
	"slices"
)

// Extent is one read: Len bytes at file offset Off, covering the ids at
// indexes [First, First+N) of the planned slice.
type Extent struct {
	Off, Len int64
	First, N int
}

// Options describes the file and the merge rule. The zero value is not
// usable; see Validate.
type Options struct {
	// RowBytes is the size of one row; row id's bytes start at
	// DataOff + id·RowBytes.
	RowBytes int64
	DataOff  int64
	// Align is the offset and length alignment of every read (1: none;
	// O_DIRECT: the file system's direct-I/O alignment). A power of two.
	Align int64
	// GapRows merges two neighbouring rows into one read when fewer than
	// GapRows unneeded rows' worth of bytes lie between them. 0 reads
	// every row on its own.
	GapRows int64
	// MaxBytes caps a merged extent's length. An extent of a single row
	// may exceed it when the row's aligned span does.
	MaxBytes int64
	// MaxAmplification caps the bytes a plan reads at this multiple of
	// the bytes its rows occupy (0: no cap; otherwise >= 1). Each merged
	// gap saves one read call and costs its bytes; under the cap the
	// smallest gaps are merged first. Break-even GapRows alone merges
	// whatever is cheaper in device time, which on a dense batch can
	// read several times the requested bytes; the cap bounds that
	// traffic (docs/ooc.md, "Gather in big pieces").
	MaxAmplification float64
	// CreditBytes are bytes the caller needs among the planned rows but
	// does not read (rows it serves from memory, such as a cache's hits
	// between its misses). The cap counts them as needed: the plan reads
	// at most MaxAmplification × (the rows' union + CreditBytes). Without
	// the credit, every row a cache serves would shrink the cap's budget
	// while widening the gaps around it, so a larger cache would make
	// more read calls (docs/ooc.md, "Cache hits count under the cap").
	CreditBytes int64
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	switch {
	case o.RowBytes <= 0:
		return fmt.Errorf("readplan: RowBytes %d, want > 0", o.RowBytes)
	case o.DataOff < 0:
		return fmt.Errorf("readplan: DataOff %d, want >= 0", o.DataOff)
	case o.Align <= 0 || o.Align&(o.Align-1) != 0:
		return fmt.Errorf("readplan: Align %d, want a power of two", o.Align)
	case o.GapRows < 0:
		return fmt.Errorf("readplan: GapRows %d, want >= 0", o.GapRows)
	case o.MaxBytes <= 0:
		return fmt.Errorf("readplan: MaxBytes %d, want > 0", o.MaxBytes)
	case o.MaxAmplification != 0 && !(o.MaxAmplification >= 1) || math.IsInf(o.MaxAmplification, 0):
		return fmt.Errorf("readplan: MaxAmplification %v, want 0 or a finite value >= 1", o.MaxAmplification)
	case o.CreditBytes < 0:
		return fmt.Errorf("readplan: CreditBytes %d, want >= 0", o.CreditBytes)
	}
	return nil
}

// span is the aligned byte range of rows [id, id+n).
func (o Options) span(id, n int64) (start, end int64) {
	pos := o.DataOff + id*o.RowBytes
	start = pos &^ (o.Align - 1)
	end = (pos + n*o.RowBytes + o.Align - 1) &^ (o.Align - 1)
	return start, end
}

// Plan appends to dst the extents that read ids, which must be sorted
// ascending (duplicates allowed), and returns it. o must be valid. With
// a MaxAmplification cap it allocates scratch; a Planner reuses it.
func Plan(ids []int64, o Options, dst []Extent) []Extent {
	var p Planner
	return p.Plan(ids, o, dst)
}

// Planner plans reads like Plan, keeping the scratch that the
// MaxAmplification cap needs between calls. The zero value is ready; a
// Planner is not safe for concurrent use.
type Planner struct {
	gaps []int64
}

// Plan is the package's Plan, with p's scratch.
func (p *Planner) Plan(ids []int64, o Options, dst []Extent) []Extent {
	p.Walk(ids, o, func(x Extent) { dst = append(dst, x) })
	return dst
}

// Walk calls fn with every extent Plan would return for ids, in order,
// without holding them: a caller that only counts reads (the profiling
// epoch's I/O model) needs no slice of a batch's extents.
func (p *Planner) Walk(ids []int64, o Options, fn func(Extent)) {
	p.walk(len(ids), func(k int) (int64, int64) { return o.span(ids[k], 1) }, o, fn)
}

// Range is N consecutive rows from Row: a variable-length item, such as
// a neighbour list in indices.npy or a node's pair of offsets in
// indptr.npy. N is at least 1.
type Range struct {
	Row, N int64
}

// WalkFunc is Walk for n ranges of rows, range k being at(k), sorted by
// Row (overlaps allowed); the caller keeps the ranges in its own records.
// Extent k covers ranges [First, First+N), every range whole. A range
// whose aligned span exceeds MaxBytes is an extent of its own, as a
// single row's is; a caller that reads into MaxBytes slots splits such
// ranges first. The invariants of the package doc hold with "row" read
// as "range".
func (p *Planner) WalkFunc(n int, at func(k int) Range, o Options, fn func(Extent)) {
	p.walk(n, func(k int) (int64, int64) { r := at(k); return o.span(r.Row, r.N) }, o, fn)
}

// GapsBytes is the scratch the planner keeps for the amplification cap:
// 8 bytes per gap of the largest capped plan so far, with a quarter's
// slack.
func (p *Planner) GapsBytes() int64 { return 8 * int64(cap(p.gaps)) }

// walk plans n items in ascending order of their aligned spans' starts.
func (p *Planner) walk(n int, span func(int) (int64, int64), o Options, fn func(Extent)) {
	if n == 0 {
		return
	}
	maxGap := o.GapRows * o.RowBytes
	if o.GapRows > 0 && o.MaxAmplification > 0 {
		maxGap = p.cappedGap(n, span, o, maxGap)
	}
	s, e := span(0)
	cur := Extent{Off: s, Len: e - s, First: 0, N: 1}
	for k := 1; k < n; k++ {
		s, e := span(k)
		curEnd := cur.Off + cur.Len
		if o.GapRows > 0 && s-curEnd < maxGap && max(e, curEnd)-cur.Off <= o.MaxBytes {
			cur.Len = max(e, curEnd) - cur.Off
			cur.N++
			continue
		}
		fn(cur)
		cur = Extent{Off: s, Len: e - s, First: k, N: 1}
	}
	fn(cur)
}

// cappedGap lowers the merge threshold maxGap (bytes; gaps strictly
// below it merge) so that the bytes read fit in MaxAmplification times
// the bytes needed, the items' spans plus CreditBytes: the gaps merged
// fit in (MaxAmplification-1)·union + MaxAmplification·CreditBytes. Candidates are the positive
// gaps below maxGap between consecutive spans; merging the smallest
// first saves the most reads for the bytes. Gaps of zero or less
// (adjacent or shared blocks) always merge: they cost nothing.
func (p *Planner) cappedGap(n int, span func(int) (int64, int64), o Options, maxGap int64) int64 {
	if cap(p.gaps) < n-1 { // room for every gap with a quarter's slack (GapsBytes)
		p.gaps = make([]int64, 0, n-1+(n-1)/4)
	}
	gaps := p.gaps[:0]
	s0, prevEnd := span(0)
	union, sum := prevEnd-s0, int64(0)
	for k := 1; k < n; k++ {
		s, e := span(k)
		if g := s - prevEnd; g > 0 {
			if g < maxGap {
				gaps = append(gaps, g)
				sum += g
			}
			union += e - s
		} else if e > prevEnd {
			union += e - prevEnd
		}
		prevEnd = max(prevEnd, e)
	}
	p.gaps = gaps
	budget := int64((o.MaxAmplification-1)*float64(union) + o.MaxAmplification*float64(o.CreditBytes))
	if sum <= budget {
		return maxGap
	}
	slices.Sort(gaps)
	var used int64
	limit := int64(1) // merge gaps <= 0 only
	for i := 0; i < len(gaps); {
		// Take all gaps of one size together, or none of them.
		j, add := i, int64(0)
		for j < len(gaps) && gaps[j] == gaps[i] {
			add += gaps[j]
			j++
		}
		if used+add > budget {
			break
		}
		used += add
		limit = gaps[i] + 1
		i = j
	}
	return limit
}

// Gap is the break-even gap in rows: reading g unneeded rows of rowBytes
// at seqBytesPerSec costs less than one more random read of randomSec
// when g < Gap. It is at least 1 (adjacent rows are always worth one
// read) and 0 only when a cost is unknown (<= 0 or not finite).
func Gap(randomSec, seqBytesPerSec float64, rowBytes int64) int64 {
	if !(randomSec > 0) || !(seqBytesPerSec > 0) || rowBytes <= 0 ||
		math.IsInf(randomSec, 0) || math.IsInf(seqBytesPerSec, 0) {
		return 0
	}
	g := randomSec * seqBytesPerSec / float64(rowBytes)
	return max(1, int64(math.Min(g, 1<<20)))
}

// Stats summarises a plan.
type Stats struct {
	Rows   int   // ids planned
	Reads  int   // extents
	Merged int   // extents of more than one id
	Bytes  int64 // Σ Len: bytes the plan reads
}

// Summarise counts exts.
func Summarise(exts []Extent) Stats {
	var s Stats
	for _, x := range exts {
		s.Rows += x.N
		s.Reads++
		s.Bytes += x.Len
		if x.N > 1 {
			s.Merged++
		}
	}
	return s
}
