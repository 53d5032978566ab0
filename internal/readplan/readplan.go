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
//     as ssdgnn read before plans existed).
package readplan

import (
	"fmt"
	"math"
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
	}
	return nil
}

// span is the aligned byte range of row id.
func (o Options) span(id int64) (start, end int64) {
	pos := o.DataOff + id*o.RowBytes
	start = pos &^ (o.Align - 1)
	end = (pos + o.RowBytes + o.Align - 1) &^ (o.Align - 1)
	return start, end
}

// Plan appends to dst the extents that read ids, which must be sorted
// ascending (duplicates allowed), and returns it. o must be valid.
func Plan(ids []int64, o Options, dst []Extent) []Extent {
	if len(ids) == 0 {
		return dst
	}
	maxGap := o.GapRows * o.RowBytes
	s, e := o.span(ids[0])
	cur := Extent{Off: s, Len: e - s, First: 0, N: 1}
	for k := 1; k < len(ids); k++ {
		s, e := o.span(ids[k])
		curEnd := cur.Off + cur.Len
		if o.GapRows > 0 && s-curEnd < maxGap && max(e, curEnd)-cur.Off <= o.MaxBytes {
			cur.Len = max(e, curEnd) - cur.Off
			cur.N++
			continue
		}
		dst = append(dst, cur)
		cur = Extent{Off: s, Len: e - s, First: k, N: 1}
	}
	return append(dst, cur)
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
