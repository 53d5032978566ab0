package readplan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"
)

func TestPlanTable(t *testing.T) {
	// 512-byte rows after a 4096-byte header, 512-byte alignment: row id
	// is block 8+id.
	base := Options{RowBytes: 512, DataOff: 4096, Align: 512, GapRows: 3, MaxBytes: 4096}
	tests := []struct {
		name string
		ids  []int64
		o    Options
		want []Extent
	}{
		{"empty", nil, base, nil},
		{"one", []int64{5}, base, []Extent{{Off: 4096 + 5*512, Len: 512, First: 0, N: 1}}},
		{"adjacent merge", []int64{0, 1, 2}, base, []Extent{{Off: 4096, Len: 3 * 512, First: 0, N: 3}}},
		// Gap of 2 rows < 3: merged, reading the 2 rows between.
		{"gap below", []int64{0, 3}, base, []Extent{{Off: 4096, Len: 4 * 512, First: 0, N: 2}}},
		// Gap of 3 rows is not < 3: two reads.
		{"gap at threshold", []int64{0, 4}, base, []Extent{{Off: 4096, Len: 512, First: 0, N: 1}, {Off: 4096 + 4*512, Len: 512, First: 1, N: 1}}},
		{"duplicates", []int64{7, 7, 8}, base, []Extent{{Off: 4096 + 7*512, Len: 1024, First: 0, N: 3}}},
		{"per-row", []int64{0, 1, 1}, Options{RowBytes: 512, DataOff: 4096, Align: 512, GapRows: 0, MaxBytes: 4096},
			[]Extent{{Off: 4096, Len: 512, First: 0, N: 1}, {Off: 4608, Len: 512, First: 1, N: 1}, {Off: 4608, Len: 512, First: 2, N: 1}}},
		// MaxBytes 4096 holds 8 rows: the ninth starts a new extent.
		{"max bytes", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}, base, []Extent{{Off: 4096, Len: 4096, First: 0, N: 8}, {Off: 4096 + 8*512, Len: 512, First: 8, N: 1}}},
		// 100-byte rows, 512 alignment, no header: rows 0..4 share block 0,
		// row 5 spans blocks 0 and 1.
		{"unaligned rows", []int64{1, 5, 20}, Options{RowBytes: 100, Align: 512, GapRows: 2, MaxBytes: 1 << 20},
			[]Extent{{Off: 0, Len: 1024, First: 0, N: 2}, {Off: 1536, Len: 1024, First: 2, N: 1}}},
		{"buffered", []int64{2, 4}, Options{RowBytes: 10, DataOff: 3, Align: 1, GapRows: 2, MaxBytes: 100},
			[]Extent{{Off: 23, Len: 30, First: 0, N: 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.Validate(); err != nil {
				t.Fatal(err)
			}
			got := Plan(tc.ids, tc.o, nil)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Plan(%v) =\n %+v\nwant\n %+v", tc.ids, got, tc.want)
			}
			checkPlan(t, tc.ids, tc.o, got)
		})
	}
}

// checkPlan checks the package invariants by brute force.
func checkPlan(t *testing.T, ids []int64, o Options, exts []Extent) {
	t.Helper()
	next := 0
	lastOff := int64(-1)
	for k, x := range exts {
		if x.First != next || x.N < 1 {
			t.Fatalf("extent %d %+v: want First %d, N >= 1", k, x, next)
		}
		next += x.N
		if x.Off%o.Align != 0 || x.Len%o.Align != 0 {
			t.Fatalf("extent %d %+v: not aligned to %d", k, x, o.Align)
		}
		if x.Off < lastOff {
			t.Fatalf("extent %d %+v: offsets not ascending", k, x)
		}
		lastOff = x.Off
		one := int64(0)
		for i := x.First; i < x.First+x.N; i++ {
			pos := o.DataOff + ids[i]*o.RowBytes
			if pos < x.Off || pos+o.RowBytes > x.Off+x.Len {
				t.Fatalf("extent %d %+v does not hold row %d (bytes %d..%d)", k, x, ids[i], pos, pos+o.RowBytes)
			}
			s, e := o.span(ids[i], 1)
			one = max(one, e-s)
		}
		if x.Len > max(o.MaxBytes, one) {
			t.Fatalf("extent %d %+v: longer than MaxBytes %d", k, x, o.MaxBytes)
		}
		if o.GapRows == 0 && x.N != 1 {
			t.Fatalf("extent %d %+v: GapRows 0 merged", k, x)
		}
	}
	if next != len(ids) {
		t.Fatalf("extents cover %d of %d ids", next, len(ids))
	}
}

