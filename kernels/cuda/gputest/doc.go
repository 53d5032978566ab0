// Package gputest holds the GPU tests and benchmarks of the CUDA backend
// (package kernels/cuda): the kerneltest conformance suite, zero-copy host
// gathers against the device path, device-side error reporting, and the
// GEMM/aggregation/GAT/gather benchmarks.
//
// Every test file carries the build tag `cuda` (with cgo, linux). Such a
// test binary links gorgonia.org/cu, whose package init calls cuInit and
// exits the process when no GPU is present. Package inits run before
// TestMain, so the binary cannot skip itself; instead `make test-cuda`
// checks for a device (nvidia-smi -L) and runs
//
//	go test -tags cuda -count=1 ./kernels/cuda/gputest/
//
// only where one exists. Without the tag this package is empty.
package gputest
