package importer

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// nearestFloat16 is the float16 nearest x, ties to the even bit pattern,
// found among all finite float16 values (an oracle independent of any
// conversion code); beyond the largest it is ±Inf from the midpoint
// 65520 on, as IEEE rounding gives.
func nearestFloat16(vals []float64, bits []uint16, x float64) uint16 {
	sign := uint16(0)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if x >= 65520 {
		return sign | 0x7c00
	}
	i, _ := slices.BinarySearch(vals, x) // vals[i-1] < x <= vals[i]
	if i < len(vals) && vals[i] == x {
		return sign | bits[i]
	}
	lo, hi := i-1, i
	if hi == len(vals) {
		return sign | bits[lo]
	}
	switch dl, dh := x-vals[lo], vals[hi]-x; {
	case dl < dh:
		return sign | bits[lo]
	case dh < dl:
		return sign | bits[hi]
	case bits[lo]&1 == 0:
		return sign | bits[lo]
	}
	return sign | bits[hi]
}

// TestFloat64ToFloat16Rounding: float64 features stored as float16 are the
// nearest float16 (ties to even), as NumPy's astype(np.float16) gives.
// Before, float64 → float32 → float16 rounded twice and was one ulp off
// for values just beside a float16 midpoint (1 + 2^-11 + 2^-40 → 0x3c00,
// want 0x3c01; 2^-14 + 2^-25 + 2^-50 → 0x0400, want 0x0401).
func TestFloat64ToFloat16Rounding(t *testing.T) {
	var vals []float64
	var bits []uint16
	for b := range uint16(0x7c00) { // +0 up to the largest finite
		vals, bits = append(vals, float64(float16.Frombits(b).Float32())), append(bits, b)
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 16))
	xs := []float64{1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 0x1p-14 + 0x1p-25 + 0x1p-50, 65519.99999, 65510, 1 + 0x1p-11}
	for range 20000 {
		i := 1 + rng.IntN(len(vals)-2)
		mid := (vals[i] + vals[i+1]) / 2 // exact in float64
		eps := math.Ldexp(mid, -25-rng.IntN(28))
		x := mid + []float64{-eps, 0, eps}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			x = -x
		}
		xs = append(xs, x, rng.NormFloat64()*math.Ldexp(1, rng.IntN(30)-20))
	}
	for _, x := range xs {
		got := float16.Fromfloat32(toFloat32Odd(x)).Bits()
		if want := nearestFloat16(vals, bits, x); got != want {
			t.Fatalf("x = %v (%x): float16 %#04x, want %#04x", x, math.Float64bits(x), got, want)
		}
	}

	// End to end: an import of float64 features with FeatDType float16.
	e2e := []float64{xs[0], xs[1], xs[2], xs[5]}
	n := int64(len(e2e))
	src, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeFiles(t, src, map[string]any{
		"paper/node_feat.npy":                npyBytes(t, npy.Float64, []int64{n, 1}, e2e),
		"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int64, []int64{1, 2}, []int64{0, 1}),
	})
	if _, err := ImportNPY(src, out, &Options{FeatDType: "float16"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "features.npy"))
	if err != nil {
		t.Fatal(err)
	}
	data := b[len(b)-int(2*n):]
	for i, x := range e2e {
		got := uint16(data[2*i]) | uint16(data[2*i+1])<<8
		if want := nearestFloat16(vals, bits, x); got != want {
			t.Errorf("stored feature %d = %v: %#04x, want %#04x", i, x, got, want)
		}
	}
}

