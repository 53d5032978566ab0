package cuda

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestPTXEntries checks the committed kernels.ptx: it targets compute_80,
// has an .entry for every kernel the backend launches, and every parameter
// is 64 bits wide (gorgonia.org/cu's Launch reads 8 bytes per parameter).
func TestPTXEntries(t *testing.T) {
	ptx, err := os.ReadFile("kernels.ptx")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\.target sm_80$`).Match(ptx) {
		t.Error("kernels.ptx does not target sm_80 (regenerate with make ptx)")
	}
	params, err := ptxParams(string(ptx))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range kernelNames {
		types, ok := params[name]
		if !ok {
			t.Errorf("kernel %s missing from kernels.ptx (regenerate with make ptx)", name)
			continue
		}
		for i, ty := range types {
			if !slices.Contains([]string{"u64", "s64", "b64", "f64"}, ty) {
				t.Errorf("kernel %s parameter %d is .%s; every parameter must be 64-bit", name, i, ty)
			}
		}
	}
	for name := range params {
		if !slices.Contains(kernelNames, name) {
			t.Errorf("kernels.ptx entry %s is not in kernelNames", name)
		}
	}
}

// TestCUSignatures checks the same 64-bit rule on the CUDA C source, so a
// forgotten `int` or `float` parameter is caught before nvcc runs.
func TestCUSignatures(t *testing.T) {
	src, err := os.ReadFile("kernels.cu")
	if err != nil {
		t.Fatal(err)
	}
	sig := regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__\(\w+\) )?(\w+)\(([^)]*)\)`)
	n := 0
	for _, m := range sig.FindAllStringSubmatch(string(src), -1) {
		n++
		for _, p := range regexp.MustCompile(`\s*,\s*`).Split(m[2], -1) {
			p = regexp.MustCompile(`\s+`).ReplaceAllString(p, " ")
			ok := regexp.MustCompile(`\*`).MatchString(p) || regexp.MustCompile(`^(const )?(ll|ull|double) \w+$`).MatchString(p)
			if !ok {
				t.Errorf("kernel %s: parameter %q is not 64-bit (use a pointer, ll, ull or double)", m[1], p)
			}
		}
	}
	if n != len(kernelNames) {
		t.Errorf("kernels.cu declares %d kernels, kernelNames lists %d", n, len(kernelNames))
	}
}

func TestPTXParamsErrors(t *testing.T) {
	if _, err := ptxParams("// nothing"); err == nil {
		t.Error("ptxParams accepted a module without entries")
	}
	got, err := ptxParams(".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .f64 k_param_1\n)\n{\n}\n")
	if err != nil || len(got["k"]) != 2 || got["k"][1] != "f64" {
		t.Errorf("ptxParams = %v, %v", got, err)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := (*Options)(nil).withDefaults()
	if o.StagingBytes != 4<<20 || o.StagingBuffers != 4 || o.QueueDepth != 256 || o.PoolBytes != 1<<30 {
		t.Errorf("defaults %+v", o)
	}
}

// TestPackRows drives the staging packer with buffer sizes smaller and
// larger than a row and checks that the concatenated chunks equal the
// gathered rows.
func TestPackRows(t *testing.T) {
	const rows, cols = 9, 5
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(i) + 0.5
	}
	idx := []int32{3, 0, 8, 3, 7, 1}
	var want []byte
	for _, j := range idx {
		for _, v := range data[int(j)*cols : (int(j)+1)*cols] {
			want = append(want, byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24))
		}
	}
	for _, size := range []int{1, 3, 4, 7, 20, 21, 64, 1000} {
		var got []byte
		r, off := 0, 0
		for steps := 0; r < len(idx); steps++ {
			if steps > len(want)+1 {
				t.Fatalf("size %d: no progress", size)
			}
			buf := make([]byte, size)
			var n int
			n, r, off = packRows(buf, data, cols, idx, r, off)
			if n == 0 || (n < size && r < len(idx)) {
				t.Fatalf("size %d: short chunk %d with rows left", size, n)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d: packed bytes differ", size)
		}
	}
}
