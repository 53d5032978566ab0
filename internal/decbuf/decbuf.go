// Package decbuf decodes little-endian binary data held in a byte slice,
// with a sticky error: every read after the first failure returns zero and
// changes nothing, so a decoder reads a whole header or record and checks
// Err once (the pattern of Prometheus tsdb's Decbuf).
//
// A Decbuf never allocates for the data it returns: Bytes aliases the
// input. A length read from the data is only trusted after it was compared
// with Len, so a corrupt length cannot force an allocation.
package decbuf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort is wrapped by the error of a read past the end of the data.
var ErrShort = errors.New("decbuf: unexpected end of data")

// Decbuf is a read cursor over a byte slice. The zero value is an empty
// buffer.
type Decbuf struct {
	b      []byte // the unread bytes
	off    int64  // offset of b[0] from the start of the input
	err    error
	errOff int64
}

// New returns a Decbuf over b whose offsets count from base (the offset of
// b[0] in the file, for error messages).
func New(b []byte, base int64) *Decbuf { return &Decbuf{b: b, off: base} }

// Err is the first error, or nil.
func (d *Decbuf) Err() error { return d.err }

// ErrOffset is the offset of the read that failed first (meaningful only
// when Err is not nil).
func (d *Decbuf) ErrOffset() int64 { return d.errOff }

// Offset is the offset of the next unread byte.
func (d *Decbuf) Offset() int64 { return d.off }

// Len is the number of unread bytes (0 after an error).
func (d *Decbuf) Len() int { return len(d.b) }

// Fail records err at the current offset, unless an error is already
// recorded. Decoders use it for semantic failures (a bad magic, a value
// out of range) so that Err reports whichever came first.
func (d *Decbuf) Fail(err error) {
	if d.err == nil {
		d.err, d.errOff, d.b = err, d.off, nil
	}
}

// take returns the next n bytes, or nil and records an error.
func (d *Decbuf) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.Fail(fmt.Errorf("%w: %d bytes wanted at offset %d, %d left", ErrShort, n, d.off, len(d.b)))
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
