package csvnum

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("csvnum.seed", 0, "seed for randomised tests (0: time-based)")

// testRand returns a generator seeded from -csvnum.seed or the clock, and
// logs the seed so a failure can be replayed.
func testRand(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -csvnum.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// The fast path must agree with strconv on random plain decimals, in
// particular numpy-style "%.6f" values and values near 2^53.
func TestFastFloat32Random(t *testing.T) {
	rng := testRand(t)
	hits := 0
	const n = 200_000
	for i := 0; i < n; i++ {
		var mant uint64
		switch i % 4 {
		case 0:
			mant = rng.Uint64N(2_000_000) // "%.6f" of small values
		case 1:
			mant = rng.Uint64N(1 << 53)
		case 2:
			mant = 1<<53 - 1 - rng.Uint64N(1000)
		default:
			mant = rng.Uint64() >> rng.UintN(64)
		}
		s := decimal(mant, rng.IntN(24), rng.IntN(2) == 0)
		if _, ok := fastFloat32([]byte(s)); ok {
			hits++
		}
		checkFast(t, s)
	}
	t.Logf("fast path took %d of %d", hits, n)
}

// Fixtures shaped like the OGB raw files.
func floatRows(rows, cols int, binary bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b []byte
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			if c > 0 {
				b = append(b, ',')
			}
			if binary {
				b = append(b, byte('0'+rng.IntN(2)))
			} else {
				b = strconv.AppendFloat(b, rng.NormFloat64()*0.5, 'f', 6, 64) // numpy "%.6f"
			}
		}
		b = append(b, '\n')
	}
	return b
}

func edgeRows(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	var b []byte
	for i := 0; i < n; i++ {
		b = strconv.AppendInt(b, rng.Int64N(100_000_000), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, rng.Int64N(100_000_000), 10)
		b = append(b, '\n')
	}
	return b
}

func benchFloats(b *testing.B, data []byte, rows, cols int) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	buf := make([]float32, 0, cols)
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench", nil)
		n := 0
		for r.Next() {
			var err error
			if buf, err = r.Float32sN(buf, cols); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := r.Err(); err != nil || n != rows {
			b.Fatal(n, err)
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(rows)*float64(b.N)/s, "rows/s")
	b.ReportMetric(float64(rows*cols)*float64(b.N)/s, "floats/s")
}

func BenchmarkFloat32s(b *testing.B) {
	const rows = 10_000
	for _, cols := range []int{128, 1433} {
		for _, binary := range []bool{false, true} {
			r := rows
			if cols > 128 {
				r = rows / 10
			}
			data := floatRows(r, cols, binary)
			name := fmt.Sprintf("cols=%d/%%.6f", cols)
			if binary {
				name = fmt.Sprintf("cols=%d/binary", cols)
			}
			b.Run(name, func(b *testing.B) { benchFloats(b, data, r, cols) })
		}
	}
}

func BenchmarkEdges(b *testing.B) {
	const n = 100_000
	data := edgeRows(n)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	buf := make([]int64, 0, 2)
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench", nil)
		for r.Next() {
			var err error
			if buf, err = r.Int64sN(buf, 2); err != nil {
				b.Fatal(err)
			}
		}
		if err := r.Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
}

// BenchmarkLines measures line splitting alone, the floor under the others.
func BenchmarkLines(b *testing.B) {
	data := floatRows(10_000, 128, false)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench", nil)
		for r.Next() {
		}
	}
}