func TestPlanProperty(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	for it := range 500 {
		aligns := []int64{1, 512, 4096}
		o := Options{
			RowBytes: 1 + rng.Int64N(2000),
			DataOff:  rng.Int64N(5000),
			Align:    aligns[rng.IntN(len(aligns))],
			GapRows:  rng.Int64N(40),
			MaxBytes: 1 + rng.Int64N(1<<16),
		}
		n := rng.IntN(300)
		rows := 1 + rng.Int64N(5000)
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = rng.Int64N(rows)
		}
		slices.Sort(ids)
		exts := Plan(ids, o, nil)
		checkPlan(t, ids, o, exts)
		// Merging never makes more reads than rows, and a positive gap
		// never more reads than GapRows 0.
		per := o
		per.GapRows = 0
		if s, p := Summarise(exts), Summarise(Plan(ids, per, nil)); s.Reads > p.Reads || p.Reads != n {
			t.Fatalf("iteration %d: %d reads merged, %d per row, %d ids", it, s.Reads, p.Reads, n)
		}
	}
}

func TestGap(t *testing.T) {
	// docs/ooc.md: 18 µs per random read, 690 MiB/s sequential, 512-byte
	// rows: 18e-6 · 723517440 / 512 = 25.4 rows.
	if g := Gap(18e-6, 690<<20, 512); g != 25 {
		t.Fatalf("Gap = %d, want 25", g)
	}
	if g := Gap(1e-9, 1, 512); g != 1 {
		t.Fatalf("tiny Gap = %d, want 1", g)
	}
	if g := Gap(0, 1e9, 512); g != 0 {
		t.Fatalf("unknown cost Gap = %d, want 0", g)
	}
}

// unionBytes is the bytes the aligned spans of ids occupy, by brute force.
func unionBytes(ids []int64, o Options) int64 {
	blocks := map[int64]bool{}
	for _, id := range ids {
		s, e := o.span(id, 1)
		for b := s; b < e; b += o.Align {
			blocks[b] = true
		}
	}
	return int64(len(blocks)) * o.Align
}

func TestPlanAmplificationCap(t *testing.T) {
	// 512-byte rows, no header: gaps of 1, 1, 2 and 4 rows between five
	// single rows. Union 5 rows.
	ids := []int64{0, 2, 4, 7, 12}
	base := Options{RowBytes: 512, Align: 512, GapRows: 10, MaxBytes: 1 << 20}
	tests := []struct {
		amp       float64
		credit    int64 // rows
		wantReads int
		wantBytes int64
	}{
		{0, 0, 1, 13 * 512},   // no cap: everything below 10 rows merges
		{1, 0, 5, 5 * 512},    // no extra bytes: per row
		{1.2, 0, 5, 5 * 512},  // budget 1 row: both 1-row gaps or neither
		{1.5, 0, 3, 7 * 512},  // budget 2.5 rows: the two 1-row gaps
		{1.8, 0, 2, 9 * 512},  // budget 4 rows: 1+1+2
		{2.6, 0, 1, 13 * 512}, // budget 8 rows: all
		// Credit (rows the caller serves itself): budget
		// (a-1)·5 + a·credit rows.
		{1.5, 3, 2, 9 * 512}, // 2.5 + 4.5 = 7 rows: 1+1+2
		{1, 8, 1, 13 * 512},  // 0 + 8 rows: all (the gaps are the credited rows)
		{1.2, 2, 3, 7 * 512}, // 1 + 2.4 = 3.4 rows: 1+1
	}
	for _, tc := range tests {
		o := base
		o.MaxAmplification, o.CreditBytes = tc.amp, tc.credit*512
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		exts := Plan(ids, o, nil)
		checkPlan(t, ids, o, exts)
		if s := Summarise(exts); s.Reads != tc.wantReads || s.Bytes != tc.wantBytes {
			t.Errorf("amplification %v, credit %d rows: %d reads of %d bytes, want %d of %d", tc.amp, tc.credit, s.Reads, s.Bytes, tc.wantReads, tc.wantBytes)
		}
	}
	for _, bad := range []float64{-1, 0.5, math.NaN(), math.Inf(1)} {
		o := base
		o.MaxAmplification = bad
		if o.Validate() == nil {
			t.Errorf("MaxAmplification %v accepted", bad)
		}
	}
	neg := base
	neg.CreditBytes = -1
	if neg.Validate() == nil {
		t.Error("negative CreditBytes accepted")
	}
}

func TestPlanAmplificationProperty(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	var p Planner
	for it := range 500 {
		aligns := []int64{1, 512, 4096}
		o := Options{
			RowBytes:         1 + rng.Int64N(2000),
			DataOff:          rng.Int64N(5000),
			Align:            aligns[rng.IntN(len(aligns))],
			GapRows:          1 + rng.Int64N(40),
			MaxBytes:         1 + rng.Int64N(1<<18),
			MaxAmplification: 1 + 3*rng.Float64(),
		}
		n := 1 + rng.IntN(300)
		rows := 1 + rng.Int64N(5000)
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = rng.Int64N(rows)
		}
		slices.Sort(ids)
		if rng.IntN(2) == 0 {
			o.CreditBytes = rng.Int64N(int64(n) * o.RowBytes)
		}
		exts := p.Plan(ids, o, nil)
		checkPlan(t, ids, o, exts)
		u := unionBytes(ids, o) + o.CreditBytes
		s := Summarise(exts)
		// Blocks shared by two extents (rows that share a block, split
		// by MaxBytes) are read twice, cap or not.
		var again, end int64
		for _, x := range exts {
			again += max(0, min(end, x.Off+x.Len)-x.Off)
			end = max(end, x.Off+x.Len)
		}
		if float64(s.Bytes-again) > o.MaxAmplification*float64(u) {
			t.Fatalf("iteration %d: read %d bytes (%d twice), union %d, cap %v", it, s.Bytes, again, u, o.MaxAmplification)
		}
		// The cap never merges more than the uncapped plan, and never
		// less than per-row reads.
		un := o
		un.MaxAmplification = 0
		per := o
		per.GapRows = 0
		if r0, r1, r2 := Summarise(Plan(ids, un, nil)).Reads, s.Reads, Summarise(Plan(ids, per, nil)).Reads; r1 < r0 || r1 > r2 {
			t.Fatalf("iteration %d: reads uncapped %d, capped %d, per row %d", it, r0, r1, r2)
		}
		// A credit only widens the cap: never more reads than without.
		nc := o
		nc.CreditBytes = 0
		if r := Summarise(Plan(ids, nc, nil)).Reads; s.Reads > r {
			t.Fatalf("iteration %d: %d reads with %d bytes of credit, %d without", it, s.Reads, o.CreditBytes, r)
		}
	}
}

