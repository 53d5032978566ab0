package csvnum

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// readAllInts reads every record with Int64s (n == 0) or Int64sN and stops
// at the first field error or stream error.
func readAllInts(r *Reader, n int) ([][]int64, []int64, error) {
	var rows [][]int64
	var lines []int64
	var buf []int64
	for r.Next() {
		var err error
		if n == 0 {
			buf, err = r.Int64s(buf)
		} else {
			buf, err = r.Int64sN(buf, n)
		}
		if err != nil {
			return rows, lines, err
		}
		rows = append(rows, append([]int64(nil), buf...))
		lines = append(lines, r.Line())
	}
	return rows, lines, r.Err()
}

func readAllFloats(r *Reader, n int) ([][]float32, error) {
	var rows [][]float32
	var buf []float32
	for r.Next() {
		var err error
		if n == 0 {
			buf, err = r.Float32s(buf)
		} else {
			buf, err = r.Float32sN(buf, n)
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, append([]float32(nil), buf...))
	}
	return rows, r.Err()
}

func TestInt64s(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	ws := &Options{Delim: ' ', Comment: "#"}
	tests := []struct {
		name    string
		in      string
		opts    *Options
		n       int // 0: Int64s, else Int64sN(n)
		want    [][]int64
		lines   []int64 // Line() of each wanted row; nil: 1, 2, 3, ...
		wantErr string  // exact Error() text; "" means no error
		is      error
		line    int64
		col     int
	}{
		{name: "edges", in: "0,1\n1,2\n2,0\n", n: 2, want: [][]int64{{0, 1}, {1, 2}, {2, 0}}},
		{name: "no final newline", in: "0,1\n5,6", n: 2, want: [][]int64{{0, 1}, {5, 6}}},
		{name: "crlf", in: "0,1\r\n5,6\r\n", n: 2, want: [][]int64{{0, 1}, {5, 6}}},
		{name: "crlf no final newline", in: "0,1\r\n5,6\r", n: 2, want: [][]int64{{0, 1}, {5, 6}}},
		{name: "bom", in: "\xef\xbb\xbf7\n8\n", want: [][]int64{{7}, {8}}},
		{name: "bom then blank", in: "\xef\xbb\xbf\n8\n", want: [][]int64{{8}}, lines: []int64{2}},
		{name: "spaces around fields", in: " 1, 2 \n\t3 ,\t4\t\n", n: 2, want: [][]int64{{1, 2}, {3, 4}}},
		{name: "signs and zeros", in: "+5,-5,007,-0\n", want: [][]int64{{5, -5, 7, 0}}},
		{name: "extremes", in: "9223372036854775807,-9223372036854775808\n", want: [][]int64{{maxI, minI}}},
		{name: "blank lines", in: "\n1\n\n  \t\n\r\n2\n\n", want: [][]int64{{1}, {2}}, lines: []int64{2, 6}},
		{name: "empty input", in: "", want: nil},
		{name: "only blanks", in: "\n\n \r\n", want: nil},
		{name: "comments", in: "# header\n1 2\n  % other\n\t# indented\n3\t4\n", opts: &Options{Delim: ' ', Comment: "#"},
			wantErr: "e.csv: line 3, column 1: invalid integer \"%\"", is: ErrSyntax, line: 3, col: 1, want: [][]int64{{1, 2}}},
		{name: "percent comments", in: "% header\n%\n1 2\n", opts: &Options{Delim: ' ', Comment: "%"}, want: [][]int64{{1, 2}}, lines: []int64{3}},
		{name: "whitespace mode", in: "  1 2\n3\t4\n5 \t  6  \n7\t\t8\r\n", opts: ws, n: 2, want: [][]int64{{1, 2}, {3, 4}, {5, 6}, {7, 8}}},
		{name: "tab delim", in: "1\t2\n3 \t 4\n", opts: &Options{Delim: '\t'}, n: 2, want: [][]int64{{1, 2}, {3, 4}}},
		{name: "semicolon delim", in: "1;2\n", opts: &Options{Delim: ';'}, n: 2, want: [][]int64{{1, 2}}},

		{name: "too many columns", in: "0,1\n1,2,3\n", n: 2, want: [][]int64{{0, 1}},
			wantErr: "e.csv: line 2: got 3 fields, want 2", is: ErrColumns, line: 2},
		{name: "too few columns", in: "0,1\n\n7\n", n: 2, want: [][]int64{{0, 1}},
			wantErr: "e.csv: line 3: got 1 fields, want 2", is: ErrColumns, line: 3},
		{name: "ws too few columns", in: "1 2\n3 \n", opts: ws, n: 2, want: [][]int64{{1, 2}},
			wantErr: "e.csv: line 2: got 1 fields, want 2", is: ErrColumns, line: 2},
		{name: "non numeric", in: "1,abc\n", wantErr: "e.csv: line 1, column 2: invalid integer \"abc\"", is: ErrSyntax, line: 1, col: 2},
		{name: "float as int", in: "1.5\n", wantErr: "e.csv: line 1, column 1: invalid integer \"1.5\"", is: ErrSyntax, line: 1, col: 1},
		{name: "exponent", in: "1e3\n", wantErr: "e.csv: line 1, column 1: invalid integer \"1e3\"", is: ErrSyntax, line: 1, col: 1},
		{name: "sign only", in: "1,-\n", wantErr: "e.csv: line 1, column 2: invalid integer \"-\"", is: ErrSyntax, line: 1, col: 2},
		{name: "inner space", in: "1 2,3\n", wantErr: "e.csv: line 1, column 1: invalid integer \"1 2\"", is: ErrSyntax, line: 1, col: 1},
		{name: "trailing comment", in: "1,2 # x\n", opts: &Options{Comment: "#"},
			wantErr: "e.csv: line 1, column 2: invalid integer \"2 # x\"", is: ErrSyntax, line: 1, col: 2},
		{name: "empty field", in: "1,,2\n", wantErr: "e.csv: line 1, column 2: empty field", is: ErrSyntax, line: 1, col: 2},
		{name: "blank field", in: "1, \t,2\n", wantErr: "e.csv: line 1, column 2: empty field", is: ErrSyntax, line: 1, col: 2},
		{name: "trailing delim", in: "1,2,\n", wantErr: "e.csv: line 1, column 3: empty field", is: ErrSyntax, line: 1, col: 3},
		{name: "trailing delim N", in: "1,2,\n", n: 2, wantErr: "e.csv: line 1: got 3 fields, want 2", is: ErrColumns, line: 1},
		{name: "leading delim", in: ",1\n", wantErr: "e.csv: line 1, column 1: empty field", is: ErrSyntax, line: 1, col: 1},
		{name: "overflow", in: "1,9223372036854775808\n", wantErr: "e.csv: line 1, column 2: integer out of range \"9223372036854775808\"", is: ErrRange, line: 1, col: 2},
		{name: "negative overflow", in: "-9223372036854775809\n", wantErr: "e.csv: line 1, column 1: integer out of range \"-9223372036854775809\"", is: ErrRange, line: 1, col: 1},
		{name: "huge overflow", in: "123456789012345678901234567890\n", wantErr: "e.csv: line 1, column 1: integer out of range \"123456789012345678901234567890\"", is: ErrRange, line: 1, col: 1},
		{name: "overflow then junk", in: "123456789012345678901234567890x\n", wantErr: "e.csv: line 1, column 1: invalid integer \"123456789012345678901234567890x\"", is: ErrSyntax, line: 1, col: 1},
		{name: "long field truncated", in: "1,0123456789012345678901234567890123456789x\n", is: ErrSyntax, line: 1, col: 2,
			wantErr: "e.csv: line 1, column 2: invalid integer \"01234567890123456789012345678901...\""},
		{name: "lone cr", in: "1\r2\n", wantErr: "e.csv: line 1, column 1: invalid integer \"1\\r2\"", is: ErrSyntax, line: 1, col: 1},
		{name: "bom not at start", in: "1\n\xef\xbb\xbf2\n", want: [][]int64{{1}}, wantErr: "e.csv: line 2, column 1: invalid integer \"\\ufeff2\"", is: ErrSyntax, line: 2, col: 1},
		{name: "line too long", in: "1,2\n12345678901\n", opts: &Options{MaxLine: 10}, want: [][]int64{{1, 2}},
			wantErr: "e.csv: line 2: line longer than 10 bytes", is: ErrLineTooLong, line: 2},
		{name: "line at limit with crlf", in: "1234567890\r\n", opts: &Options{MaxLine: 10}, want: [][]int64{{1234567890}}},
		{name: "line too long at eof", in: "12345678901", opts: &Options{MaxLine: 10},
			wantErr: "e.csv: line 1: line longer than 10 bytes", is: ErrLineTooLong, line: 1},
		{name: "invalid options", in: "1\n", opts: &Options{Delim: '.'},
			wantErr: "csvnum: invalid options: Delim '.', want a printable ASCII byte that cannot occur in a number, '\\t' or ' '", is: ErrInvalidOptions},
	}
	for _, tc := range tests {
		for _, size := range []int{BufferSize, 16} {
			r := newReaderSize(strings.NewReader(tc.in), "e.csv", tc.opts, size)
			got, lines, err := readAllInts(r, tc.n)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s (buf %d): rows = %v, want %v", tc.name, size, got, tc.want)
			}
			if tc.lines != nil && !reflect.DeepEqual(lines, tc.lines) {
				t.Errorf("%s (buf %d): lines = %v, want %v", tc.name, size, lines, tc.lines)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("%s (buf %d): unexpected error %v", tc.name, size, err)
				}
				continue
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s (buf %d): error = %v, want %s", tc.name, size, err, tc.wantErr)
				continue
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("%s (buf %d): error %v is not %v", tc.name, size, err, tc.is)
			}
			var pe *ParseError
			if errors.As(err, &pe) {
				if pe.File != "e.csv" || pe.Line != tc.line || pe.Column != tc.col {
					t.Errorf("%s (buf %d): position %s:%d:%d, want e.csv:%d:%d", tc.name, size, pe.File, pe.Line, pe.Column, tc.line, tc.col)
				}
			} else if tc.is != ErrInvalidOptions {
				t.Errorf("%s (buf %d): error %T is not a *ParseError", tc.name, size, err)
			}
		}
	}
}

