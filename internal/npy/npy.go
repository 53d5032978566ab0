// Package npy reads and writes the NumPy .npy array format (versions 1.0,
// 2.0 and 3.0), so that every array ssdgnn stores can be opened with
// np.load(path, mmap_mode="r").
//
// # Invariants
//
//   - Only little-endian and byte-sized dtypes are accepted; a big-endian
//     descriptor ('>') is rejected with ErrUnsupported.
//   - Only C (row-major) order is accepted by ReadHeader; fortran_order
//     True is rejected. ReadHeaderAnyOrder returns it (Header.Fortran) for
//     the importers, which read transposed edge arrays.
//   - Writers reserve a fixed header of HeaderSize bytes (or a larger
//     multiple of 64 chosen by the caller, see NewWriterHeader) so that a
//     streaming writer can patch the final shape in place once the row
//     count is known. The data section therefore always starts at a
//     64-byte aligned offset, which keeps mmapped views of int64 and
//     float32 arrays aligned; a header of AlignedHeaderSize bytes also
//     aligns it to disk blocks and pages, for O_DIRECT row reads.
//
// The header dictionary is parsed by a small, strict parser of the Python
// literal subset NumPy writes: a dict with the keys 'descr', 'fortran_order'
// and 'shape'. Any other input yields a *HeaderError, never a panic.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Magic is the six-byte prefix of every .npy file.
const Magic = "\x93NUMPY"

// HeaderSize is the header length, including magic and length fields, that
// writers in this package reserve by default. It is a multiple of 64.
const HeaderSize = 128

// AlignedHeaderSize is a header length that puts the data section on a
// 4096-byte boundary: the page size and the largest logical block size
// O_DIRECT asks for, so a row whose size divides 4096 never straddles a
// block or a page.
const AlignedHeaderSize = 4096

// maxEncodedHeader is the largest header a version-1.0 file can carry: its
// length field is a uint16 after the 10 bytes of magic, version and length.
const maxEncodedHeader = 10 + 0xffff

// maxHeaderLen bounds the header dictionary we are willing to parse.
const maxHeaderLen = 1 << 20

var (
	// ErrUnsupported is returned for valid .npy files this package does not
	// handle (big-endian, Fortran order, object dtypes).
	ErrUnsupported = errors.New("npy: unsupported array")
	// ErrHeader is wrapped by every malformed-header error.
	ErrHeader = errors.New("npy: malformed header")
)

// HeaderError describes a malformed header. Offset is the byte offset in the
// file where the problem was found.
type HeaderError struct {
	Offset int64
	Msg    string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("npy: malformed header at byte %d: %s", e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrHeader) true.
func (e *HeaderError) Unwrap() error { return ErrHeader }

// DType is an element type.
type DType uint8

// Element types. The zero value is Invalid.
const (
	Invalid DType = iota
	Bool
	Int8
	Uint8
	Int16
	Uint16
	Int32
	Uint32
	Int64
	Uint64
	Float16
	Float32
	Float64
)

var dtypeInfo = [...]struct {
	name  string
	descr string
	size  int
}{
	Invalid: {"invalid", "", 0},
	Bool:    {"bool", "|b1", 1},
	Int8:    {"int8", "|i1", 1},
	Uint8:   {"uint8", "|u1", 1},
	Int16:   {"int16", "<i2", 2},
	Uint16:  {"uint16", "<u2", 2},
	Int32:   {"int32", "<i4", 4},
	Uint32:  {"uint32", "<u4", 4},
	Int64:   {"int64", "<i8", 8},
	Uint64:  {"uint64", "<u8", 8},
	Float16: {"float16", "<f2", 2},
	Float32: {"float32", "<f4", 4},
	Float64: {"float64", "<f8", 8},
}

// String returns the NumPy name of the dtype, such as "float32".
func (d DType) String() string {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the element size in bytes.
func (d DType) Size() int {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].size
	}
	return 0
}

// Integer reports whether d is a signed or unsigned integer dtype (not
// bool): the dtypes a list of ids may have (DecodeInt64 reads them).
func (d DType) Integer() bool { return d >= Int8 && d <= Uint64 }

// Descr is the NumPy array-protocol descriptor, such as "<f4".
func (d DType) Descr() string {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].descr
	}
	return ""
}

