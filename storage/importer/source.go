package importer

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// readBufSize is the read buffer of every source file.
const readBufSize = 1 << 20

// multiCloser closes several closers in order and returns the first error.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// readCloser pairs a reader with the closers of what it reads.
type readCloser struct {
	io.Reader
	io.Closer
}

// openText opens a text file for reading, decompressing it when its name
// ends in .gz. It returns the file size in bytes.
func openText(path string) (io.ReadCloser, int64, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, 0, err
	}
	br := bufio.NewReaderSize(f, readBufSize)
	if !strings.HasSuffix(path, ".gz") {
		m, _ := br.Peek(6)
		// Other compressors' magic cannot start a text line either;
		// parsed as text they failed with "invalid integer "BZh91AY&SY..."".
		for _, c := range otherCompressors {
			if bytes.HasPrefix(m, []byte(c.magic)) {
				f.Close()
				return nil, 0, fileErr(path, "is %s-compressed: only gzip is read; decompress it first (%s)", c.name, c.tool)
			}
		}
		// C6: gzip whose name lacks .gz is read as gzip; its magic
		// (1f 8b) cannot start a text line.
		if len(m) < 2 || m[0] != 0x1f || m[1] != 0x8b {
			return readCloser{br, f}, size, nil
		}
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, 0, fileErr(path, "not a valid gzip file: %v", err)
	}
	return readCloser{zr, multiCloser{zr, f}}, size, nil
}

// otherCompressors are the compressed formats openText recognises by
// their magic to refuse them by name.
var otherCompressors = []struct{ magic, name, tool string }{
	{"BZh", "bzip2", "bunzip2 -k FILE"},
	{"\xfd7zXZ\x00", "xz", "unxz -k FILE"},
	{"\x28\xb5\x2f\xfd", "zstd", "zstd -d FILE"},
}

// openFile opens path and returns its size. A missing file wraps ErrLayout.
func openFile(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: missing %s", ErrLayout, path)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("importer: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("importer: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("%w: %s is a directory", ErrLayout, path)
	}
	return f, st.Size(), nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// npyStream reads the elements of one .npy array (or a contiguous part of
// it) sequentially, converting them to the type the caller asks for.
// Errors name the file and the element index.
type npyStream struct {
	name   string // for errors
	r      io.Reader
	closer io.Closer
	h      npy.Header // h.Fortran only for a 2-D edge array (cOrder)
	pos    int64      // index of the next element, counted from the array start
	end    int64      // index one past the last element this stream may read
	buf    []byte
}

// Close closes the underlying file or member.
func (s *npyStream) Close() error {
	if s.closer == nil {
		return nil
	}
	c := s.closer
	s.closer = nil
	return c.Close()
}

// remaining is the number of elements left to read.
func (s *npyStream) remaining() int64 { return s.end - s.pos }

// raw reads the next n elements (n <= remaining) as bytes.
func (s *npyStream) raw(n int) ([]byte, error) {
	sz := s.h.DType.Size()
	need := n * sz
	if cap(s.buf) < need {
		s.buf = make([]byte, need)
	}
	b := s.buf[:need]
	got, err := io.ReadFull(s.r, b)
	if err != nil {
		at := s.pos + int64(got/sz)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, elemErr(s.name, at, "truncated: data ends before element %d of %d (shape %v)", at, s.h.Len(), s.h.Shape)
		}
		return nil, elemErr(s.name, at, "read error: %v", err)
	}
	s.pos += int64(n)
	return b, nil
}

// drain checks, once every element has been read, that the stream ends
// there. This makes the zip reader verify a member's CRC-32, which it
// does only on reaching the member's end.
func (s *npyStream) drain() error {
	var one [1]byte
	n, err := s.r.Read(one[:])
	for n == 0 && err == nil {
		n, err = s.r.Read(one[:])
	}
	switch {
	case n > 0:
		return elemErr(s.name, s.pos, "data continues after the last element (shape %v)", s.h.Shape)
	case errors.Is(err, io.EOF):
		return nil
	}
	return elemErr(s.name, s.pos, "read error at end of data: %v", err)
}

// chunk is how many elements to read for a destination of length n.
func (s *npyStream) chunk(n int) int { return int(min(int64(n), s.remaining())) }