func TestFloat32s(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name    string
		in      string
		opts    *Options
		n       int
		want    [][]float32
		wantErr string
		is      error
	}{
		{name: "numpy row", in: "0.123456,-0.500000,1.000000\n", n: 3, want: [][]float32{{0.123456, -0.5, 1}}},
		{name: "binary features", in: "0,1,0,0,1\n", n: 5, want: [][]float32{{0, 1, 0, 0, 1}}},
		{name: "strconv forms", in: "-1.5e-3, .5 ,5.,inf,-Inf,+Infinity,1E2,0x1p-2\n", want: [][]float32{{-1.5e-3, .5, 5, inf, -inf, inf, 100, 0.25}}},
		{name: "tie to even", in: "16777217,16777219\n", want: [][]float32{{16777216, 16777220}}},
		{name: "underflow", in: "1e-50\n", want: [][]float32{{0}}},
		{name: "ws mode", in: "1.5 2.5\n", opts: &Options{Delim: ' '}, want: [][]float32{{1.5, 2.5}}},
		{name: "non numeric", in: "1.0,abc\n", wantErr: "f.csv: line 1, column 2: invalid float \"abc\"", is: ErrSyntax},
		{name: "two points", in: "1.0.0\n", wantErr: "f.csv: line 1, column 1: invalid float \"1.0.0\"", is: ErrSyntax},
		{name: "point only", in: ".\n", wantErr: "f.csv: line 1, column 1: invalid float \".\"", is: ErrSyntax},
		{name: "empty", in: "1,\n", wantErr: "f.csv: line 1, column 2: empty field", is: ErrSyntax},
		{name: "overflow", in: "\n\n1,2,1e39\n", wantErr: "f.csv: line 3, column 3: float out of range \"1e39\"", is: ErrRange},
		{name: "columns", in: "1,2\n", n: 3, wantErr: "f.csv: line 1: got 2 fields, want 3", is: ErrColumns},
	}
	for _, tc := range tests {
		r := NewReader(strings.NewReader(tc.in), "f.csv", tc.opts)
		got, err := readAllFloats(r, tc.n)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rows = %v, want %v", tc.name, got, tc.want)
		}
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tc.name, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.is) {
			t.Errorf("%s: error = %v, want %s (%v)", tc.name, err, tc.wantErr, tc.is)
		}
	}
}

