package npy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	mk := func(ver byte, dict string) []byte {
		b := []byte(Magic)
		b = append(b, ver, 0)
		if ver == 1 {
			b = append(b, byte(len(dict)), byte(len(dict)>>8))
		} else {
			b = append(b, byte(len(dict)), byte(len(dict)>>8), 0, 0)
		}
		return append(b, dict...)
	}
	cases := []struct {
		name  string
		in    []byte
		dtype DType
		shape []int64
		err   string
	}{
		{"v1 2d", mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n"), Float32, []int64{3, 4}, ""},
		{"v2 1d", mk(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }\n"), Int64, []int64{5}, ""},
		{"scalar", mk(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }"), Uint8, []int64{}, ""},
		{"reordered keys", mk(1, "{'shape': (2,), 'fortran_order': False, 'descr': '<f2'}"), Float16, []int64{2}, ""},
		{"bad magic", []byte("NOTNUMPYxxxxxx"), 0, nil, "magic"},
		{"big endian", mk(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }"), 0, nil, "big-endian"},
		{"fortran", mk(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }"), 0, nil, "fortran"},
		{"object", mk(1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }"), 0, nil, `unsupported array: object dtype "|O" (pickled Python objects)`},
		{"missing key", mk(1, "{'descr': '<f4', 'shape': (3,), }"), 0, nil, "lacks"},
		{"bad shape", mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,x), }"), 0, nil, `bad shape dimension "x"`},
		{"negative dimension", mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -2), }"), 0, nil, `bad shape dimension "-2": want a non-negative integer`},
		{"overflow", mk(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"), 0, nil, "overflow"},
		{"truncated", mk(1, "{'descr': '<f4'")[:12], 0, nil, "truncated"},
		{"unknown version", mk(9, "{}"), 0, nil, "version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHeader(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.DType != c.dtype || len(h.Shape) != len(c.shape) {
				t.Fatalf("got %v %v", h.DType, h.Shape)
			}
			for i := range c.shape {
				if h.Shape[i] != c.shape[i] {
					t.Fatalf("shape %v want %v", h.Shape, c.shape)
				}
			}
			if h.DataOffset != int64(len(c.in)) {
				t.Fatalf("data offset %d want %d", h.DataOffset, len(c.in))
			}
		})
	}
}

// TestReadHeaderAnyOrder: ReadHeader refuses fortran_order True, and
// ReadHeaderAnyOrder returns it with Fortran set (and C order unset).
func TestReadHeaderAnyOrder(t *testing.T) {
	for _, c := range []struct {
		order   string
		fortran bool
	}{{"False", false}, {"True", true}} {
		dict := "{'descr': '<i8', 'fortran_order': " + c.order + ", 'shape': (2, 5), }\n"
		b := append([]byte(Magic+"\x01\x00"), byte(len(dict)), 0)
		b = append(b, dict...)
		h, err := ReadHeaderAnyOrder(bytes.NewReader(b))
		if err != nil || h.Fortran != c.fortran || h.DType != Int64 || len(h.Shape) != 2 || h.Shape[1] != 5 || h.DataOffset != int64(len(b)) {
			t.Errorf("fortran_order %s: ReadHeaderAnyOrder = %+v, %v", c.order, h, err)
		}
		_, err = ReadHeader(bytes.NewReader(b))
		if c.fortran != errors.Is(err, ErrUnsupported) {
			t.Errorf("fortran_order %s: ReadHeader error %v", c.order, err)
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.npy")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, Int32, []int64{3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		w.Write([]byte{byte(i), 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0})
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(path)
	got, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.DataOffset != HeaderSize || got.Shape[0] != 5 || got.Shape[1] != 3 || h.DataBytes() != 60 || int64(len(b)) != HeaderSize+60 {
		t.Fatalf("header %+v file %d bytes", got, len(b))
	}
	if HeaderSize%64 != 0 {
		t.Fatal("header not 64-byte aligned")
	}
}

func TestWriterHeaderSize(t *testing.T) {
	for _, size := range []int{HeaderSize, 192, AlignedHeaderSize, 10 + 0xffff - (10+0xffff)%64} {
		var buf seekBuf
		w, err := NewWriterHeader(&buf, Float32, []int64{2}, size)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		w.Write([]byte{0, 0, 128, 63, 0, 0, 0, 64})
		h, err := w.Close()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, err := ParseHeader(buf.Bytes())
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if h.DataOffset != int64(size) || got.DataOffset != int64(size) || buf.Len() != size+8 || got.Shape[0] != 1 || got.Shape[1] != 2 {
			t.Fatalf("size %d: writer %+v parsed %+v, file %d bytes", size, h, got, buf.Len())
		}
		if buf.Bytes()[size-1] != '\n' {
			t.Fatalf("size %d: header does not end in a newline", size)
		}
	}
	for _, size := range []int{0, 64, 100, 4095, 10 + 0xffff + 64} {
		if _, err := EncodeHeaderSize(Float32, []int64{1}, size); err == nil {
			t.Errorf("size %d accepted", size)
		}
	}
}

func TestWriterPartialRow(t *testing.T) {
	var buf seekBuf
	w, _ := NewWriter(&buf, Float32, []int64{2})
	w.Write([]byte{1, 2, 3, 4})
	if _, err := w.Close(); err == nil {
		t.Fatal("partial row accepted")
	}
}

type seekBuf struct{ bytes.Buffer }

func (s *seekBuf) WriteAt(p []byte, off int64) (int, error) {
	b := s.Bytes()
	if int(off)+len(p) > len(b) {
		return 0, errors.New("out of range")
	}
	return copy(b[off:], p), nil
}

func FuzzParseHeader(f *testing.F) {
	h, _ := EncodeHeader(Float32, []int64{10, 3})
	f.Add(h)
	f.Add([]byte(Magic + "\x01\x00\x10\x00{'descr': '<i8',"))
	f.Add([]byte(Magic + "\x02\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h.DType == Invalid || h.Len() < 0 || h.DataBytes() < 0 || h.DataOffset > int64(len(b)) {
			t.Fatalf("accepted bad header %+v", h)
		}
		// Whatever parses must re-encode and parse to the same header.
		if len(h.Shape) <= 2 {
			enc, err := EncodeHeader(h.DType, h.Shape)
			if err != nil {
				return
			}
			h2, err := ParseHeader(enc)
			if err != nil || h2.DType != h.DType || len(h2.Shape) != len(h.Shape) {
				t.Fatalf("re-encode: %v %+v vs %+v", err, h2, h)
			}
		}
	})
}
