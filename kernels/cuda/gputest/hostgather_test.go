//go:build cuda && cgo && linux

package gputest

import (
	"errors"
	"math"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/kernels/cuda"
)

// TestHostGathererInterface checks the trainer-facing kernels.HostGatherer
// of the CUDA backend, zero-copy and staging: the trainer's assembly of a
// batch input (hits gathered from the registered array, misses uploaded,
// both scattered into a tensor of −0) is bit for bit the host-gathered
// input, signed zeros included; foreign and unregistered handles fail with
// the kernels sentinels.
func TestHostGathererInterface(t *testing.T) {
	r := rng(t)
	for _, tc := range []struct {
		name string
		opts *cuda.Options
	}{
		{"auto", nil},
		{"staging", &cuda.Options{ZeroCopy: cuda.ZeroCopyOff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.opts)
			var hg kernels.HostGatherer = b
			const slotsN, cols, n = 700, 37, 900
			cache := mmapFloats(t, slotsN*cols)
			for i := range cache {
				cache[i] = float32(r.NormFloat64())
			}
			cache[3] = float32(math.Copysign(0, -1))
			h, err := hg.RegisterHostRows(cache, cols)
			if err != nil {
				t.Fatal(err)
			}
			// A batch: every other input row a hit.
			want := make([]float32, n*cols)
			var hitPos, hitSlot, missPos []int32
			var miss []float32
			for k := range n {
				row := want[k*cols : (k+1)*cols]
				if k%2 == 0 {
					s := int32(r.IntN(slotsN))
					hitPos, hitSlot = append(hitPos, int32(k)), append(hitSlot, s)
					copy(row, cache[int(s)*cols:int(s+1)*cols])
				} else {
					for c := range row {
						row[c] = float32(r.NormFloat64())
					}
					if k == 1 {
						row[0] = float32(math.Copysign(0, -1))
					}
					missPos = append(missPos, int32(k))
					miss = append(miss, row...)
				}
			}
			x, _ := b.Alloc(n, cols)
			b.Zero(x)
			b.Scale(x, -1)
			xh, _ := b.Alloc(len(hitPos), cols)
			hg.GatherHostRows(xh, h, hitSlot)
			ph, _ := b.AllocInts(len(hitPos))
			b.UploadInts(ph, hitPos)
			b.ScatterAddRows(x, xh, ph)
			xm, _ := b.Alloc(len(missPos), cols)
			b.Upload(xm, miss)
			pm, _ := b.AllocInts(len(missPos))
			b.UploadInts(pm, missPos)
			b.ScatterAddRows(x, xm, pm)
			got := download(t, b, x)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("element %d = %v (%#x), want %v (%#x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
			for _, y := range []kernels.Tensor{x, xh, xm} {
				b.Free(y)
			}
			b.FreeInts(ph)
			b.FreeInts(pm)

			// Handle rules.
			c, err := cpu.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			foreign, err := c.RegisterHostRows(make([]float32, cols), cols)
			if err != nil {
				t.Fatal(err)
			}
			if err := hg.UnregisterHostRows(foreign); !errors.Is(err, kernels.ErrForeignTensor) || !errors.Is(err, cuda.ErrNotRegistered) {
				t.Errorf("UnregisterHostRows of a cpu handle: %v", err)
			}
			if err := hg.UnregisterHostRows(h); err != nil {
				t.Fatal(err)
			}
			if err := hg.UnregisterHostRows(h); !errors.Is(err, kernels.ErrFreed) {
				t.Errorf("second UnregisterHostRows: %v, want ErrFreed", err)
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			dst, _ := b.Alloc(1, cols)
			hg.GatherHostRows(dst, foreign, []int32{0})
			if err := b.Err(); !errors.Is(err, kernels.ErrForeignTensor) {
				t.Errorf("GatherHostRows of a cpu handle: Err() = %v, want ErrForeignTensor", err)
			}
		})
	}
}
