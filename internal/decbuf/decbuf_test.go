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