// TestWalkRangesProperty checks WalkFunc's extents for random sorted
// ranges: in order, aligned, each range whole inside its extent, no
// extent longer than MaxBytes unless one range's span is, within the
// amplification cap; and that ranges of one row plan as Walk plans ids.
func TestWalkRangesProperty(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	var p Planner
	for it := range 500 {
		aligns := []int64{1, 512, 4096}
		o := Options{
			RowBytes: []int64{4, 8, 1 + rng.Int64N(100)}[rng.IntN(3)],
			DataOff:  rng.Int64N(5000),
			Align:    aligns[rng.IntN(len(aligns))],
			GapRows:  rng.Int64N(2000),
			MaxBytes: 1 + rng.Int64N(1<<16),
		}
		if rng.IntN(2) == 0 && o.GapRows > 0 {
			o.MaxAmplification = 1 + 3*rng.Float64()
		}
		n := rng.IntN(300)
		rows := 1 + rng.Int64N(50000)
		rs := make([]Range, n)
		for i := range rs {
			rs[i] = Range{Row: rng.Int64N(rows), N: 1 + rng.Int64N(1+rng.Int64N(3000))}
		}
		slices.SortFunc(rs, func(a, b Range) int { return int(a.Row - b.Row) })
		var exts []Extent
		p.WalkFunc(len(rs), func(k int) Range { return rs[k] }, o, func(x Extent) { exts = append(exts, x) })
		next, lastOff := 0, int64(-1)
		var union, uEnd int64 // bytes the ranges' spans cover (sorted by start)
		for _, r := range rs {
			s, e := o.span(r.Row, r.N)
			union += max(0, e-max(s, uEnd))
			uEnd = max(uEnd, e)
		}
		for k, x := range exts {
			if x.First != next || x.N < 1 || x.Off%o.Align != 0 || x.Len%o.Align != 0 || x.Off < lastOff {
				t.Fatalf("iteration %d: extent %d %+v: want First %d, N >= 1, aligned to %d, offsets ascending", it, k, x, next, o.Align)
			}
			next += x.N
			lastOff = x.Off
			one := int64(0)
			for _, r := range rs[x.First : x.First+x.N] {
				s, e := o.span(r.Row, r.N)
				if s < x.Off || e > x.Off+x.Len {
					t.Fatalf("iteration %d: extent %d %+v does not hold range %+v", it, k, x, r)
				}
				one = max(one, e-s)
			}
			if x.Len > max(o.MaxBytes, one) {
				t.Fatalf("iteration %d: extent %d %+v: longer than MaxBytes %d and its longest range %d", it, k, x, o.MaxBytes, one)
			}
			if o.GapRows == 0 && x.N != 1 && x.Len > one {
				t.Fatalf("iteration %d: extent %d %+v: GapRows 0 merged a gap", it, k, x)
			}
		}
		if next != n {
			t.Fatalf("iteration %d: extents cover %d of %d ranges", it, next, n)
		}
		if o.MaxAmplification > 0 {
			var again, end, bytes int64
			for _, x := range exts {
				again += max(0, min(end, x.Off+x.Len)-x.Off)
				end = max(end, x.Off+x.Len)
				bytes += x.Len
			}
			if float64(bytes-again) > o.MaxAmplification*float64(union) {
				t.Fatalf("iteration %d: read %d bytes (%d twice), union %d, cap %v", it, bytes, again, union, o.MaxAmplification)
			}
		}
		// One-row ranges plan exactly as their ids do.
		ids := make([]int64, n)
		ones := make([]Range, n)
		for i, r := range rs {
			ids[i], ones[i] = r.Row, Range{Row: r.Row, N: 1}
		}
		var a []Extent
		p.WalkFunc(len(ones), func(k int) Range { return ones[k] }, o, func(x Extent) { a = append(a, x) })
		if b := p.Plan(ids, o, nil); !slices.Equal(a, b) {
			t.Fatalf("iteration %d: one-row ranges planned %v, ids %v", it, a, b)
		}
	}
}
