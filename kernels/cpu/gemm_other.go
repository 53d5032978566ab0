//go:build !amd64 || purego

package cpu

// tiledNative is false: kern stays kern6x16Go, and GEMMAuto keeps gonum's
// and the row kernel.
const tiledNative = false
