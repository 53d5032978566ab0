package npy

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/x448/float16"
)

// encode writes vals as little-endian elements of dtype d.
func encode(t *testing.T, d DType, vals []float64) []byte {
	t.Helper()
	b := make([]byte, len(vals)*d.Size())
	le := binary.LittleEndian
	for i, v := range vals {
		switch d {
		case Int64, Uint64:
			le.PutUint64(b[8*i:], uint64(int64(v)))
		case Int32, Uint32:
			le.PutUint32(b[4*i:], uint32(int32(v)))
		case Int16, Uint16:
			le.PutUint16(b[2*i:], uint16(int16(v)))
		case Int8, Uint8, Bool:
			b[i] = byte(int8(v))
		case Float16:
			le.PutUint16(b[2*i:], float16.Fromfloat32(float32(v)).Bits())
		case Float32:
			le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		case Float64:
			le.PutUint64(b[8*i:], math.Float64bits(v))
		default:
			t.Fatalf("encode: dtype %v", d)
		}
	}
	return b
}

func TestDecodeInt64(t *testing.T) {
	for _, tc := range []struct {
		d    DType
		in   []float64
		want []int64
	}{
		{Int64, []float64{0, -3, 1 << 40}, []int64{0, -3, 1 << 40}},
		{Uint64, []float64{0, 7, 1 << 40}, []int64{0, 7, 1 << 40}},
		{Int32, []float64{-1, 2, math.MaxInt32}, []int64{-1, 2, math.MaxInt32}},
		{Uint32, []float64{-1, 2}, []int64{math.MaxUint32, 2}},
		{Int16, []float64{-2, 300}, []int64{-2, 300}},
		{Uint16, []float64{-1, 300}, []int64{math.MaxUint16, 300}},
		{Int8, []float64{-128, 127}, []int64{-128, 127}},
		{Uint8, []float64{-1, 5}, []int64{255, 5}},
		{Bool, []float64{0, 1}, []int64{0, 1}},
	} {
		got := make([]int64, len(tc.in))
		if err := DecodeInt64(got, encode(t, tc.d, tc.in), tc.d); err != nil {
			t.Errorf("%v: %v", tc.d, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.d, got, tc.want)
		}
	}
	// A uint64 beyond int64 names its index and value.
	b := make([]byte, 24)
	binary.LittleEndian.PutUint64(b[16:], 1<<63)
	var ve *ValueError
	if err := DecodeInt64(make([]int64, 3), b, Uint64); !errors.As(err, &ve) || ve.Index != 2 || ve.Value != 1<<63 {
		t.Errorf("uint64 2^63 at index 2: %v", err)
	}
	for _, d := range []DType{Float16, Float32, Float64} {
		if err := DecodeInt64(make([]int64, 1), make([]byte, 8), d); !errors.Is(err, ErrDType) {
			t.Errorf("%v read as int64: %v, want ErrDType", d, err)
		}
	}
}

func TestDecodeFloat32(t *testing.T) {
	in := []float64{0, -1.5, 2.25, 255}
	for _, d := range []DType{Float16, Float32, Float64, Uint8} {
		got := make([]float32, len(in))
		if err := DecodeFloat32(got, encode(t, d, in), d); err != nil {
			t.Errorf("%v: %v", d, err)
			continue
		}
		want := []float32{0, -1.5, 2.25, 255}
		if d == Uint8 {
			want = []float32{0, 255, 2, 255} // bytes of int8(-1.5) and int8(2.25)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: got %v, want %v", d, got, want)
		}
	}
	for _, d := range []DType{Int64, Int32, Uint16} {
		if err := DecodeFloat32(make([]float32, 1), make([]byte, 8), d); !errors.Is(err, ErrDType) {
			t.Errorf("%v read as float32: %v, want ErrDType", d, err)
		}
	}
}

// TestIntegerDTypes: Integer holds exactly the dtypes DecodeInt64 reads,
// bool apart.
func TestIntegerDTypes(t *testing.T) {
	for d := Bool; d <= Float64; d++ {
		err := DecodeInt64(make([]int64, 1), make([]byte, 8), d)
		if want := err == nil && d != Bool; d.Integer() != want {
			t.Errorf("%v: Integer %v, DecodeInt64 err %v", d, d.Integer(), err)
		}
	}
}
