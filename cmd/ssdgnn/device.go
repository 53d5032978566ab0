package main

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/kernels/cuda"
)

// newBackend opens the compute backend named by --device. "cuda" needs the
// binary built with the cuda tag (make build-cuda -> bin/ssdgnn-cuda).
func newBackend(device string) (kernels.Backend, error) {
	switch device {
	case "cpu", "":
		return cpu.New(nil)
	case "cuda":
		if !cuda.Available {
			return nil, fmt.Errorf("--device cuda: this binary was built without CUDA; build it with 'make build-cuda' and run bin/ssdgnn-cuda (%w)", cuda.ErrNoGPU)
		}
		return cuda.New(nil)
	}
	return nil, fmt.Errorf("--device %q: want cpu or cuda", device)
}
