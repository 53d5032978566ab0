package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Conversions of a data section's little-endian bytes, of any dtype this
// package reads, to the element type a caller works in. They are what a
// streaming reader applies to each chunk it reads (the importer's
// sources, infer's node lists); a mapped reader of an array ssdgnn wrote
// uses the zero-copy views instead.

// ErrDType is wrapped when an array's dtype cannot be converted to the
// type asked for (a float array read as ids).
var ErrDType = errors.New("npy: dtype cannot be converted")

// ValueError is a value that does not fit the type it is converted to.
// Index is the element's index in the slice converted.
type ValueError struct {
	Index int
	Value uint64
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("npy: element %d: value %d does not fit in int64", e.Index, e.Value)
}

// DecodeInt64 converts the len(dst) elements of dtype d at the start of b
// to int64. d must be an integer dtype or bool; b must hold len(dst)
// elements. A uint64 above math.MaxInt64 is a *ValueError.
func DecodeInt64(dst []int64, b []byte, d DType) error {
	le := binary.LittleEndian
	switch d {
	case Int64:
		for i := range dst {
			dst[i] = int64(le.Uint64(b[8*i:]))
		}
	case Uint64:
		for i := range dst {
			u := le.Uint64(b[8*i:])
			if u > math.MaxInt64 {
				return &ValueError{Index: i, Value: u}
			}
			dst[i] = int64(u)
		}
	case Int32:
		for i := range dst {
			dst[i] = int64(int32(le.Uint32(b[4*i:])))
		}
	case Uint32:
		for i := range dst {
			dst[i] = int64(le.Uint32(b[4*i:]))
		}
	case Int16:
		for i := range dst {
			dst[i] = int64(int16(le.Uint16(b[2*i:])))
		}
	case Uint16:
		for i := range dst {
			dst[i] = int64(le.Uint16(b[2*i:]))
		}
	case Int8:
		for i := range dst {
			dst[i] = int64(int8(b[i]))
		}
	case Uint8, Bool:
		for i := range dst {
			dst[i] = int64(b[i])
		}
	default:
		return fmt.Errorf("%w: %s, want an integer dtype", ErrDType, d)
	}
	return nil
}

// DecodeFloat32 converts the len(dst) elements of dtype d (float16,
// float32, float64, uint8 or bool) at the start of b to float32.
func DecodeFloat32(dst []float32, b []byte, d DType) error {
	le := binary.LittleEndian
	switch d {
	case Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case Float16:
		for i := range dst {
			dst[i] = float16.Frombits(le.Uint16(b[2*i:])).Float32()
		}
	case Float64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case Uint8, Bool:
		for i := range dst {
			dst[i] = float32(b[i])
		}
	default:
		return fmt.Errorf("%w: %s, want float16, float32, float64 or uint8", ErrDType, d)
	}
	return nil
}
