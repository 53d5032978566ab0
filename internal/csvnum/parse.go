package csvnum

import (
	"math"
	"strconv"
	"unsafe"
)

// Outcome of parsing one field.
const (
	parseOK = iota
	parseSyntax
	parseRange
)

// parseInt64 parses a decimal integer with an optional sign. It reports
// parseSyntax for anything else, and parseRange for well-formed integers
// outside the int64 range.
func parseInt64(b []byte) (int64, int) {
	i := 0
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	if i == len(b) {
		return 0, parseSyntax
	}
	const limit = uint64(1) << 63 // |MinInt64|
	var u uint64
	over := false
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			return 0, parseSyntax
		}
		if u > limit/10 {
			over = true // keep scanning: a later bad byte is a syntax error
			continue
		}
		u = u*10 + uint64(d)
		if u > limit {
			over = true
		}
	}
	switch {
	case over:
		return 0, parseRange
	case neg:
		return -int64(u), parseOK // u == limit wraps to MinInt64, as wanted
	case u == limit:
		return 0, parseRange
	}
	return int64(u), parseOK
}

// pow10 holds the powers of ten that are exact in float64.
var pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// fastInt64At parses [+-]digits starting at b[i], with at most 18 digits so
// that it cannot overflow, and returns the value and the index just past it.
// It reports false if there is no such prefix; the caller must check that
// the field ends at the returned index.
func fastInt64At(b []byte, i int) (int64, int, bool) {
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	start := i
	var u uint64
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
	}
	if nd := i - start; nd == 0 || nd > 18 {
		return 0, i, false
	}
	v := int64(u)
	if neg {
		v = -v
	}
	return v, i, true
}

// fastFloat32 parses all of b if it is a decimal fastFloat32At accepts.
func fastFloat32(b []byte) (float32, bool) {
	f, j, ok := fastFloat32At(b, 0)
	return f, ok && j == len(b)
}

// fastFloat32At parses a plain decimal, [+-]digits[.digits], starting at
// b[i], with at most 19 digits whose value m (ignoring the point) is below
// 2^53, and returns the float32 and the index just past the decimal. It
// reports false if there is no such prefix or for the rare inputs it cannot
// round correctly; the caller then uses strconv. The caller must check that
// the field ends at the returned index.
//
// Why it is exact: m and 10^k (k <= 19 digits after the point) are exact
// float64 values, so x = m/10^k is the true quotient t rounded once to
// float64. Rounding x to float32 gives the correctly rounded float32 of t
// unless a float32 rounding boundary (a midpoint between adjacent float32
// values, which has 25 significant bits and so is a float64 value) lies
// strictly between t and x, or at x. Since x is the float64 nearest t, no
// float64 value lies strictly between them, so the only bad case is x
// exactly on a midpoint: its low 29 mantissa bits are then 1<<28. Results
// stay in the normal float32 range (1e-19 <= |x| < 2^53), where that bit
// test is valid.
func fastFloat32At(b []byte, i int) (float32, int, bool) {
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var m uint64
	start := i
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		m = m*10 + uint64(d)
	}
	nd := i - start
	k := 0
	if i < len(b) && b[i] == '.' {
		i++
		fs := i
		for ; i < len(b); i++ {
			d := b[i] - '0'
			if d > 9 {
				break
			}
			m = m*10 + uint64(d)
		}
		k = i - fs
		nd += k
	}
	// nd <= 19 keeps m from wrapping, and k <= nd < len(pow10).
	if nd == 0 || nd > 19 || m >= 1<<53 {
		return 0, i, false
	}
	x := float64(m) / pow10[k]
	if math.Float64bits(x)&(1<<29-1) == 1<<28 {
		return 0, i, false
	}
	f := float32(x)
	if neg {
		f = -f
	}
	return f, i, true
}

// parseFloat32 parses b as strconv.ParseFloat(string(b), 32) would, without
// allocating unless b is invalid.
func parseFloat32(b []byte) (float32, int) {
	if f, ok := fastFloat32(b); ok {
		return f, parseOK
	}
	if len(b) == 0 {
		return 0, parseSyntax
	}
	// strconv does not retain s (error values copy it), so a view of the
	// line buffer is safe here.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, parseRange
		}
		return 0, parseSyntax
	}
	return float32(f), parseOK
}

// noFastFloat64 is Float64s' fast path: none (every field goes through
// parseFloat64).
func noFastFloat64(_ []byte, i int) (float64, int, bool) { return 0, i, false }

// parseFloat64 parses b as strconv.ParseFloat(string(b), 64) would.
func parseFloat64(b []byte) (float64, int) {
	if len(b) == 0 {
		return 0, parseSyntax
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // not retained (parseFloat32)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, parseRange
		}
		return 0, parseSyntax
	}
	return f, parseOK
}
