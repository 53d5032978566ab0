//go:build !(cuda && cgo && linux)

package hostreg

// Supported reports whether the shim is compiled in (build tag cuda, cgo,
// linux).
const Supported = false
