package extsort

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var seedFlag = flag.Uint64("extsort.seed", 0, "seed for randomised tests (0: time-based)")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testRand returns a generator and logs its seed so a failure can be
// replayed with -extsort.seed.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -extsort.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// newTestSorter makes a Sorter whose buffer holds at most maxRecords
// records (if > 0), far below MinMemBytes, to force many runs cheaply.
func newTestSorter(t testing.TB, opts *Options, maxRecords int) *Sorter {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if maxRecords > 0 {
		s.maxKeys, s.maxWide = maxRecords, max(1, maxRecords/2)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func drain(t testing.TB, it *Iterator) []Edge {
	t.Helper()
	var out []Edge
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		out = append(out, e)
	}
	return out
}

func reference(in []Edge, dedup bool) []Edge {
	ref := slices.Clone(in)
	slices.SortFunc(ref, cmpEdge)
	if dedup {
		ref = slices.Compact(ref)
	}
	return ref
}

func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func assertEmptyDir(t testing.TB, dir, when string) {
	t.Helper()
	if names := dirEntries(t, dir); len(names) > 0 {
		t.Fatalf("%s: temp dir not empty: %v", when, names)
	}
}

// randomEdges draws n edges. idMax bounds the ids; with bigFrac > 0 that
// fraction of edges (placed after the first half) uses ids beyond 2^32.
func randomEdges(r *rand.Rand, n int, idMax int64, bigFrac float64) []Edge {
	es := make([]Edge, n)
	for i := range es {
		if i > 0 && r.IntN(5) == 0 {
			es[i] = es[r.IntN(i)] // duplicate
			continue
		}
		es[i] = Edge{Src: r.Int64N(idMax), Dst: r.Int64N(idMax)}
		if bigFrac > 0 && i >= n/2 && r.Float64() < bigFrac {
			es[i].Dst = math.MaxUint32 + 1 + r.Int64N(math.MaxInt64-math.MaxUint32)
		}
	}
	return es
}

func TestSortMatchesReference(t *testing.T) {
	r := testRand(t)
	sizes := []int{0, 1, 2, 3, 17, 1000, 20000, 100000}
	for _, n := range sizes {
		for iter := range 4 {
			dedup := iter%2 == 1
			maxRec := 1 + r.IntN(2000)
			if iter == 0 {
				maxRec = 0 // real budget, MinMemBytes
			}
			fan := 2 + r.IntN(3)
			idMax := []int64{1, 8, 1000, math.MaxUint32 + 1, math.MaxInt64}[r.IntN(5)]
			big := 0.0
			if r.IntN(3) == 0 {
				big = 0.01 + r.Float64()*0.5
			}
			name := fmt.Sprintf("n=%d/dedup=%v/rec=%d/fan=%d/idmax=%d/big=%.2f", n, dedup, maxRec, fan, idMax, big)
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				in := randomEdges(r, n, idMax, big)
				s := newTestSorter(t, &Options{TempDir: dir, MemBytes: MinMemBytes, MaxFanIn: fan, Dedup: dedup}, maxRec)
				// Mix Add and AddBatch.
				for i := 0; i < len(in); {
					k := min(len(in)-i, r.IntN(50))
					if k == 0 {
						if err := s.Add(in[i]); err != nil {
							t.Fatal(err)
						}
						i++
						continue
					}
					if err := s.AddBatch(in[i : i+k]); err != nil {
						t.Fatal(err)
					}
					i += k
				}
				it, err := s.Sort()
				if err != nil {
					t.Fatal(err)
				}
				got := drain(t, it)
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				want := reference(in, dedup)
				if !slices.Equal(got, want) {
					t.Fatalf("output differs: got %d edges, want %d; first got %v want %v", len(got), len(want), head(got), head(want))
				}
				st := s.Stats()
				if st.Edges != int64(n) {
					t.Errorf("Stats.Edges = %d, want %d", st.Edges, n)
				}
				if st.Edges-st.Duplicates != int64(len(got)) {
					t.Errorf("Stats: Edges %d - Duplicates %d != output %d", st.Edges, st.Duplicates, len(got))
				}
				if (st.Runs == 0) != (st.SpilledBytes == 0) || (st.Runs == 0) != (st.MergePasses == 0) {
					t.Errorf("inconsistent stats %+v", st)
				}
				if st.Runs > int64(fan) && st.MergePasses < 2 {
					t.Errorf("%d runs with fan-in %d but only %d merge passes", st.Runs, fan, st.MergePasses)
				}
				t.Logf("stats %+v", st)
				// Exhaustion already removed the runs.
				assertEmptyDir(t, dir, "after iteration")
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				assertEmptyDir(t, dir, "after Close")
			})
		}
	}
}

