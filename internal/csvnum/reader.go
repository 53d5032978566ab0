package csvnum

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
)

// Defaults and limits of Options.
const (
	DefaultDelim   = ','      // default Options.Delim
	DefaultMaxLine = 64 << 20 // default Options.MaxLine
	// BufferSize is the size of the Reader's read buffer. Longer lines are
	// assembled in a separate buffer.
	BufferSize = 1 << 20
)

// Options configures a Reader. The zero value of every field selects its
// default; a nil *Options means all defaults.
type Options struct {
	// Delim separates fields. Default DefaultDelim (','). ' ' selects
	// whitespace mode: fields are separated by any run of spaces and tabs.
	// Any other printable ASCII byte, or '\t', is a single-byte delimiter;
	// bytes that can be part of a number (digits, letters, '+', '-', '.',
	// '_') are rejected by Validate.
	Delim byte
	// Comment, if not empty, marks comment lines: a line whose first bytes
	// after optional spaces and tabs are Comment is skipped.
	Comment string
	// MaxLine is the longest accepted line in bytes, not counting the line
	// terminator. Longer lines stop the Reader with ErrLineTooLong. Default
	// DefaultMaxLine.
	MaxLine int
}

// Validate reports whether o is usable. A nil receiver is valid. Zero
// fields are valid (they mean the default).
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch d := o.Delim; {
	case d == 0, d == ' ', d == '\t':
	case d <= ' ' || d >= 0x7f, d >= '0' && d <= '9', d >= 'a' && d <= 'z', d >= 'A' && d <= 'Z',
		d == '+', d == '-', d == '.', d == '_':
		return opterr.Errorf(ErrInvalidOptions, "%s %q, want a printable ASCII byte that cannot occur in a number, '\\t' or ' '", opterr.Field("Delim"), d)
	}
	if strings.ContainsAny(o.Comment, "\r\n") {
		return opterr.Errorf(ErrInvalidOptions, "%s %q contains a line terminator", opterr.Field("Comment"), o.Comment)
	}
	if o.Comment != "" && (o.Comment[0] == ' ' || o.Comment[0] == '\t') {
		return opterr.Errorf(ErrInvalidOptions, "%s %q starts with a blank", opterr.Field("Comment"), o.Comment)
	}
	if o.MaxLine < 0 {
		return fmt.Errorf("%w: MaxLine %d, want 0 (default) or > 0", ErrInvalidOptions, o.MaxLine)
	}
	return nil
}

// withDefaults returns a copy of o with every zero field set to its
// default. It does not modify o.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Delim == 0 {
		r.Delim = DefaultDelim
	}
	if r.MaxLine == 0 {
		r.MaxLine = DefaultMaxLine
	}
	return r
}

// Reader reads records, the non-blank non-comment lines, of numeric
// delimited text. See the package doc for the format.
type Reader struct {
	br      *bufio.Reader
	file    string
	delim   byte
	ws      bool // whitespace mode
	comment []byte
	maxLine int

	lineNo  int64  // physical lines consumed so far
	recLine int64  // line number of rec
	rec     []byte // current record without terminator; nil if none
	nf      int    // cached field count of rec; -1 until computed
	long    []byte // assembles lines longer than the read buffer
	eof     bool   // the underlying reader is exhausted or failed
	err     error  // sticky error ending the stream
}

// NewReader returns a Reader of r. file names the input in errors. Invalid
// opts are reported by the first call to Next, through Err.
func NewReader(r io.Reader, file string, opts *Options) *Reader {
	return newReaderSize(r, file, opts, BufferSize)
}

// newReaderSize is NewReader with a chosen read buffer size, so that tests
// can cover long lines cheaply.
func newReaderSize(r io.Reader, file string, opts *Options, size int) *Reader {
	o := opts.withDefaults()
	rd := &Reader{
		br:      bufio.NewReaderSize(r, size),
		file:    file,
		delim:   o.Delim,
		ws:      o.Delim == ' ',
		comment: []byte(o.Comment),
		maxLine: o.MaxLine,
	}
	if err := opts.Validate(); err != nil {
		rd.err = err
		rd.eof = true
	}
	return rd
}