// ParseDType maps a NumPy name ("float32") to a DType.
func ParseDType(name string) (DType, error) {
	for i := 1; i < len(dtypeInfo); i++ {
		if dtypeInfo[i].name == name {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("npy: unknown dtype %q", name)
}

// parseDescr maps an array-protocol descriptor to a DType.
func parseDescr(s string) (DType, error) {
	if len(s) == 2 && (s[0] == '|' || s[0] == '<' || s[0] == '>' || s[0] == '=') && s[1] == 'O' {
		return Invalid, fmt.Errorf("%w: object dtype %q (pickled Python objects); save a numeric array", ErrUnsupported, s)
	}
	if len(s) < 3 {
		return Invalid, fmt.Errorf("descr %q too short", s)
	}
	order, kind, size := s[0], s[1], s[2:]
	n, err := strconv.Atoi(size)
	if err != nil {
		return Invalid, fmt.Errorf("descr %q: bad size", s)
	}
	switch order {
	case '<', '|', '=':
	case '>':
		if n > 1 {
			return Invalid, fmt.Errorf("%w: big-endian descr %q", ErrUnsupported, s)
		}
	default:
		return Invalid, fmt.Errorf("descr %q: bad byte order %q", s, order)
	}
	var d DType
	switch {
	case kind == 'b' && n == 1:
		d = Bool
	case kind == 'i' && n == 1:
		d = Int8
	case kind == 'u' && n == 1:
		d = Uint8
	case kind == 'i' && n == 2:
		d = Int16
	case kind == 'u' && n == 2:
		d = Uint16
	case kind == 'i' && n == 4:
		d = Int32
	case kind == 'u' && n == 4:
		d = Uint32
	case kind == 'i' && n == 8:
		d = Int64
	case kind == 'u' && n == 8:
		d = Uint64
	case kind == 'f' && n == 2:
		d = Float16
	case kind == 'f' && n == 4:
		d = Float32
	case kind == 'f' && n == 8:
		d = Float64
	default:
		return Invalid, fmt.Errorf("%w: descr %q", ErrUnsupported, s)
	}
	return d, nil
}

// Header is a parsed .npy header.
type Header struct {
	DType DType
	Shape []int64
	// DataOffset is the byte offset of the first element.
	DataOffset int64
	// Version is the format major version (1, 2 or 3).
	Version int
	// Fortran is the header's fortran_order: the data is column-major.
	// Only ReadHeaderAnyOrder returns such a header; ReadHeader rejects it.
	Fortran bool
}

// Len returns the number of elements (the product of Shape), or -1 on
// overflow.
func (h Header) Len() int64 {
	n := int64(1)
	for _, d := range h.Shape {
		if d != 0 && n > (1<<62)/d {
			return -1
		}
		n *= d
	}
	return n
}

// DataBytes is the size of the data section in bytes, or -1 on overflow.
func (h Header) DataBytes() int64 {
	n := h.Len()
	sz := int64(h.DType.Size())
	if n < 0 || (n != 0 && n > (1<<62)/sz) {
		return -1
	}
	return n * sz
}

// ReadHeader reads and parses a header from r, leaving r positioned at the
// first data byte. A Fortran-order array is rejected with ErrUnsupported.
func ReadHeader(r io.Reader) (Header, error) {
	h, err := ReadHeaderAnyOrder(r)
	if err == nil && h.Fortran {
		return Header{}, fmt.Errorf("%w: fortran_order True", ErrUnsupported)
	}
	return h, err
}

// ReadHeaderAnyOrder is ReadHeader, except that a Fortran-order
// (column-major) array is returned with Header.Fortran set instead of
// rejected. NumPy saves a transposed array (a.T, torch's t().numpy()) so;
// the caller decides what its bytes mean.
func ReadHeaderAnyOrder(r io.Reader) (Header, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return Header{}, &HeaderError{0, "file shorter than the magic string: " + err.Error()}
	}
	if string(pre[:6]) != Magic {
		return Header{}, &HeaderError{0, "missing \\x93NUMPY magic (not a .npy file)"}
	}
	major := int(pre[6])
	var hlen, off int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return Header{}, &HeaderError{8, "truncated header length"}
		}
		hlen, off = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return Header{}, &HeaderError{8, "truncated header length"}
		}
		hlen, off = int64(binary.LittleEndian.Uint32(l[:])), 12
	default:
		return Header{}, &HeaderError{6, fmt.Sprintf("unknown format version %d.%d", pre[6], pre[7])}
	}
	if hlen > maxHeaderLen {
		return Header{}, &HeaderError{8, fmt.Sprintf("header length %d exceeds %d", hlen, maxHeaderLen)}
	}
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Header{}, &HeaderError{off, fmt.Sprintf("truncated header: want %d bytes", hlen)}
	}
	h, err := parseDict(buf, off)
	if err != nil {
		return Header{}, err
	}
	h.DataOffset = off + hlen
	h.Version = major
	return h, nil
}

// ParseHeader parses a header from the start of b.
func ParseHeader(b []byte) (Header, error) {
	return ReadHeader(bytes.NewReader(b))
}

// dictParser is a tiny recursive-descent parser over the header literal.
type dictParser struct {
	s    []byte
	i    int
	base int64
}

func (p *dictParser) errf(format string, args ...any) error {
	return &HeaderError{p.base + int64(p.i), fmt.Sprintf(format, args...)}
}

func (p *dictParser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *dictParser) expect(c byte) error {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return p.errf("expected %q", c)
	}
	p.i++
	return nil
}

func (p *dictParser) peek() byte {
	p.ws()
	if p.i >= len(p.s) {
		return 0
	}
	return p.s[p.i]
}