// TestFloat64s: Float64sN keeps the decimal's float64 value (a float32
// parse would round 1.0004882812509095 to 1 + 2^-11, a float16 midpoint)
// and reports errors as Float32s does, with float64's range.
func TestFloat64s(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		n       int
		want    []float64
		wantErr string
		is      error
	}{
		{name: "float64 precision", in: "1.0004882812509095,-0.1,1e39\n", n: 3, want: []float64{1.0004882812509095, -0.1, 1e39}},
		{name: "strconv forms", in: " .5 ,inf,0x1p-2\n", n: 3, want: []float64{.5, math.Inf(1), 0.25}},
		{name: "non numeric", in: "1.0,abc\n", n: 2, want: []float64{1}, wantErr: "f.csv: line 1, column 2: invalid float \"abc\"", is: ErrSyntax},
		{name: "empty", in: "1,\n", n: 2, want: []float64{1}, wantErr: "f.csv: line 1, column 2: empty field", is: ErrSyntax},
		{name: "overflow", in: "1e400\n", n: 1, want: []float64{}, wantErr: "f.csv: line 1, column 1: float out of range \"1e400\"", is: ErrRange},
		{name: "columns", in: "1,2\n", n: 3, want: []float64{}, wantErr: "f.csv: line 1: got 2 fields, want 3", is: ErrColumns},
	} {
		r := NewReader(strings.NewReader(tc.in), "f.csv", nil)
		if !r.Next() {
			t.Fatalf("%s: no record: %v", tc.name, r.Err())
		}
		got, err := r.Float64sN(nil, tc.n)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: values %v, want %v", tc.name, got, tc.want)
		}
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tc.name, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.is) {
			t.Errorf("%s: error = %v, want %s (%v)", tc.name, err, tc.wantErr, tc.is)
		}
	}
}

