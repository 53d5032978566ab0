package partition

import (
	"encoding/binary"
	"math/bits"

	"github.com/bits-and-blooms/bloom/v3"
)

// sliced holds the k Bloom filters of one level bit-sliced: every filter
// has the same m bits and h hash functions (bloom.EstimateParameters for
// the level's per-part cap and the false-positive rate), and row r (r < m)
// is a k-bit vector, padded to whole 64-bit words, whose bit j is bit r of
// part j's filter. Bit positions are the library's: the i-th position of
// key x is bloom.Locations(x, h)[i] mod m, exactly what a
// bloom.New(m, h) filter would set for x.
//
// A lookup ANDs the h rows of a key and yields every part whose filter
// (probably) holds it; an insert into part j sets bit j in h rows. The
// memory is m·64·ceil(k/64) bits, i.e. m·k bits (the same as k separate
// filters) plus the padding of each row to whole words.
type sliced struct {
	m     uint64
	h     uint
	k     int
	words int // 64-bit words per row
	bits  []uint64
	fm    fastMod
}

// newSliced sizes k filters for members elements each at false-positive
// rate fp.
func newSliced(k int, members int64, fp float64) *sliced {
	m, h := slicedParams(members, fp)
	w := (k + 63) / 64
	return &sliced{m: uint64(m), h: h, k: k, words: w, bits: make([]uint64, int(m)*w), fm: newFastMod(uint64(m))}
}

// slicedParams is the rows m and hash count h of filters for members
// elements at false-positive rate fp (bloom.EstimateParameters, at least
// 1 each).
func slicedParams(members int64, fp float64) (m, h uint) {
	m, h = bloom.EstimateParameters(uint(max(members, 1)), fp)
	return max(m, 1), max(h, 1)
}

// bytes is the memory of the bit matrix.
func (s *sliced) bytes() int64 { return int64(len(s.bits)) * 8 }

// reset clears every filter.
func (s *sliced) reset() { clear(s.bits) }

// row returns row r.
func (s *sliced) row(loc uint64) []uint64 {
	r := int(s.fm.mod(loc)) * s.words
	return s.bits[r : r+s.words : r+s.words]
}

// add inserts the key with hash locations locs (at least h of them) into
// part j.
func (s *sliced) add(locs []uint64, j int) {
	w, b := j>>6, uint64(1)<<(j&63)
	for _, l := range locs[:s.h] {
		s.row(l)[w] |= b
	}
}

// lookup ANDs the key's rows into dst (len words) and reports whether any
// bit is set.
func (s *sliced) lookup(locs []uint64, dst []uint64) bool {
	if s.words == 1 {
		x := ^uint64(0)
		for _, l := range locs[:s.h] {
			x &= s.bits[s.fm.mod(l)]
			if x == 0 {
				break
			}
		}
		dst[0] = x
		return x != 0
	}
	if s.words == 2 {
		x0, x1 := ^uint64(0), ^uint64(0)
		for _, l := range locs[:s.h] {
			r := int(s.fm.mod(l)) * 2
			x0 &= s.bits[r]
			x1 &= s.bits[r+1]
			if x0|x1 == 0 {
				break
			}
		}
		dst[0], dst[1] = x0, x1
		return x0|x1 != 0
	}
	copy(dst, s.row(locs[0]))
	for _, l := range locs[1:s.h] {
		var any uint64
		r := s.row(l)
		for i := range dst {
			dst[i] &= r[i]
			any |= dst[i]
		}
		if any == 0 {
			return false
		}
	}
	for _, x := range dst {
		if x != 0 {
			return true
		}
	}
	return false
}

// forEach calls f for every set bit of mask.
func forEach(mask []uint64, f func(p int32)) {
	for i, x := range mask {
		for x != 0 {
			f(int32(i<<6 + bits.TrailingZeros64(x)))
			x &= x - 1
		}
	}
}

// hasher computes bloom.Locations for node ids, reusing a one-entry cache
// of the last key (a node that is the neighbour of consecutive stream
// nodes, or looked up twice, is hashed once).
type hasher struct {
	h    uint
	key  [8]byte
	last int64
	locs []uint64
}

func newHasher(h uint) *hasher { return &hasher{h: h, last: -1} }

// locations returns u's first h hash locations; the slice is valid until
// the next call.
func (hs *hasher) locations(u int64) []uint64 {
	if u == hs.last {
		return hs.locs
	}
	binary.LittleEndian.PutUint64(hs.key[:], uint64(u))
	hs.locs = bloom.Locations(hs.key[:], hs.h)
	hs.last = u
	return hs.locs
}

// fastMod computes x mod d for 64-bit x and a fixed divisor d < 2^63
// without a division instruction (Lemire, Kaser & Kurz, "Faster remainder
// by direct computation", 2019: M = ceil(2^128/d), x mod d =
// floor(((M·x) mod 2^128)·d / 2^128)). TestFastMod checks it against %.
type fastMod struct {
	d      uint64
	mh, ml uint64 // M = mh·2^64 + ml
}

func newFastMod(d uint64) fastMod {
	if d == 1 {
		return fastMod{d: 1} // M·x ≡ 0: every remainder is 0
	}
	// M = floor((2^128 − 1)/d) + 1, by long division of (2^64−1, 2^64−1).
	qh := ^uint64(0) / d
	r := ^uint64(0) % d
	ql, _ := bits.Div64(r, ^uint64(0), d)
	ml, c := bits.Add64(ql, 1, 0)
	return fastMod{d: d, mh: qh + c, ml: ml}
}

func (f fastMod) mod(x uint64) uint64 {
	// low = (M·x) mod 2^128
	h1, l := bits.Mul64(f.ml, x)
	h := h1 + f.mh*x
	// result = floor(low·d / 2^128)
	a1, _ := bits.Mul64(l, f.d)
	b1, b0 := bits.Mul64(h, f.d)
	_, c := bits.Add64(b0, a1, 0)
	return b1 + c
}
