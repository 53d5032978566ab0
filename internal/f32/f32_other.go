//go:build !amd64 || purego

package f32

const native = false

func axpy8(y, x *float32, a float32, n int) { panic("f32: no assembly") }

func addRows8(acc, rows *float32, edges *uint64, n int, base int64, width int) {
	panic("f32: no assembly")
}