// Next advances to the next record, skipping blank and comment lines. It
// returns false at the end of the input or when an error stops the Reader;
// Err tells which.
func (r *Reader) Next() bool {
	r.rec = nil
	r.nf = 0
	for !r.eof {
		line, ok := r.readLine()
		if !ok {
			return false
		}
		if r.lineNo == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		i := 0
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i == len(line) || (len(r.comment) > 0 && bytes.HasPrefix(line[i:], r.comment)) {
			continue
		}
		r.rec = line
		r.recLine = r.lineNo
		r.nf = -1
		return true
	}
	return false
}

// readLine returns the next physical line without its terminator. It
// reports false at the end of the input or on an error, which it records.
func (r *Reader) readLine() ([]byte, bool) {
	r.long = r.long[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		switch err {
		case nil:
		case bufio.ErrBufferFull:
			// The terminator may still add "\r" to the assembled bytes, so
			// only more than maxLine+1 of them is certainly too long.
			if len(r.long)+len(frag) > r.maxLine+1 {
				r.fail(&ParseError{File: r.file, Line: r.lineNo + 1, Msg: r.tooLongMsg(), Err: ErrLineTooLong})
				return nil, false
			}
			r.long = append(r.long, frag...)
			continue
		case io.EOF:
			r.eof = true
			if len(r.long)+len(frag) == 0 {
				return nil, false
			}
		default:
			r.fail(&ParseError{File: r.file, Line: r.lineNo + 1, Msg: "read error", Err: err})
			return nil, false
		}
		line := frag
		if len(r.long) > 0 {
			r.long = append(r.long, frag...)
			line = r.long
		}
		r.lineNo++
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1] // "\r\n", or "\r" at the end of the input
		}
		if len(line) > r.maxLine {
			r.fail(&ParseError{File: r.file, Line: r.lineNo, Msg: r.tooLongMsg(), Err: ErrLineTooLong})
			return nil, false
		}
		return line, true
	}
}

func (r *Reader) tooLongMsg() string {
	return fmt.Sprintf("line longer than %d bytes", r.maxLine)
}

func (r *Reader) fail(err error) {
	r.err = err
	r.eof = true
}

// Err returns the error that stopped the Reader: a *ParseError wrapping an
// I/O error or ErrLineTooLong, or an invalid-options error. It returns nil
// after a clean end of input.
func (r *Reader) Err() error { return r.err }

// Line returns the 1-based physical line number of the current record, or
// of the last line read once Next has returned false.
func (r *Reader) Line() int64 {
	if r.rec == nil {
		return r.lineNo
	}
	return r.recLine
}

// Bytes returns the current record without its line terminator (and
// without a leading byte order mark). The slice is valid only until the next
// call to Next. It is nil when there is no current record.
func (r *Reader) Bytes() []byte { return r.rec }

// NumFields returns the number of fields of the current record, counting
// empty ones; 0 when there is no current record.
func (r *Reader) NumFields() int {
	if r.nf >= 0 {
		return r.nf
	}
	n := 0
	if !r.ws {
		n = bytes.Count(r.rec, []byte{r.delim}) + 1
	} else {
		for i := 0; ; {
			_, _, next, ok := r.field(i)
			if !ok {
				break
			}
			n++
			i = next
		}
	}
	r.nf = n
	return n
}