// TestFeatureOverflowIsRounding: a feature is refused as overflowing only
// when it rounds to ±Inf in the stored dtype. Before, any magnitude above
// the largest finite value was refused ("65510, beyond float16's range
// (±65504): it would overflow to +Inf"), though it rounds to 65504 (as
// np.float16(65510) does); likewise float64 values just above float32's
// largest.
func TestFeatureOverflowIsRounding(t *testing.T) {
	maxF32 := float64(math.MaxFloat32)
	for _, tc := range []struct {
		name    string
		f16     bool
		csv     string    // text features, or
		f64     []float64 // float64 .npy features
		refused bool
		want    uint32 // the stored bits of the second value
	}{
		{name: "csv 65519 float16", f16: true, csv: "1\n65519\n", want: 0x7bff},
		{name: "csv -65510 float16", f16: true, csv: "1\n-65510\n", want: 0xfbff},
		{name: "csv 65520 float16", f16: true, csv: "1\n65520\n", refused: true},
		{name: "npy 65519.99999 float16", f16: true, f64: []float64{1, 65519.99999}, want: 0x7bff},
		{name: "npy 65520 float16", f16: true, f64: []float64{1, 65520}, refused: true},
		{name: "npy just above float32 max", f64: []float64{1, maxF32 + 0x1p102}, want: math.Float32bits(math.MaxFloat32)},
		{name: "npy float32 overflow midpoint", f64: []float64{1, maxF32 + 0x1p103}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			files := map[string]any{"e.txt": "0 1\n"}
			feat := filepath.Join(src, "f.csv")
			if tc.f64 != nil {
				feat = filepath.Join(src, "f.npy")
				files["f.npy"] = npyBytes(t, npy.Float64, []int64{2, 1}, tc.f64)
			} else {
				files["f.csv"] = tc.csv
			}
			writeFiles(t, src, files)
			o := &Options{FeatFile: feat}
			if tc.f16 {
				o.FeatDType = "float16"
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := ImportEdgeList(filepath.Join(src, "e.txt"), out, o)
			if tc.refused {
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "overflow to") {
					t.Fatalf("got %v, want it refused as overflowing", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(out, "features.npy"))
			if err != nil {
				t.Fatal(err)
			}
			var got uint32
			if tc.f16 {
				got = uint32(b[len(b)-2]) | uint32(b[len(b)-1])<<8
			} else {
				got = uint32(b[len(b)-4]) | uint32(b[len(b)-3])<<8 | uint32(b[len(b)-2])<<16 | uint32(b[len(b)-1])<<24
			}
			if got != tc.want {
				t.Errorf("stored %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestTextFloat16Rounding: text features stored as float16 are the float16
// nearest the decimal value (ties to even), as np.float16(float(s)) gives.
// Before, they were parsed as float32 and rounded again to float16: a
// value that the first rounding put on a float16 midpoint was one ulp off
// ("1.0004882812500009" stored as 0x3c00, want 0x3c01).
func TestTextFloat16Rounding(t *testing.T) {
	var vals []float64
	var bits []uint16
	for b := range uint16(0x7c00) {
		vals, bits = append(vals, float64(float16.Frombits(b).Float32())), append(bits, b)
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 17))
	xs := []float64{1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 0x1p-14 + 0x1p-25 + 0x1p-50, 1 + 0x1p-11, 65510, 0.1}
	for range 2000 {
		i := 1 + rng.IntN(len(vals)-2)
		mid := (vals[i] + vals[i+1]) / 2
		eps := math.Ldexp(mid, -25-rng.IntN(28))
		xs = append(xs, mid+[]float64{-eps, 0, eps}[rng.IntN(3)])
	}
	var row strings.Builder
	for k, x := range xs {
		if k > 0 {
			row.WriteByte(',')
		}
		row.WriteString(strconv.FormatFloat(x, 'g', -1, 64)) // parses back to x
	}
	src, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeFiles(t, src, map[string]any{"e.txt": "0 1\n", "f.csv": row.String() + "\n" + row.String() + "\n"})
	if _, err := ImportEdgeList(filepath.Join(src, "e.txt"), out, &Options{FeatFile: filepath.Join(src, "f.csv"), FeatDType: "float16"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "features.npy"))
	if err != nil {
		t.Fatal(err)
	}
	data := b[len(b)-2*len(xs):] // the second row
	bad := 0
	for k, x := range xs {
		got := uint16(data[2*k]) | uint16(data[2*k+1])<<8
		if want := nearestFloat16(vals, bits, x); got != want {
			if bad++; bad <= 5 {
				t.Errorf("feature %d = %s: stored %#04x, want %#04x", k, strconv.FormatFloat(x, 'g', -1, 64), got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d text features stored other than the nearest float16", bad, len(xs))
	}
}