func TestNaNAndNegativeZero(t *testing.T) {
	r := NewReader(strings.NewReader("nan,-0,-0.000000,NaN\n"), "f", nil)
	if !r.Next() {
		t.Fatal(r.Err())
	}
	got, err := r.Float32s(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(got[0])) || !math.IsNaN(float64(got[3])) {
		t.Errorf("got %v, want NaN at 0 and 3", got)
	}
	for _, i := range []int{1, 2} {
		if math.Float32bits(got[i]) != 1<<31 {
			t.Errorf("field %d = %v (bits %#x), want -0", i+1, got[i], math.Float32bits(got[i]))
		}
	}
}

// A field error does not stop the Reader.
func TestContinueAfterFieldError(t *testing.T) {
	r := NewReader(strings.NewReader("1,2\nx,2\n3,4,5\n6,7\n"), "e", nil)
	var rows [][]int64
	var errs []string
	for r.Next() {
		v, err := r.Int64sN(nil, 2)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		rows = append(rows, v)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	wantRows := [][]int64{{1, 2}, {6, 7}}
	wantErrs := []string{`e: line 2, column 1: invalid integer "x"`, `e: line 3: got 3 fields, want 2`}
	if !reflect.DeepEqual(rows, wantRows) || !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("rows %v errs %q, want %v %q", rows, errs, wantRows, wantErrs)
	}
}

func TestNumFieldsAndBytes(t *testing.T) {
	tests := []struct {
		in   string
		opts *Options
		want int
	}{
		{"1", nil, 1},
		{"1,2,3", nil, 3},
		{",,", nil, 3},
		{" 1 2\t3  ", &Options{Delim: ' '}, 3},
		{"1", &Options{Delim: ' '}, 1},
	}
	for _, tc := range tests {
		r := NewReader(strings.NewReader(tc.in+"\r\n"), "x", tc.opts)
		if r.NumFields() != 0 || r.Bytes() != nil {
			t.Errorf("%q: before Next: NumFields %d Bytes %q", tc.in, r.NumFields(), r.Bytes())
		}
		if !r.Next() {
			t.Fatalf("%q: no record: %v", tc.in, r.Err())
		}
		if got := r.NumFields(); got != tc.want {
			t.Errorf("%q: NumFields = %d, want %d", tc.in, got, tc.want)
		}
		if string(r.Bytes()) != tc.in {
			t.Errorf("%q: Bytes = %q", tc.in, r.Bytes())
		}
		if r.Next() {
			t.Errorf("%q: second record", tc.in)
		}
		if v, err := r.Int64s(nil); len(v) != 0 || err != nil {
			t.Errorf("%q: Int64s after end = %v, %v", tc.in, v, err)
		}
	}
}

