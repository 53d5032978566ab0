//go:build cuda && cgo && linux

package hostreg

/*
#cgo LDFLAGS: -lcuda
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/lib/x86_64-linux-gnu -L/usr/lib/x86_64-linux-gnu/nvidia/current
#cgo linux CFLAGS: -I/usr/local/cuda/include -I/usr/include
#include <cuda.h>

static CUresult hostreg_register(void *p, size_t bytes, unsigned int flags) {
	return cuMemHostRegister(p, bytes, flags);
}
static CUresult hostreg_unregister(void *p) { return cuMemHostUnregister(p); }
static CUresult hostreg_device_pointer(unsigned long long *d, void *p) {
	CUdeviceptr dp = 0;
	CUresult r = cuMemHostGetDevicePointer(&dp, p, 0);
	*d = (unsigned long long)dp;
	return r;
}
static CUresult hostreg_alloc_host(void **p, size_t bytes) { return cuMemAllocHost(p, bytes); }
static CUresult hostreg_free_host(void *p) { return cuMemFreeHost(p); }
static CUresult hostreg_attr(int *v, int attr, int dev) {
	return cuDeviceGetAttribute(v, (CUdevice_attribute)attr, (CUdevice)dev);
}
static const char *hostreg_error_name(CUresult r) {
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS) return 0;
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Supported reports whether the shim is compiled in.
const Supported = true

// Flags are cuMemHostRegister flags.
type Flags uint32

const (
	// FlagPortable makes the registration visible to every context.
	FlagPortable Flags = C.CU_MEMHOSTREGISTER_PORTABLE
	// FlagDeviceMap maps the memory into the device address space
	// (required for zero-copy reads).
	FlagDeviceMap Flags = C.CU_MEMHOSTREGISTER_DEVICEMAP
	// FlagReadOnly registers memory the device only reads; it is needed
	// for read-only (e.g. PROT_READ file-backed) mappings.
	FlagReadOnly Flags = C.CU_MEMHOSTREGISTER_READ_ONLY
)

// Error is a failed driver call.
type Error struct {
	Call string // driver function, e.g. "cuMemHostRegister"
	Code int    // CUresult
	Name string // CUresult name, e.g. "CUDA_ERROR_INVALID_VALUE"
}

func (e *Error) Error() string {
	return fmt.Sprintf("hostreg: %s: %s (%d)", e.Call, e.Name, e.Code)
}

func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	name := "unknown CUresult"
	if s := C.hostreg_error_name(r); s != nil {
		name = C.GoString(s)
	}
	return &Error{Call: call, Code: int(r), Name: name}
}

// Capabilities are the device attributes zero-copy access depends on.
type Capabilities struct {
	CanMapHostMemory  bool // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
	UnifiedAddressing bool // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	// HostRegisterSupported is CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED
	// (CUDA >= 11.1); false on older headers.
	HostRegisterSupported bool
	// ReadOnlyHostRegister is
	// CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED.
	ReadOnlyHostRegister bool
}

// ZeroCopy reports whether registered host memory can be read by kernels
// through a device pointer.
func (c Capabilities) ZeroCopy() bool {
	return c.CanMapHostMemory && c.UnifiedAddressing && c.HostRegisterSupported
}

// Query reads the capabilities of device ordinal dev.
func Query(dev int) (Capabilities, error) {
	var c Capabilities
	for _, a := range []struct {
		attr C.int
		dst  *bool
	}{
		{C.CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, &c.CanMapHostMemory},
		{C.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &c.UnifiedAddressing},
		{C.CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, &c.HostRegisterSupported},
		{C.CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &c.ReadOnlyHostRegister},
	} {
		var v C.int
		if err := check("cuDeviceGetAttribute", C.hostreg_attr(&v, a.attr, C.int(dev))); err != nil {
			return c, err
		}
		*a.dst = v != 0
	}
	return c, nil
}

// Register page-locks [p, p+bytes) and, with FlagDeviceMap, maps it for
// the device.
func Register(p unsafe.Pointer, bytes int64, flags Flags) error {
	if p == nil || bytes <= 0 {
		return &Error{Call: "cuMemHostRegister", Code: int(C.CUDA_ERROR_INVALID_VALUE), Name: "CUDA_ERROR_INVALID_VALUE"}
	}
	return check("cuMemHostRegister", C.hostreg_register(p, C.size_t(bytes), C.uint(flags)))
}

// Unregister undoes Register for the range starting at p.
func Unregister(p unsafe.Pointer) error {
	return check("cuMemHostUnregister", C.hostreg_unregister(p))
}

// DevicePointer returns the device address of registered host memory p.
func DevicePointer(p unsafe.Pointer) (uintptr, error) {
	var d C.ulonglong
	if err := check("cuMemHostGetDevicePointer", C.hostreg_device_pointer(&d, p)); err != nil {
		return 0, err
	}
	return uintptr(d), nil
}

// AllocPinned returns bytes of page-locked host memory (cuMemAllocHost),
// outside the Go heap; free it with FreePinned.
func AllocPinned(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := check("cuMemAllocHost", C.hostreg_alloc_host(&p, C.size_t(bytes))); err != nil {
		return nil, err
	}
	return p, nil
}

// FreePinned releases memory from AllocPinned.
func FreePinned(p unsafe.Pointer) error {
	return check("cuMemFreeHost", C.hostreg_free_host(p))
}