func head(es []Edge) []Edge { return es[:min(len(es), 5)] }

// TestByRowMatchesStableSort checks Options.ByRow against a stable sort by
// Src of the input: in memory, with many runs and intermediate merges
// (fan-in 2 to 4 over up to hundreds of runs), and across the switch to
// wide records, whose buffers the by-row mode converts in input order.
func TestByRowMatchesStableSort(t *testing.T) {
	r := testRand(t)
	for _, n := range []int{0, 1, 2, 17, 1000, 30000} {
		for iter := range 4 {
			maxRec := 1 + r.IntN(500)
			if iter == 0 {
				maxRec = 0 // real budget, MinMemBytes
			}
			fan := 2 + r.IntN(3)
			idMax := []int64{1, 8, 1000, math.MaxUint32 + 1}[r.IntN(4)]
			big := 0.0
			if iter == 3 {
				big = 0.01 + r.Float64()*0.3
			}
			name := fmt.Sprintf("n=%d/rec=%d/fan=%d/idmax=%d/big=%.2f", n, maxRec, fan, idMax, big)
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				in := randomEdges(r, n, idMax, big)
				s := newTestSorter(t, &Options{TempDir: dir, MemBytes: MinMemBytes, MaxFanIn: fan, ByRow: true}, maxRec)
				if err := s.AddBatch(in); err != nil {
					t.Fatal(err)
				}
				it, err := s.Sort()
				if err != nil {
					t.Fatal(err)
				}
				got := drain(t, it)
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(in)
				slices.SortStableFunc(want, func(a, b Edge) int { return cmp.Compare(a.Src, b.Src) })
				if !slices.Equal(got, want) {
					i := 0
					for i < min(len(got), len(want)) && got[i] == want[i] {
						i++
					}
					t.Fatalf("output differs at %d of %d (%d runs, %d merges)", i, len(want), s.Stats().Runs, s.Stats().MergePasses)
				}
				if st := s.Stats(); st.Runs > int64(fan) && st.MergePasses < 2 {
					t.Errorf("%d runs with fan-in %d but only %d merge passes", st.Runs, fan, st.MergePasses)
				}
				assertEmptyDir(t, dir, "after iteration")
			})
		}
	}
}

