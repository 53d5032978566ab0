// Package decbuf decodes little-endian binary data held in a byte slice,
// with a sticky error: every read after the first failure returns zero and
// changes nothing, so a decoder reads a whole header or record and checks
// Err once (the pattern of Prometheus tsdb's Decbuf).
//
// A Decbuf never allocates for the data it returns: Bytes aliases the
// input, and U32s and F32s fill the caller's slice. A length read from the
// data is only trusted after it was compared with Len, so a corrupt length
// cannot force an allocation.
//
// Errors locate themselves: a read past the end is a *ShortError (which
// wraps ErrShort) carrying the offset, the bytes wanted and the bytes left;
// ErrOffset is where the first failure happened, and ErrField the name the
// decoder gave the field being read then (Field), so a caller's typed
// corrupt-data error can name the field and the offset.
package decbuf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort is wrapped by the error of a read past the end of the data.
var ErrShort = errors.New("decbuf: unexpected end of data")

// ShortError is the error of a read past the end of the data: Want bytes
// were asked for at Offset and only Left remained (so the data ends at
// Offset+Left). It wraps ErrShort.
type ShortError struct {
	Offset     int64
	Want, Left int
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("%v: %d bytes wanted at offset %d, %d left", ErrShort, e.Want, e.Offset, e.Left)
}

// Unwrap returns ErrShort.
func (e *ShortError) Unwrap() error { return ErrShort }

// Decbuf is a read cursor over a byte slice. The zero value is an empty
// buffer.
type Decbuf struct {
	b      []byte // the unread bytes
	off    int64  // offset of b[0] from the start of the input
	err    error
	errOff int64
	// field names what is being read (Field); errField is field when err
	// was recorded.
	field, errField string
	// fieldOff is the offset at which field began.
	fieldOff int64
}

// New returns a Decbuf over b whose offsets count from base (the offset of
// b[0] in the file, for error messages).
func New(b []byte, base int64) *Decbuf { return &Decbuf{b: b, off: base} }

// Err is the first error, or nil.
func (d *Decbuf) Err() error { return d.err }

// ErrOffset is the offset of the read that failed first (meaningful only
// when Err is not nil).
func (d *Decbuf) ErrOffset() int64 { return d.errOff }

// ErrField is the field name (see Field) current when the first error was
// recorded, or "".
func (d *Decbuf) ErrField() string { return d.errField }

// Field names the field the following reads (and a Fail) belong to, for
// ErrField, and returns d, so a decoder writes d.Field("version").U32().
// After an error it changes nothing.
func (d *Decbuf) Field(name string) *Decbuf {
	if d.err == nil {
		d.field, d.fieldOff = name, d.off
	}
	return d
}

// Offset is the offset of the next unread byte.
func (d *Decbuf) Offset() int64 { return d.off }

// Len is the number of unread bytes (0 after an error).
func (d *Decbuf) Len() int { return len(d.b) }

// Fail records err for the current field, at the offset where that field
// began (the current offset when no field is named), unless an error is
// already recorded. Decoders use it for semantic failures (a bad magic, a
// value out of range), which they find after reading the field, so that
// Err reports whichever came first and ErrOffset points at the bad value.
func (d *Decbuf) Fail(err error) {
	if d.err == nil {
		off := d.off
		if d.field != "" {
			off = d.fieldOff
		}
		d.err, d.errOff, d.errField, d.b = err, off, d.field, nil
	}
}

// take returns the next n bytes, or nil and records an error.
func (d *Decbuf) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.Fail(&ShortError{Offset: d.off, Want: n, Left: len(d.b)})
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	d.off += int64(n)
	return out
}

// Bytes returns the next n bytes, aliasing the input (nil on error).
func (d *Decbuf) Bytes(n int) []byte { return d.take(n) }

// Skip discards n bytes.
func (d *Decbuf) Skip(n int) { d.take(n) }

// U8 reads one byte.
func (d *Decbuf) U8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

// U32 reads a little-endian uint32.
func (d *Decbuf) U32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// U64 reads a little-endian uint64.
func (d *Decbuf) U64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// I64 reads a little-endian int64.
func (d *Decbuf) I64() int64 { return int64(d.U64()) }

// F32 reads a little-endian IEEE-754 float32.
func (d *Decbuf) F32() float32 { return math.Float32frombits(d.U32()) }

// F64 reads a little-endian IEEE-754 float64.
func (d *Decbuf) F64() float64 { return math.Float64frombits(d.U64()) }

// U32s fills dst with the next len(dst) little-endian uint32s (dst is
// left unchanged on error).
func (d *Decbuf) U32s(dst []uint32) {
	if b := d.take(4 * len(dst)); b != nil {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	}
}

// F32s fills dst with the next len(dst) little-endian IEEE-754 float32s
// (dst is left unchanged on error).
func (d *Decbuf) F32s(dst []float32) {
	if b := d.take(4 * len(dst)); b != nil {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}
