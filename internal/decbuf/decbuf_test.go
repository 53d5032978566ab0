package decbuf

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestDecbuf(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = binary.LittleEndian.AppendUint32(b, 0xdeadbeef)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(2.5))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-1))
	b = append(b, "tail"...)
	d := New(b, 100)
	if got := d.U8(); got != 7 {
		t.Fatalf("U8 = %d", got)
	}
	if got := d.U32(); got != 0xdeadbeef {
		t.Fatalf("U32 = %x", got)
	}
	if got := d.F64(); got != 2.5 {
		t.Fatalf("F64 = %v", got)
	}
	if got := d.F32(); got != -1 {
		t.Fatalf("F32 = %v", got)
	}
	if d.Offset() != 117 || d.Len() != 4 {
		t.Fatalf("offset %d len %d", d.Offset(), d.Len())
	}
	if got := string(d.Bytes(4)); got != "tail" || d.Err() != nil {
		t.Fatalf("Bytes = %q, %v", got, d.Err())
	}
	// Past the end: zero values, sticky error at the failing offset.
	if d.U64() != 0 || !errors.Is(d.Err(), ErrShort) || d.ErrOffset() != 121 {
		t.Fatalf("short read: err %v at %d", d.Err(), d.ErrOffset())
	}
	first := d.Err()
	d.Fail(errors.New("later"))
	if d.Err() != first || d.U8() != 0 || d.Bytes(0) != nil {
		t.Fatal("error is not sticky")
	}
	// A negative or huge length fails without allocating.
	d = New(make([]byte, 8), 0)
	if d.Bytes(-1) != nil || !errors.Is(d.Err(), ErrShort) {
		t.Fatal("negative length accepted")
	}
	// Fail records a semantic error at the current offset.
	d = New(make([]byte, 8), 10)
	d.U32()
	bad := errors.New("bad magic")
	d.Fail(bad)
	if d.Err() != bad || d.ErrOffset() != 14 || d.Len() != 0 {
		t.Fatalf("Fail: %v at %d, len %d", d.Err(), d.ErrOffset(), d.Len())
	}
}

// TestShortError: a read past the end is a *ShortError locating itself,
// and the error keeps the text decoders already print.
func TestShortError(t *testing.T) {
	d := New(make([]byte, 6), 40)
	d.U32()
	d.U64()
	var se *ShortError
	if !errors.As(d.Err(), &se) || *se != (ShortError{Offset: 44, Want: 8, Left: 2}) || !errors.Is(d.Err(), ErrShort) {
		t.Fatalf("short read: %#v", d.Err())
	}
	if got, want := d.Err().Error(), "decbuf: unexpected end of data: 8 bytes wanted at offset 44, 2 left"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

// TestField: the field current at the first failure is ErrField, whether
// the failure is a short read or a Fail; later Field calls change nothing.
func TestField(t *testing.T) {
	bad := errors.New("bad")
	for _, tc := range []struct {
		name   string
		data   int // input bytes
		decode func(d *Decbuf)
		field  string // "" with off -1: no error
		off    int64
	}{
		{"no error", 8, func(d *Decbuf) { d.Field("a").U32(); d.Field("b").U32() }, "", -1},
		{"short second field", 6, func(d *Decbuf) { d.Field("a").U32(); d.Field("b").U32() }, "b", 4},
		{"short first field", 2, func(d *Decbuf) { d.Field("a").U32(); d.Field("b").U32() }, "a", 0},
		{"fail names its field", 8, func(d *Decbuf) { d.Field("a").U32(); d.Field("b").Fail(bad); d.Field("c").U32() }, "b", 4},
		{"unnamed", 2, func(d *Decbuf) { d.U32() }, "", 0},
		{"sticky", 0, func(d *Decbuf) { d.Field("x").U8(); d.Field("y").Fail(bad) }, "x", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(make([]byte, tc.data), 0)
			tc.decode(d)
			if (d.Err() == nil) != (tc.off < 0) || d.ErrField() != tc.field || (d.Err() != nil && d.ErrOffset() != tc.off) {
				t.Fatalf("err %v at %d in field %q, want field %q at %d", d.Err(), d.ErrOffset(), d.ErrField(), tc.field, tc.off)
			}
		})
	}
}

// TestArrays: U32s and F32s fill the caller's slice, and a short array
// fails without touching it.
func TestArrays(t *testing.T) {
	var b []byte
	for _, x := range []uint32{1, 2, 0xffffffff} {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(1.5))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-2))
	d := New(b, 0)
	u := make([]uint32, 3)
	f := make([]float32, 2)
	d.U32s(u)
	d.F32s(f)
	d.U32s(nil)
	if d.Err() != nil || u[0] != 1 || u[1] != 2 || u[2] != 0xffffffff || f[0] != 1.5 || f[1] != -2 || d.Len() != 0 {
		t.Fatalf("U32s %v F32s %v err %v", u, f, d.Err())
	}
	d = New(b[:10], 0)
	u = []uint32{7, 7, 7}
	d.U32s(u)
	var se *ShortError
	if !errors.As(d.Err(), &se) || se.Want != 12 || se.Left != 10 || u[0] != 7 {
		t.Fatalf("short U32s: %v, dst %v", d.Err(), u)
	}
	d = New(b[:6], 0)
	f = []float32{7, 7}
	d.F32s(f)
	if !errors.As(d.Err(), &se) || se.Want != 8 || f[0] != 7 {
		t.Fatalf("short F32s: %v, dst %v", d.Err(), f)
	}
}