// int64s fills dst with the next elements converted to int64 and returns
// how many it read; 0 at the end. Float arrays are rejected.
func (s *npyStream) int64s(dst []int64) (int, error) {
	n := s.chunk(len(dst))
	if n == 0 {
		return 0, nil
	}
	start := s.pos
	b, err := s.raw(n)
	if err != nil {
		return 0, err
	}
	var ve *npy.ValueError
	switch err := npy.DecodeInt64(dst[:n], b, s.h.DType); {
	case errors.As(err, &ve):
		return 0, elemErr(s.name, start+int64(ve.Index), "value %d does not fit in int64", ve.Value)
	case err != nil:
		return 0, fileErr(s.name, "dtype %s, want an integer dtype", s.h.DType)
	}
	return n, nil
}

// float32s fills dst with the next elements converted to float32.
func (s *npyStream) float32s(dst []float32) (int, error) {
	n := s.chunk(len(dst))
	if n == 0 {
		return 0, nil
	}
	b, err := s.raw(n)
	if err != nil {
		return 0, err
	}
	if err := npy.DecodeFloat32(dst[:n], b, s.h.DType); err != nil {
		return 0, fileErr(s.name, "dtype %s, want float16, float32, float64 or uint8 features", s.h.DType)
	}
	return n, nil
}

// float64s fills dst with the next elements of any numeric dtype converted
// to float64 (used for labels, which come as ints or floats with NaN).
func (s *npyStream) float64s(dst []float64) (int, error) {
	switch s.h.DType {
	case npy.Float64:
		n := s.chunk(len(dst))
		if n == 0 {
			return 0, nil
		}
		b, err := s.raw(n)
		if err != nil {
			return 0, err
		}
		for i := range n {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return n, nil
	case npy.Float32, npy.Float16:
		tmp := make([]float32, len(dst))
		n, err := s.float32s(tmp)
		for i := range n {
			dst[i] = float64(tmp[i])
		}
		return n, err
	}
	tmp := make([]int64, len(dst))
	n, err := s.int64s(tmp)
	for i := range n {
		dst[i] = float64(tmp[i])
	}
	return n, err
}

// isNPY reports whether the first bytes of f are the .npy magic.
func isNPY(f io.ReaderAt) bool {
	var m [6]byte
	n, _ := f.ReadAt(m[:], 0)
	return n == len(m) && string(m[:]) == npy.Magic
}

// rawExample is an IGB-large spec per role, for the message that asks
// for one.
var rawExample = map[string]string{
	RoleFeat:  RoleFeat + "=float32:100000000x1024",
	RoleLabel: RoleLabel + "=float32:100000000",
	RoleEdges: RoleEdges + "=int64:1223571364x2",
}

// openNPYFile opens a .npy file, or a headerless raw array described by
// spec, and checks that the file size matches the header or spec. role
// names the Options.Raw key in errors.
func openNPYFile(path, role string, spec *RawSpec) (*npyStream, int64, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, 0, err
	}
	s, err := newFileStream(f, size, path, role, spec)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return s, size, nil
}

func newFileStream(f *os.File, size int64, path, role string, spec *RawSpec) (*npyStream, error) {
	var h npy.Header
	if isNPY(f) {
		var err error
		h, err = npy.ReadHeaderAnyOrder(io.NewSectionReader(f, 0, size))
		if err != nil {
			return nil, fileErr(path, "%v", err)
		}
		if h, err = cOrder(path, role, h); err != nil {
			return nil, err
		}
	} else {
		if spec == nil {
			ex, ok := rawExample[role]
			if !ok {
				return nil, fileErr(path, "no .npy header (magic \\x93NUMPY missing): not a .npy file")
			}
			return nil, fmt.Errorf("%w: %s has no .npy header (magic \\x93NUMPY missing); for a headerless raw array give its dtype and shape: with import npy, --raw %s=DTYPE:D0xD1, e.g. --raw %s (API: a RawSpec under key %q)",
				ErrInvalidOptions, path, role, ex, role)
		}
		h = npy.Header{DType: spec.DType, Shape: spec.Shape}
	}
	if want := h.DataOffset + h.DataBytes(); size != want {
		return nil, fileErr(path, "file is %d bytes, want %d (%d header + %s%v data)", size, want, h.DataOffset, h.DType, h.Shape)
	}
	if _, err := f.Seek(h.DataOffset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("importer: %s: %w", path, err)
	}
	return &npyStream{name: path, r: bufio.NewReaderSize(f, readBufSize), closer: f, h: h, end: h.Len()}, nil
}

