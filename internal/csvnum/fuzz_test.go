package csvnum

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzOptions are the reader configurations a fuzz input can pick.
var fuzzOptions = []*Options{
	nil,
	{Delim: ' ', Comment: "#"},
	{Delim: '\t', Comment: "%"},
	{Delim: ';', MaxLine: 40},
}

var fuzzSeeds = []string{
	"0,1\n1,2\r\n2,0",
	"\xef\xbb\xbf# c\n 1 ,2 \n\n,,\n1,,2,\n",
	"9223372036854775807,-9223372036854775808\n9223372036854775808\n",
	"0.123456,-0.500000,1.000000\n0,1,0,1\n",
	"-1.5e-3, .5 ,5.,inf,-Inf,nan,0x1p-2,1_000.5,1e39,1e-50\n",
	"16777217,16777219,0.000000059604644775390625\n",
	"1 2\n3\t4\n  % x\n# y\n5 \t 6\r\n",
	"1\r2\n\r\n\r",
}

// oracleFields splits a record the simple way, independently of Reader.
func oracleFields(rec []byte, o *Options) []string {
	d := o.withDefaults().Delim
	if d == ' ' {
		return strings.FieldsFunc(string(rec), func(c rune) bool { return c == ' ' || c == '\t' })
	}
	fs := strings.Split(string(rec), string(rune(d)))
	for i := range fs {
		fs[i] = strings.Trim(fs[i], " \t")
	}
	return fs
}

// checkRecord checks what every record must satisfy.
func checkRecord(t *testing.T, r *Reader, o *Options) []string {
	rec := r.Bytes()
	if bytes.IndexByte(rec, '\n') >= 0 || len(bytes.Trim(rec, " \t")) == 0 {
		t.Fatalf("line %d: bad record %q", r.Line(), rec)
	}
	if c := o.withDefaults().Comment; c != "" && bytes.HasPrefix(bytes.TrimLeft(rec, " \t"), []byte(c)) {
		t.Fatalf("line %d: comment returned as a record: %q", r.Line(), rec)
	}
	fs := oracleFields(rec, o)
	if r.NumFields() != len(fs) {
		t.Fatalf("line %d: NumFields %d, oracle %d fields in %q", r.Line(), r.NumFields(), len(fs), rec)
	}
	return fs
}

// checkFieldErr checks that err is the *ParseError for field col.
func checkFieldErr(t *testing.T, r *Reader, err error, col int, want error) {
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, want) || pe.Line != r.Line() || pe.Column != col {
		t.Fatalf("line %d %q: error %v, want %v at column %d", r.Line(), r.Bytes(), err, want, col)
	}
}

func joinFormatted[T any](vals []T, o *Options, format func([]byte, T) []byte) []byte {
	d := o.withDefaults().Delim
	var b []byte
	for i, v := range vals {
		if i > 0 {
			b = append(b, d)
		}
		b = format(b, v)
	}
	return append(b, '\n')
}

func isIntSyntax(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func FuzzInt64s(f *testing.F) {
	for _, s := range fuzzSeeds {
		for m := range fuzzOptions {
			f.Add([]byte(s), uint8(m))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		o := fuzzOptions[int(mode/2)%len(fuzzOptions)]
		size := 4096 // BufferSize would make every exec allocate 1 MiB
		if mode&1 == 1 {
			size = 16
		}
		r := newReaderSize(bytes.NewReader(data), "fuzz", o, size)
		var vals []int64
		for r.Next() {
			fs := checkRecord(t, r, o)
			var err error
			vals, err = r.Int64s(vals)
			// Oracle: the first field that is not [+-]digits is a syntax
			// error; otherwise strconv decides value or range error.
			for i, s := range fs {
				if !isIntSyntax(s) {
					checkFieldErr(t, r, err, i+1, ErrSyntax)
					break
				}
				v, perr := strconv.ParseInt(s, 10, 64)
				if perr != nil {
					checkFieldErr(t, r, err, i+1, ErrRange)
					break
				}
				if err == nil && vals[i] != v {
					t.Fatalf("line %d field %d %q: got %d, strconv %d", r.Line(), i+1, s, vals[i], v)
				}
			}
			if err != nil {
				continue
			}
			// Round trip.
			again := newReaderSize(bytes.NewReader(joinFormatted(vals, o, func(b []byte, v int64) []byte {
				return strconv.AppendInt(b, v, 10)
			})), "again", &Options{Delim: o.withDefaults().Delim}, size)
			if !again.Next() {
				t.Fatalf("round trip of %v: no record: %v", vals, again.Err())
			}
			got, err := again.Int64sN(nil, len(vals))
			if err != nil || !slices.Equal(got, vals) {
				t.Fatalf("round trip of %v: got %v, %v", vals, got, err)
			}
		}
		if err := r.Err(); err != nil && !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("Err = %v", err)
		}
	})
}

