package npy

import "unsafe"

// Zero-copy typed views of little-endian data sections, as read from a
// mapping. The host must be little-endian and b aligned for the element
// type (a data section written by this package starts at a 64-byte
// boundary). A trailing partial element is ignored.

// AsInt64 views b as int64 elements.
func AsInt64(b []byte) []int64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// AsInt32 views b as int32 elements.
func AsInt32(b []byte) []int32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// AsFloat32 views b as float32 elements.
func AsFloat32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