func (p *dictParser) str() (string, error) {
	p.ws()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", p.errf("expected a string")
	}
	q := p.s[p.i]
	p.i++
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != q {
		p.i++
	}
	if p.i >= len(p.s) {
		return "", p.errf("unterminated string")
	}
	v := string(p.s[start:p.i])
	p.i++
	return v, nil
}

func (p *dictParser) word() string {
	p.ws()
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z') {
		p.i++
	}
	return string(p.s[start:p.i])
}

func (p *dictParser) shape() ([]int64, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	shape := []int64{}
	for {
		if p.peek() == ')' {
			p.i++
			return shape, nil
		}
		p.ws()
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		// NumPy on Windows once wrote "3L"; accept a trailing L.
		digits := string(p.s[start:p.i])
		if p.i < len(p.s) && p.s[p.i] == 'L' {
			p.i++
		}
		d, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			// Show the whole entry ("-2", "3.5"), not the empty run
			// of digits before it.
			end := start
			for end < len(p.s) && p.s[end] != ',' && p.s[end] != ')' {
				end++
			}
			return nil, p.errf("bad shape dimension %q: want a non-negative integer", strings.TrimSpace(string(p.s[start:end])))
		}
		if len(shape) >= 32 {
			return nil, p.errf("more than 32 dimensions")
		}
		shape = append(shape, d)
		switch p.peek() {
		case ',':
			p.i++
		case ')':
		default:
			return nil, p.errf("expected ',' or ')' in shape")
		}
	}
}

func parseDict(b []byte, base int64) (Header, error) {
	p := &dictParser{s: b, base: base}
	var h Header
	var haveDescr, haveOrder, haveShape bool
	if err := p.expect('{'); err != nil {
		return h, err
	}
	for {
		if p.peek() == '}' {
			p.i++
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if err := p.expect(':'); err != nil {
			return h, err
		}
		switch key {
		case "descr":
			if p.peek() != '\'' && p.peek() != '"' {
				return h, fmt.Errorf("%w: structured dtype", ErrUnsupported)
			}
			s, err := p.str()
			if err != nil {
				return h, err
			}
			d, err := parseDescr(s)
			if err != nil {
				if errors.Is(err, ErrUnsupported) {
					return h, err
				}
				return h, p.errf("%s", err.Error())
			}
			h.DType, haveDescr = d, true
		case "fortran_order":
			switch w := p.word(); w {
			case "False":
			case "True":
				h.Fortran = true
			default:
				return h, p.errf("fortran_order must be True or False, got %q", w)
			}
			haveOrder = true
		case "shape":
			s, err := p.shape()
			if err != nil {
				return h, err
			}
			h.Shape, haveShape = s, true
		default:
			return h, p.errf("unexpected key %q", key)
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		default:
			return h, p.errf("expected ',' or '}'")
		}
	}
	if rest := strings.TrimRight(string(p.s[p.i:]), " \n\x00"); rest != "" {
		return h, p.errf("trailing bytes after header dict")
	}
	if !haveDescr || !haveOrder || !haveShape {
		return h, p.errf("header lacks one of 'descr', 'fortran_order', 'shape'")
	}
	if h.Len() < 0 || h.DataBytes() < 0 {
		return h, p.errf("shape %v overflows", h.Shape)
	}
	return h, nil
}

// EncodeHeader returns a version-1.0 header of exactly HeaderSize bytes for
// the given dtype and shape. It fails if the dictionary does not fit.
func EncodeHeader(d DType, shape []int64) ([]byte, error) {
	return EncodeHeaderSize(d, shape, HeaderSize)
}

// EncodeHeaderSize is EncodeHeader for a header of exactly size bytes: a
// multiple of 64 from HeaderSize up to 65,536 (version 1.0's length field
// is 16 bits). The dictionary is padded with spaces.
func EncodeHeaderSize(d DType, shape []int64, size int) ([]byte, error) {
	if size < HeaderSize || size%64 != 0 || size > maxEncodedHeader {
		return nil, fmt.Errorf("npy: header size %d: want a multiple of 64 in [%d, %d]", size, HeaderSize, maxEncodedHeader)
	}
	if d == Invalid || d.Size() == 0 {
		return nil, fmt.Errorf("npy: cannot encode dtype %v", d)
	}
	var sb strings.Builder
	sb.WriteString("{'descr': '")
	sb.WriteString(d.Descr())
	sb.WriteString("', 'fortran_order': False, 'shape': (")
	for i, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("npy: negative dimension %d", s)
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(s, 10))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	dict := sb.String()
	pad := size - 10 - len(dict) - 1
	if pad < 0 {
		return nil, fmt.Errorf("npy: header for shape %v does not fit in %d bytes", shape, size)
	}
	out := make([]byte, 0, size)
	out = append(out, Magic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(size-10))
	out = append(out, dict...)
	for range pad {
		out = append(out, ' ')
	}
	out = append(out, '\n')
	return out, nil
}