func sameFloat(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func FuzzFloat32s(f *testing.F) {
	for _, s := range fuzzSeeds {
		for m := range fuzzOptions {
			f.Add([]byte(s), uint8(m))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		// The fast path on the whole input must agree with strconv.
		checkFast(t, string(data))

		o := fuzzOptions[int(mode/2)%len(fuzzOptions)]
		size := 4096 // BufferSize would make every exec allocate 1 MiB
		if mode&1 == 1 {
			size = 16
		}
		r := newReaderSize(bytes.NewReader(data), "fuzz", o, size)
		var vals []float32
		for r.Next() {
			fs := checkRecord(t, r, o)
			var err error
			vals, err = r.Float32s(vals)
			for i, s := range fs {
				checkFast(t, s)
				v, perr := strconv.ParseFloat(s, 32)
				if perr != nil {
					want := ErrSyntax
					if perr.(*strconv.NumError).Err == strconv.ErrRange {
						want = ErrRange
					}
					checkFieldErr(t, r, err, i+1, want)
					break
				}
				if err == nil && !sameFloat(vals[i], float32(v)) {
					t.Fatalf("line %d field %d %q: got %v, strconv %v", r.Line(), i+1, s, vals[i], v)
				}
			}
			if err != nil {
				continue
			}
			again := newReaderSize(bytes.NewReader(joinFormatted(vals, o, func(b []byte, v float32) []byte {
				return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			})), "again", &Options{Delim: o.withDefaults().Delim}, size)
			if !again.Next() {
				t.Fatalf("round trip of %v: no record: %v", vals, again.Err())
			}
			got, err := again.Float32sN(nil, len(vals))
			if err != nil || len(got) != len(vals) {
				t.Fatalf("round trip of %v: got %v, %v", vals, got, err)
			}
			for i := range got {
				if !sameFloat(got[i], vals[i]) && !(got[i] != got[i] && vals[i] != vals[i]) {
					t.Fatalf("round trip of %v: got %v", vals, got)
				}
			}
		}
		if err := r.Err(); err != nil && !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("Err = %v", err)
		}
	})
}

// checkFast checks that the fast path, when it answers, agrees bit for bit
// with strconv.ParseFloat(s, 32).
func checkFast(t *testing.T, s string) {
	f, ok := fastFloat32([]byte(s))
	if !ok {
		return
	}
	v, err := strconv.ParseFloat(s, 32)
	if err != nil || !sameFloat(f, float32(v)) {
		t.Fatalf("fastFloat32(%q) = %v (%#x), strconv %v (%#x), %v", s, f, math.Float32bits(f), v, math.Float32bits(float32(v)), err)
	}
}

// FuzzFastFloat32 drives the fast path with well-formed decimals, which
// random bytes rarely are: digits of mant with the point frac places from
// the right.
func FuzzFastFloat32(f *testing.F) {
	f.Add(uint64(123456), uint8(6), false)
	f.Add(uint64(16777217), uint8(0), true)
	f.Add(uint64(1<<53-1), uint8(16), false)
	f.Fuzz(func(t *testing.T, mant uint64, frac uint8, neg bool) {
		s := decimal(mant, int(frac%24), neg)
		checkFast(t, s)
	})
}

// decimal formats mant with a point frac digits from the right.
func decimal(mant uint64, frac int, neg bool) string {
	d := strconv.FormatUint(mant, 10)
	for len(d) <= frac {
		d = "0" + d
	}
	s := d[:len(d)-frac]
	if frac > 0 {
		s += "." + d[len(d)-frac:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