// field returns the bounds [s, e) of the field that starts at i, trimmed of
// blanks, and where the following field starts. It reports false when no
// field starts at i. Field scanning starts at 0.
func (r *Reader) field(i int) (s, e, next int, ok bool) {
	line := r.rec
	n := len(line)
	if r.ws {
		for i < n && isBlank(line[i]) {
			i++
		}
		if i == n {
			return 0, 0, 0, false
		}
		s = i
		for i < n && !isBlank(line[i]) {
			i++
		}
		return s, i, i, true
	}
	if i > n {
		return 0, 0, 0, false
	}
	if j := bytes.IndexByte(line[i:], r.delim); j >= 0 {
		e, next = i+j, i+j+1
	} else {
		e, next = n, n+1
	}
	s = i
	for s < e && isBlank(line[s]) {
		s++
	}
	for e > s && isBlank(line[e-1]) {
		e--
	}
	return s, e, next, true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// Int64s parses every field of the current record as a decimal integer and
// returns them appended to dst[:0]. On error it returns the values before
// the bad field and a *ParseError matching ErrSyntax or ErrRange.
func (r *Reader) Int64s(dst []int64) ([]int64, error) {
	return parseFields(r, dst, fastInt64At, parseInt64, "integer")
}

// Int64sN is Int64s for a record that must have exactly n fields; any other
// count gives a *ParseError matching ErrColumns.
func (r *Reader) Int64sN(dst []int64, n int) ([]int64, error) {
	if err := r.checkColumns(n); err != nil {
		return dst[:0], err
	}
	return r.Int64s(slices.Grow(dst[:0], n))
}

// Float32s parses every field of the current record as
// strconv.ParseFloat(field, 32) would and returns them appended to dst[:0].
// On error it returns the values before the bad field and a *ParseError
// matching ErrSyntax or ErrRange.
func (r *Reader) Float32s(dst []float32) ([]float32, error) {
	return parseFields(r, dst, fastFloat32At, parseFloat32, "float")
}

// Float32sN is Float32s for a record that must have exactly n fields; any
// other count gives a *ParseError matching ErrColumns.
func (r *Reader) Float32sN(dst []float32, n int) ([]float32, error) {
	if err := r.checkColumns(n); err != nil {
		return dst[:0], err
	}
	return r.Float32s(slices.Grow(dst[:0], n))
}

// Float64s parses every field of the current record as
// strconv.ParseFloat(field, 64) would and returns them appended to dst[:0]:
// for a caller that narrows the values itself (a float16 destination,
// where a float32 parse would round twice). On error it returns the
// values before the bad field and a *ParseError matching ErrSyntax or
// ErrRange.
func (r *Reader) Float64s(dst []float64) ([]float64, error) {
	return parseFields(r, dst, noFastFloat64, parseFloat64, "float")
}

// Float64sN is Float64s for a record that must have exactly n fields; any
// other count gives a *ParseError matching ErrColumns.
func (r *Reader) Float64sN(dst []float64, n int) ([]float64, error) {
	if err := r.checkColumns(n); err != nil {
		return dst[:0], err
	}
	return r.Float64s(slices.Grow(dst[:0], n))
}

// parseFields is the field-splitting loop shared by Int64s, Float32s and Float64s:
// it parses every field of the current record with parse and appends the
// values to dst[:0], trying fast first on each field. fast(line, i) parses a
// value starting at line[i] and returns it with the index just past it; its
// result is used only when that index is the end of the line or a field
// separator, otherwise the field is re-parsed by parse, whose result is
// parseOK, parseRange or anything else for a syntax error. kind names the
// value type in error messages.
func parseFields[T int64 | float32 | float64](r *Reader, dst []T, fast func([]byte, int) (T, int, bool), parse func([]byte) (T, int), kind string) ([]T, error) {
	dst = dst[:0]
	line := r.rec
	if line == nil {
		return dst, nil
	}
	n := len(line)
	for i, col := 0, 1; ; col++ {
		if r.ws {
			for i < n && isBlank(line[i]) {
				i++
			}
			if i == n {
				return dst, nil
			}
		}
		// Fast path: a short value directly followed by the delimiter or
		// the end of the line.
		if v, j, ok := fast(line, i); ok {
			if j == n {
				return append(dst, v), nil
			}
			if c := line[j]; c == r.delim || (r.ws && c == '\t') {
				dst = append(dst, v)
				i = j + 1
				continue
			}
		}
		s, e, next, _ := r.field(i)
		v, res := parse(line[s:e])
		if res != parseOK {
			return dst, r.fieldErr(col, s, e, res, kind)
		}
		dst = append(dst, v)
		if next > n {
			return dst, nil
		}
		i = next
	}
}

func (r *Reader) checkColumns(n int) error {
	if got := r.NumFields(); got != n {
		return &ParseError{File: r.file, Line: r.Line(), Msg: fmt.Sprintf("got %d fields, want %d", got, n), Err: ErrColumns}
	}
	return nil
}

func (r *Reader) fieldErr(col, s, e, res int, kind string) error {
	pe := &ParseError{File: r.file, Line: r.recLine, Column: col, Field: fieldText(r.rec[s:e]), Err: ErrSyntax}
	switch {
	case s == e:
		pe.Msg = "empty field"
	case res == parseRange:
		pe.Msg = kind + " out of range"
		pe.Err = ErrRange
	default:
		pe.Msg = "invalid " + kind
	}
	return pe
}