// cOrder settles a Fortran-order header. NumPy saves a transposed array
// (np.save(p, a.T), torch's edge_index.t().numpy()) in Fortran order. An
// array with at most one dimension above 1 has the same bytes in either
// order: its header is returned as C order. A 2-D edge array keeps its
// shape, NumPy's, and Fortran set: the edge readers read both orders
// (addEdgeRows, addEdgeHalves), so its edges are those np.load gives. Any
// other Fortran-order array (features [N, D]) is refused, naming the fix.
func cOrder(name, role string, h npy.Header) (npy.Header, error) {
	if !h.Fortran {
		return h, nil
	}
	wide := 0
	for _, d := range h.Shape {
		if d > 1 {
			wide++
		}
	}
	switch {
	case wide <= 1:
		h.Fortran = false
		return h, nil
	case role == RoleEdges && len(h.Shape) == 2:
		return h, nil
	}
	return h, fileErr(name, "Fortran-order (column-major) array of shape %v: its rows are not contiguous; save it in C order, np.save(path, np.ascontiguousarray(a))", h.Shape)
}

// reopenAt opens a second stream of the same file positioned at element
// start, reading to the end of the array.
func reopenAt(s *npyStream, start int64) (*npyStream, error) {
	f, _, err := openFile(s.name)
	if err != nil {
		return nil, err
	}
	off := s.h.DataOffset + start*int64(s.h.DType.Size())
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("importer: %s: %w", s.name, err)
	}
	return &npyStream{name: s.name, r: bufio.NewReaderSize(f, readBufSize), closer: f, h: s.h, pos: start, end: s.h.Len()}, nil
}

// npzArchive is an open .npz (zip) file whose members are .npy arrays.
type npzArchive struct {
	path string
	f    *os.File
	size int64
	zr   *zip.Reader
}

func openNPZ(path string) (*npzArchive, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(f, size)
	if err != nil {
		f.Close()
		return nil, fileErr(path, "not a valid .npz (zip) archive: %v", err)
	}
	return &npzArchive{path: path, f: f, size: size, zr: zr}, nil
}

func (z *npzArchive) Close() error { return z.f.Close() }

func (z *npzArchive) member(name string) *zip.File {
	for _, m := range z.zr.File {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func (z *npzArchive) has(name string) bool { return z.member(name) != nil }

// open streams member name from its first element. The reader is the
// zip package's, which inflates deflated members and checks the CRC at
// the end of the member.
func (z *npzArchive) open(name string) (*npyStream, error) {
	m := z.member(name)
	ename := z.path + "[" + name + "]"
	if m == nil {
		return nil, fmt.Errorf("%w: %s has no member %s", ErrLayout, z.path, name)
	}
	rc, err := m.Open()
	if err != nil {
		return nil, fileErr(ename, "cannot open member: %v", err)
	}
	br := bufio.NewReaderSize(rc, readBufSize)
	h, err := npy.ReadHeaderAnyOrder(br)
	if err != nil {
		rc.Close()
		return nil, fileErr(ename, "%v", err)
	}
	role := ""
	if name == npzEdges {
		role = RoleEdges
	}
	if h, err = cOrder(ename, role, h); err != nil {
		rc.Close()
		return nil, err
	}
	if want := h.DataOffset + h.DataBytes(); m.UncompressedSize64 != uint64(want) {
		rc.Close()
		return nil, fileErr(ename, "member is %d bytes, want %d (%d header + %s%v data)", m.UncompressedSize64, want, h.DataOffset, h.DType, h.Shape)
	}
	return &npyStream{name: ename, r: br, closer: rc, h: h, end: h.Len()}, nil
}

// openAt streams member name from element start. A stored member is read
// directly at its offset in the archive; a deflated one is inflated from
// the start and the first start elements are discarded.
func (z *npzArchive) openAt(name string, start int64) (*npyStream, error) {
	s, err := z.open(name)
	if err != nil {
		return nil, err
	}
	skip := start * int64(s.h.DType.Size())
	m := z.member(name)
	if m.Method == zip.Store {
		off, err := m.DataOffset()
		if err != nil {
			s.Close()
			return nil, fileErr(s.name, "%v", err)
		}
		s.Close()
		from := off + s.h.DataOffset + skip
		sr := io.NewSectionReader(z.f, from, int64(m.UncompressedSize64)-s.h.DataOffset-skip)
		s.r, s.closer = bufio.NewReaderSize(sr, readBufSize), nil
	} else if _, err := io.CopyN(io.Discard, s.r, skip); err != nil {
		s.Close()
		return nil, elemErr(s.name, 0, "skipping %d bytes: %v", skip, err)
	}
	s.pos = start
	return s, nil
}