// Lines longer than the read buffer are assembled whole, up to MaxLine.
func TestLongLines(t *testing.T) {
	const cols = 100_000
	var b bytes.Buffer
	for row := 0; row < 3; row++ {
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString("1234567.25") // 3 rows of 1.2 MB each: longer than BufferSize
		}
		b.WriteString("\r\n")
	}
	lineLen := b.Len()/3 - 2
	r := NewReader(bytes.NewReader(b.Bytes()), "big.csv", nil)
	rows, err := readAllFloats(r, cols)
	if err != nil || len(rows) != 3 || rows[2][cols-1] != 1234567.25 {
		t.Fatalf("got %d rows, err %v", len(rows), err)
	}

	r = NewReader(bytes.NewReader(b.Bytes()), "big.csv", &Options{MaxLine: lineLen})
	if rows, err := readAllFloats(r, cols); err != nil || len(rows) != 3 {
		t.Fatalf("MaxLine = line length: got %d rows, err %v", len(rows), err)
	}
	r = NewReader(bytes.NewReader(b.Bytes()), "big.csv", &Options{MaxLine: lineLen - 1})
	_, err = readAllFloats(r, cols)
	if !errors.Is(err, ErrLineTooLong) || r.Next() {
		t.Fatalf("MaxLine = line length - 1: err %v", err)
	}
}

func gzipBytes(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTruncatedGzip(t *testing.T) {
	var plain bytes.Buffer
	for i := 0; i < 20000; i++ {
		plain.WriteString("12345,67890\n")
	}
	z := gzipBytes(t, plain.Bytes())
	zr, err := gzip.NewReader(bytes.NewReader(z[:len(z)/2]))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(zr, "edge.csv.gz", nil)
	rows, _, err := readAllInts(r, 2)
	if err == nil {
		t.Fatal("no error from a truncated gzip stream")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "edge.csv.gz: line ") ||
		!strings.HasSuffix(err.Error(), ": read error: unexpected EOF") {
		t.Errorf("error = %v", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != int64(len(rows))+1 {
		t.Errorf("error %v: want line %d", err, len(rows)+1)
	}
	if len(rows) == 0 || len(rows) >= 20000 {
		t.Errorf("read %d rows before the error", len(rows))
	}
	if r.Next() || r.Err() != err {
		t.Error("error is not sticky")
	}
	t.Logf("%d rows, then %v", len(rows), err)
}

func TestOptionsValidate(t *testing.T) {
	var nilOpts *Options
	good := []*Options{nilOpts, {}, {Delim: ' '}, {Delim: '\t'}, {Delim: ';', Comment: "//"}, {MaxLine: 1}}
	for _, o := range good {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := []*Options{{Delim: '1'}, {Delim: 'e'}, {Delim: '-'}, {Delim: '\n'}, {Delim: '\r'}, {Delim: 0x80},
		{Comment: "a\nb"}, {Comment: " #"}, {MaxLine: -1}}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidOptions", o, err)
		}
		r := NewReader(strings.NewReader("1\n"), "x", o)
		if r.Next() || !errors.Is(r.Err(), ErrInvalidOptions) {
			t.Errorf("%+v: Reader did not report invalid options", o)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i < 200; i++ {
		b.WriteString("0.123456,-1.500000,1e-3,3,nan\n")
	}
	fbuf := make([]float32, 0, 8)
	r := NewReader(&b, "x", nil)
	allocs := testing.AllocsPerRun(100, func() {
		if !r.Next() {
			t.Fatal("out of lines", r.Err())
		}
		var err error
		if fbuf, err = r.Float32sN(fbuf, 5); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per line, want 0", allocs)
	}
}