// TestByRowAlreadyInOrder: an input already in by-row order (a GraphBolt
// export of a CSR whose lists are not sorted) comes out unchanged.
func TestByRowAlreadyInOrder(t *testing.T) {
	in := []Edge{{0, 5}, {0, 1}, {0, 3}, {1, 0}, {2, 9}, {2, 9}, {2, 1}, {4, 0}}
	for _, rec := range []int{0, 1, 2, 3} {
		s := newTestSorter(t, &Options{TempDir: t.TempDir(), MaxFanIn: 2, ByRow: true}, rec)
		if err := s.AddBatch(in); err != nil {
			t.Fatal(err)
		}
		it, err := s.Sort()
		if err != nil {
			t.Fatal(err)
		}
		if got := drain(t, it); !slices.Equal(got, in) {
			t.Errorf("buffer %d: got %v, want %v", rec, got, in)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts *Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &Options{}, true},
		{"min mem", &Options{MemBytes: MinMemBytes}, true},
		{"big mem", &Options{MemBytes: 64 << 30}, true},
		{"mem too small", &Options{MemBytes: MinMemBytes - 1}, false},
		{"mem one", &Options{MemBytes: 1}, false},
		{"mem negative", &Options{MemBytes: -1}, false},
		{"fan-in 2", &Options{MaxFanIn: 2}, true},
		{"by row", &Options{ByRow: true}, true},
		{"by row with dedup", &Options{ByRow: true, Dedup: true}, false},
		{"fan-in 1000", &Options{MaxFanIn: 1000}, true},
		{"fan-in 1", &Options{MaxFanIn: 1}, false},
		{"fan-in negative", &Options{MaxFanIn: -3}, false},
		{"all set", &Options{TempDir: "/nonexistent", MemBytes: 1 << 20, Dedup: true, MaxFanIn: 8}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.ok && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate() = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*Options{
		{MemBytes: 5},
		{TempDir: filepath.Join(t.TempDir(), "missing")},
		{TempDir: f},
	} {
		if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	s, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.opts.TempDir != os.TempDir() || s.opts.MemBytes != DefaultMemBytes || s.opts.MaxFanIn != DefaultMaxFanIn {
		t.Fatalf("defaults not applied: %+v", s.opts)
	}
	if s.maxKeys != DefaultMemBytes/8 || s.maxWide != DefaultMemBytes/16 {
		t.Fatalf("buffer limits %d/%d", s.maxKeys, s.maxWide)
	}
}

func TestInMemoryTouchesNoDisk(t *testing.T) {
	r := testRand(t)
	dir := t.TempDir()
	s := newTestSorter(t, &Options{TempDir: dir, MemBytes: MinMemBytes, Dedup: true}, 0)
	// MinMemBytes holds 8192 packed edges, or 4096 wide ones; 2000 packed
	// (16000 bytes) and their wide copy (32016) fit in it together.
	in := randomEdges(r, 2000, 1<<20, 0)
	in = append(in, Edge{Src: 1 << 40, Dst: 3}) // switch to wide in memory
	if err := s.AddBatch(in); err != nil {
		t.Fatal(err)
	}
	assertEmptyDir(t, dir, "after Add")
	it, err := s.Sort()
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, it)
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, reference(in, true)) {
		t.Fatal("output differs from reference")
	}
	if st := s.Stats(); st.Runs != 0 || st.SpilledBytes != 0 || st.MergePasses != 0 {
		t.Fatalf("stats %+v, want no spill", st)
	}
	assertEmptyDir(t, dir, "after Sort")
}

func TestLargeIDs(t *testing.T) {
	ids := []int64{0, 1, math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1, 1 << 40, 1<<62 - 1, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}
	var in []Edge
	for _, a := range ids {
		for _, b := range ids {
			in = append(in, Edge{a, b}, Edge{b, a})
		}
	}
	tests := []struct {
		name       string
		maxRecords int
		smallFirst int // packed edges added before the large ones
	}{
		{"in memory", 0, 0},
		{"convert packed buffer in memory", 0, 100},
		{"spill packed buffer on switch", 40, 30},
		{"tiny runs", 3, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var all []Edge
			for i := range tt.smallFirst {
				all = append(all, Edge{int64(i % 7), int64(i % 5)})
			}
			all = append(all, in...)
			for _, dedup := range []bool{false, true} {
				s := newTestSorter(t, &Options{TempDir: dir, MaxFanIn: 2, Dedup: dedup}, tt.maxRecords)
				if err := s.AddBatch(all); err != nil {
					t.Fatal(err)
				}
				it, err := s.Sort()
				if err != nil {
					t.Fatal(err)
				}
				got := drain(t, it)
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				if want := reference(all, dedup); !slices.Equal(got, want) {
					t.Fatalf("dedup=%v: got %v\nwant %v", dedup, got, want)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				assertEmptyDir(t, dir, "after Close")
			}
		})
	}
}

func TestAddErrors(t *testing.T) {
	s := newTestSorter(t, &Options{TempDir: t.TempDir()}, 0)
	for _, e := range []Edge{{-1, 0}, {0, -1}, {math.MinInt64, 5}} {
		if err := s.Add(e); !errors.Is(err, ErrNegativeID) {
			t.Errorf("Add(%v) = %v, want ErrNegativeID", e, err)
		}
	}
	if err := s.AddBatch([]Edge{{1, 2}, {-1, 2}, {3, 4}}); !errors.Is(err, ErrNegativeID) {
		t.Errorf("AddBatch = %v, want ErrNegativeID", err)
	}
	if err := s.Add(Edge{0, 0}); err != nil {
		t.Fatalf("Sorter unusable after a rejected edge: %v", err)
	}
	if st := s.Stats(); st.Edges != 2 {
		t.Errorf("Stats.Edges = %d, want 2", st.Edges)
	}
	it, err := s.Sort()
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, it); !slices.Equal(got, []Edge{{0, 0}, {1, 2}}) {
		t.Errorf("got %v", got)
	}
	if err := s.Add(Edge{1, 1}); !errors.Is(err, ErrSorted) {
		t.Errorf("Add after Sort = %v, want ErrSorted", err)
	}
	if _, err := s.Sort(); !errors.Is(err, ErrSorted) {
		t.Errorf("Sort twice = %v, want ErrSorted", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := s.AddBatch([]Edge{{1, 1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("AddBatch after Close = %v, want ErrClosed", err)
	}
}

func TestTempFilesRemoved(t *testing.T) {
	r := testRand(t)
	in := randomEdges(r, 5000, 1<<40, 0)
	tests := []struct {
		name string
		end  func(t *testing.T, s *Sorter)
	}{
		{"close before sort", func(t *testing.T, s *Sorter) {}},
		{"close after sort", func(t *testing.T, s *Sorter) {
			if _, err := s.Sort(); err != nil {
				t.Fatal(err)
			}
		}},
		{"iterator close mid-iteration", func(t *testing.T, s *Sorter) {
			it, err := s.Sort()
			if err != nil {
				t.Fatal(err)
			}
			for range 100 {
				it.Next()
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if _, ok := it.Next(); ok {
				t.Fatal("Next after Close returned an edge")
			}
			if !errors.Is(it.Err(), ErrClosed) {
				t.Fatalf("Err after early Close = %v, want ErrClosed", it.Err())
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{"sorter close mid-iteration", func(t *testing.T, s *Sorter) {
			it, err := s.Sort()
			if err != nil {
				t.Fatal(err)
			}
			for range 100 {
				it.Next()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newTestSorter(t, &Options{TempDir: dir, MaxFanIn: 3}, 100)
			if err := s.AddBatch(in); err != nil {
				t.Fatal(err)
			}
			if len(dirEntries(t, dir)) == 0 {
				t.Fatal("expected spilled runs")
			}
			tt.end(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			assertEmptyDir(t, dir, "after Close")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptRun(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		reason string
	}{
		{"flip payload byte", func(b []byte) []byte { b[headerSize+blockHdrSize+5] ^= 0x40; return b }, "checksum"},
		{"flip block count", func(b []byte) []byte { b[headerSize] ^= 0x01; return b }, ""},
		{"truncate mid block", func(b []byte) []byte { return b[:headerSize+blockHdrSize+100] }, "truncated"},
		{"drop end marker", func(b []byte) []byte { return b[:len(b)-blockHdrSize] }, "truncated"},
		{"truncate header", func(b []byte) []byte { return b[:7] }, "truncated"},
		{"empty file", func(b []byte) []byte { return b[:0] }, "truncated"},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, "magic"},
		{"bad encoding", func(b []byte) []byte { b[10] = 9; return b }, "encoding"},
		{"wrong total", func(b []byte) []byte { b[len(b)-8]++; return b }, "end marker"},
		{"trailing garbage", func(b []byte) []byte { return append(b, 0) }, "after end marker"},
	}
	for _, tt := range tests {
		for _, fan := range []int{64, 2} { // final merge, intermediate merge
			t.Run(fmt.Sprintf("%s/fan=%d", tt.name, fan), func(t *testing.T) {
				dir := t.TempDir()
				s := newTestSorter(t, &Options{TempDir: dir, MaxFanIn: fan}, 20000)
				for i := range 50000 {
					if err := s.Add(Edge{int64(i * 7919 % 50000), int64(i)}); err != nil {
						t.Fatal(err)
					}
				}
				if len(s.runs) < 2 {
					t.Fatalf("want >= 2 runs, have %d", len(s.runs))
				}
				path := s.runs[0].path
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tt.mutate(b), 0o600); err != nil {
					t.Fatal(err)
				}
				n := 0
				it, err := s.Sort()
				if err == nil {
					for _, ok := it.Next(); ok; _, ok = it.Next() {
						n++
					}
					err = it.Err()
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("got error %v after %d edges, want ErrCorrupt", err, n)
				}
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Path != path {
					t.Fatalf("error %v does not name %s", err, path)
				}
				if !strings.Contains(ce.Reason, tt.reason) {
					t.Errorf("reason %q, want it to mention %q", ce.Reason, tt.reason)
				}
				t.Logf("after %d edges: %v", n, err)
				assertEmptyDir(t, dir, "after corruption error")
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * StaleAge)
	files := []struct {
		name    string
		old     bool
		removed bool
	}{
		{"ssdgnn-sort-1.run", true, true},
		{"ssdgnn-sort-2.run", true, true},
		{"ssdgnn-sort-3.run", false, false},
		{"other-1.run", true, false},
		{"ssdgnn-sort-4.tmp", true, false},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if f.old {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("CleanStale removed %d, want 2", n)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if gone := errors.Is(err, os.ErrNotExist); gone != f.removed {
			t.Errorf("%s: removed=%v, want %v", f.name, gone, f.removed)
		}
	}
	if n, err := CleanStale(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Errorf("CleanStale(missing dir) = %d, %v", n, err)
	}
}

func TestSpillFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := newTestSorter(t, &Options{TempDir: dir}, 10)
	for i := range 15 { // one run spilled
		if err := s.Add(Edge{int64(i), 0}); err != nil {
			t.Fatal(err)
		}
	}
	// Removing TempDir (and the spilled run with it) makes the next spill
	// fail; Close must still succeed.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; err == nil && i < 100; i++ {
		err = s.Add(Edge{int64(i), 1})
	}
	if err == nil {
		t.Fatal("no error although TempDir is gone")
	}
	if err2 := s.Add(Edge{1, 1}); !errors.Is(err2, err) && err2.Error() != err.Error() {
		t.Fatalf("error not sticky: %v then %v", err, err2)
	}
	if _, err2 := s.Sort(); err2 == nil {
		t.Fatal("Sort after failure succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBufferWithinBudget measures the sort buffer (memacct.EdgeSort, counted
// where it is allocated) through every growth step, the switch to wide
// records and spills: its peak must stay within MemBytes.
func TestBufferWithinBudget(t *testing.T) {
	r := testRand(t)
	for _, mem := range []int64{MinMemBytes, 1 << 20, 3<<20 + 4096} {
		for _, wideAt := range []int{-1, 1000, 20000, 150000} {
			for _, byRow := range []bool{false, true} {
				memacct.ResetPeak()
				before := memacct.Read().Bytes[memacct.EdgeSort]
				s := newTestSorter(t, &Options{TempDir: t.TempDir(), MemBytes: mem, ByRow: byRow}, 0)
				in := randomEdges(r, 200000, 1<<20, 0)
				if wideAt >= 0 {
					in[wideAt] = Edge{Src: 1 << 40, Dst: 1}
				}
				if err := s.AddBatch(in); err != nil {
					t.Fatal(err)
				}
				it, err := s.Sort()
				if err != nil {
					t.Fatal(err)
				}
				if got := len(drain(t, it)); got != len(in) || it.Err() != nil {
					t.Fatalf("mem %d: %d edges out of %d, %v", mem, got, len(in), it.Err())
				}
				snap := memacct.Read()
				if peak := snap.PeakBytes[memacct.EdgeSort] - before; peak > mem || snap.MaxBytes[memacct.EdgeSort]-before > mem {
					t.Errorf("mem %d, wide at %d: buffer peaked at %d bytes (max %d), above the budget", mem, wideAt, peak, snap.MaxBytes[memacct.EdgeSort]-before)
				}
				if snap.MaxBytes[memacct.EdgeSort]-before < mem/2 {
					t.Errorf("mem %d, wide at %d: buffer only reached %d bytes", mem, wideAt, snap.MaxBytes[memacct.EdgeSort]-before)
				}
				_ = s.Close()
				if got := memacct.Read().Bytes[memacct.EdgeSort]; got != before {
					t.Errorf("mem %d: %d bytes still counted after Close", mem, got-before)
				}
			}
		}
	}
}

// TestGrowCapLadder holds growCap to the package doc's "Memory bound": the
// old and the new buffer of a growth step together never exceed the
// limit, and the ladder from the first capacity ends between 1/2 and 2/3
// of the limit (or at the first capacity when that is more than half).
func TestGrowCapLadder(t *testing.T) {
	for _, limit := range []int{1, 3, 4096, 4097, 8191, 8192, 10000, 12288, 12289, 20000, 65536, 100003, 1 << 20, 3<<20 + 7} {
		c := min(initialRecords, limit)
		for {
			n := growCap(c, limit)
			if n <= c {
				break
			}
			if c+n > limit {
				t.Fatalf("limit %d: a step from %d to %d holds %d records", limit, c, n, c+n)
			}
			c = n
		}
		if 2*min(initialRecords, limit) > limit {
			if c != min(initialRecords, limit) {
				t.Errorf("limit %d: grew from the first capacity to %d", limit, c)
			}
			continue
		}
		if 2*c < limit || 3*c > 2*limit {
			t.Errorf("limit %d: final capacity %d is not within [1/2, 2/3] of it", limit, c)
		}
	}
}
