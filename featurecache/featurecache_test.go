package featurecache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// writeDataset writes a dataset with the given adjacency and dim-wide
// features whose entry j of node v is v + j/1000.
func writeDataset(t testing.TB, dir string, adj [][]int64, dim int, dtype string) *storage.Dataset {
	t.Helper()
	return storagetest.Write(t, dir, storagetest.Graph{
		Name: "fc", Adj: adj, FeatDim: dim, FeatDType: dtype,
		Feature: func(v int64, row []float32) {
			for j := range row {
				row[j] = float32(v%1000) + float32(j)/1000
			}
		},
		Labels: make([]int32, len(adj)), NumClasses: 2,
		Train: []int64{0}, Valid: []int64{}, Test: []int64{},
	})
}

// randomGraph is a symmetric graph with a few hubs.
func randomGraph(rng *rand.Rand, n int, avgDeg int) [][]int64 {
	set := make([]map[int64]bool, n)
	for i := range set {
		set[i] = map[int64]bool{}
	}
	for range n * avgDeg / 2 {
		u := rng.IntN(n)
		v := rng.IntN(n)
		if rng.IntN(3) == 0 {
			v = rng.IntN(max(1, n/20)) // hubs
		}
		if u != v {
			set[u][int64(v)] = true
			set[v][int64(u)] = true
		}
	}
	adj := make([][]int64, n)
	for v := range adj {
		for u := range set[v] {
			adj[v] = append(adj[v], u)
		}
		sortInt64(adj[v])
	}
	return adj
}

func sortInt64(s []int64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

type policyCase struct {
	name   string
	policy featurecache.Policy
	frac   float64 // of the feature bytes; 0: budget 0
}

var policyCases = []policyCase{
	{"none", featurecache.PolicyDegree, 0},
	{"profiled", featurecache.PolicyProfiled, 0.3},
	{"degree", featurecache.PolicyDegree, 0.3},
	{"dynamic", featurecache.PolicyDynamic, 0.3},
	{"all", featurecache.PolicyDegree, 2},
}

func budgetFor(d *storage.Dataset, frac float64) int64 {
	if frac == 0 {
		return 0
	}
	return 4*d.NumNodes() + int64(frac*float64(d.NumNodes()*d.FeatRowBytes()))
}

func randomCounts(rng *rand.Rand, n int64) []uint32 {
	c := make([]uint32, n)
	for i := range c {
		if rng.IntN(2) == 0 {
			c[i] = uint32(rng.IntN(100))
		}
	}
	return c
}

// TestGatherReturnsDatasetRows: every row gathered, hit or miss, is the
// dataset's, for every dtype, read mode, policy and read plan; the static
// cache is filled in read plans of 7 rows, so that its fill crosses many
// plan boundaries.
func TestGatherReturnsDatasetRows(t *testing.T) {
	defer featurecache.SetFillChunk(7)()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	adj := randomGraph(rng, 600, 8)
	for _, dtype := range []string{"float32", "float16"} {
		d := writeDataset(t, filepath.Join(t.TempDir(), dtype), adj, 12, dtype)
		for _, mode := range []storage.ReadMode{storage.ReadBuffered, storage.ReadDirect} {
			for _, pc := range policyCases {
				for _, rc := range readCases {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", dtype, mode, pc.name, rc.name), func(t *testing.T) {
						acct := storage.NewAccounting()
						opts := &featurecache.Options{Policy: pc.policy, Mode: mode, Stage: acct.Stage("g"), LoadStage: acct.Stage("l"), IODepth: 5,
							CoalesceGap: rc.gap, IO: rc.io}
						if pc.policy == featurecache.PolicyProfiled {
							opts.Counts = randomCounts(rng, d.NumNodes())
						}
						c, err := featurecache.New(context.Background(), d, budgetFor(d, pc.frac), opts)
						if errors.Is(err, storage.ErrDirectUnsupported) {
							t.Skip(err)
						}
						if err != nil {
							t.Fatal(err)
						}
						defer c.Close()
						g0 := snapshot(acct, "g") // O_DIRECT's open probe reads a block
						rb := d.FeatRowBytes()
						var total int64
						for round := range 4 {
							ids := make([]int64, 50+rng.IntN(400))
							for i := range ids {
								ids[i] = rng.Int64N(d.NumNodes())
							}
							dst := make([]byte, int64(len(ids))*rb)
							if err := c.Gather(ids, dst); err != nil {
								t.Fatal(err)
							}
							for i, v := range ids {
								if got := dst[int64(i)*rb : int64(i+1)*rb]; !bytes.Equal(got, d.FeatureBytes(v)) {
									t.Fatalf("round %d: row %d (node %d) differs", round, i, v)
								}
							}
							f := make([]float32, len(ids)*d.FeatDim())
							if err := c.GatherF32(ids, f); err != nil {
								t.Fatal(err)
							}
							want := make([]float32, d.FeatDim())
							for i, v := range ids {
								d.FeatureRow(v, want)
								for j, x := range want {
									if f[i*d.FeatDim()+j] != x {
										t.Fatalf("GatherF32 row %d col %d: %v, want %v", i, j, f[i*d.FeatDim()+j], x)
									}
								}
							}
							total += 2 * int64(len(ids))
							c.Wait()
						}
						s := c.Stats()
						if s.Hits+s.Misses != s.Requests || s.Requests != total {
							t.Fatalf("stats %+v: want hits+misses = requests = %d", s, total)
						}
						if s.BytesRequested != total*rb || s.BytesMissed != s.Misses*rb {
							t.Fatalf("stats %+v: byte counts inconsistent", s)
						}
						g := snapshot(acct, "g")
						g.BytesRead -= g0.BytesRead
						if g.Rows != total || g.BytesRequested != total*rb {
							t.Fatalf("gather stage %+v, want %d rows", g, total)
						}
						// Merged reads read a duplicate id's row once.
						if rc.gap == featurecache.PerRowReads && g.BytesRead < s.BytesMissed {
							t.Fatalf("gather stage read %d bytes < %d missed", g.BytesRead, s.BytesMissed)
						}
						if g.ReadCalls-g0.ReadCalls > s.Misses {
							t.Fatalf("%d read calls for %d misses", g.ReadCalls-g0.ReadCalls, s.Misses)
						}
						switch pc.name {
						case "none":
							if s.Hits != 0 {
								t.Fatalf("budget 0 hit %d times", s.Hits)
							}
						case "all":
							if s.Misses != 0 || g.BytesRead != 0 {
								t.Fatalf("whole graph cached yet %d misses, %d bytes read", s.Misses, g.BytesRead)
							}
						case "profiled", "degree":
							if s.Hits == 0 {
								t.Fatalf("30%% cache never hit: %+v", s)
							}
						}
						if rc.gap == featurecache.PerRowReads && g.ReadCalls-g0.ReadCalls != s.Misses {
							t.Fatalf("per-row reads: %d calls for %d misses", g.ReadCalls-g0.ReadCalls, s.Misses)
						}
					})
				}
			}
		}
	}
}

// readCases are the ways misses are read: one pread per row (before read
// plans), the default plan, and a fixed gap on io_uring.
var readCases = []struct {
	name string
	gap  int64
	io   storage.IOEngine
}{
	{"rowwise", featurecache.PerRowReads, storage.IOPread},
	{"auto", 0, storage.IOAuto},
	{"gap3-uring", 3, storage.IOUring},
}

func snapshot(a *storage.Accounting, stage string) storage.StageStats {
	for _, s := range a.Snapshot() {
		if s.Stage == stage {
			return s
		}
	}
	return storage.StageStats{}
}

// TestSelection checks on a hand-made graph that degree and profiled pick
// different, correct nodes.
func TestSelection(t *testing.T) {
	// Node 0 is a hub of degree 5; node 6 is a leaf; 7 is isolated.
	adj := [][]int64{
		{1, 2, 3, 4, 5}, {0, 2}, {0, 1}, {0}, {0}, {0, 6}, {5}, {},
	}
	d := writeDataset(t, t.TempDir(), adj, 4, "float32")
	rb := d.FeatRowBytes()
	counts := []uint32{1, 0, 0, 9, 0, 0, 7, 9} // 3 and 7 tie: both fit
	cases := []struct {
		name   string
		opts   *featurecache.Options
		rows   int64
		cached []int64
	}{
		{"degree-2", &featurecache.Options{Policy: featurecache.PolicyDegree}, 2, []int64{0, 1}}, // deg 5, then 1,2,5 tie at 2 → smallest id
		{"degree-4", &featurecache.Options{Policy: featurecache.PolicyDegree}, 4, []int64{0, 1, 2, 5}},
		{"degree-all", &featurecache.Options{Policy: featurecache.PolicyDegree}, 8, []int64{0, 1, 2, 3, 4, 5, 6, 7}}, // 7 has degree 0: last, still cached
		{"profiled-1", &featurecache.Options{Counts: counts}, 1, []int64{3}},                                         // auto → profiled; tie 3/7 → 3
		{"profiled-3", &featurecache.Options{Policy: featurecache.PolicyProfiled, Counts: counts}, 3, []int64{3, 6, 7}},
		{"profiled-all", &featurecache.Options{Policy: featurecache.PolicyProfiled, Counts: counts}, 8, []int64{0, 3, 6, 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			budget := featurecache.BytesFor(tc.rows, rb, d.NumNodes())
			c, err := featurecache.New(context.Background(), d, budget, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got []int64
			for v, s := range c.Slots() {
				if s >= 0 {
					if want := int32(len(got)); s != want {
						t.Errorf("node %d in slot %d, want %d (ascending id order)", v, s, want)
					}
					got = append(got, int64(v))
					if !bytes.Equal(c.Rows()[int64(s)*rb:int64(s+1)*rb], d.FeatureBytes(int64(v))) {
						t.Errorf("slot %d holds a row other than node %d's", s, v)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.cached) {
				t.Fatalf("cached %v, want %v", got, tc.cached)
			}
			if s := c.Stats(); s.MemoryBytes > budget {
				t.Fatalf("memory %d > budget %d", s.MemoryBytes, budget)
			}
		})
	}
}

// TestBudgetProperty checks over random dims and budgets that a static
// cache never exceeds its budget and fills it as far as rows allow, and
// that the dynamic cache's charged bytes stay within MaxCost.
func TestBudgetProperty(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	for trial := range 6 {
		n := 50 + rng.IntN(300)
		dim := 1 + rng.IntN(40)
		dtype := []string{"float32", "float16"}[rng.IntN(2)]
		adj := randomGraph(rng, n, 4)
		d := writeDataset(t, filepath.Join(t.TempDir(), fmt.Sprint(trial)), adj, dim, dtype)
		rb := d.FeatRowBytes()
		counts := randomCounts(rng, d.NumNodes())
		nonzero := int64(0)
		for _, x := range counts {
			if x > 0 {
				nonzero++
			}
		}
		for range 8 {
			budget := 4*int64(n) + rng.Int64N(int64(n)*rb*5/4+1)
			c, err := featurecache.New(context.Background(), d, budget, &featurecache.Options{Counts: counts})
			if err != nil {
				t.Fatalf("trial %d: n %d dim %d budget %d: %v", trial, n, dim, budget, err)
			}
			s := c.Stats()
			if s.MemoryBytes > budget || featurecache.BytesFor(s.CachedRows, rb, int64(n)) != s.MemoryBytes {
				t.Fatalf("n %d rowBytes %d budget %d: memory %d", n, rb, budget, s.MemoryBytes)
			}
			if s.CachedRows < nonzero && featurecache.BytesFor(s.CachedRows+1, rb, int64(n)) <= budget {
				t.Fatalf("n %d rowBytes %d budget %d: %d rows cached, one more fits", n, rb, budget, s.CachedRows)
			}
			c.Close()

			dyn, err := featurecache.New(context.Background(), d, budget, &featurecache.Options{Policy: featurecache.PolicyDynamic})
			if errors.Is(err, featurecache.ErrBudget) && s.CachedRows == 0 {
				continue // a budget that holds no row of the static cache is refused by the dynamic one
			}
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]int64, 4*n)
			for i := range ids {
				ids[i] = rng.Int64N(int64(n))
			}
			if err := dyn.Gather(ids, make([]byte, int64(len(ids))*rb)); err != nil {
				t.Fatal(err)
			}
			dyn.Wait()
			if got := dyn.ResidentCostBytes(); got > budget {
				t.Fatalf("dynamic: %d bytes charged > budget %d", got, budget)
			}
			ds := dyn.Stats()
			if ds.CachedRows*(rb+featurecache.DynamicItemOverhead) > budget {
				t.Fatalf("dynamic: %d rows resident exceed budget %d", ds.CachedRows, budget)
			}
			if ds.Hits+ds.Misses != ds.Requests {
				t.Fatalf("dynamic stats %+v", ds)
			}
			dyn.Close()
		}
	}
}

func TestConcurrentGather(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	d := writeDataset(t, t.TempDir(), randomGraph(rng, 500, 6), 8, "float32")
	rb := d.FeatRowBytes()
	for _, pc := range policyCases {
		t.Run(pc.name, func(t *testing.T) {
			opts := &featurecache.Options{Policy: pc.policy}
			if pc.policy == featurecache.PolicyProfiled {
				opts.Counts = randomCounts(rng, d.NumNodes())
			}
			c, err := featurecache.New(context.Background(), d, budgetFor(d, pc.frac), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				grng := rand.New(rand.NewPCG(seed, uint64(10+g)))
				wg.Go(func() {
					for range 10 {
						ids := make([]int64, 300)
						for i := range ids {
							ids[i] = grng.Int64N(d.NumNodes())
						}
						dst := make([]byte, int64(len(ids))*rb)
						if err := c.Gather(ids, dst); err != nil {
							errs <- err
							return
						}
						for i, v := range ids {
							if !bytes.Equal(dst[int64(i)*rb:int64(i+1)*rb], d.FeatureBytes(v)) {
								errs <- fmt.Errorf("node %d: wrong row", v)
								return
							}
						}
						_ = c.Stats()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if s := c.Stats(); s.Requests != 4*10*300 || s.Hits+s.Misses != s.Requests {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	d := writeDataset(t, t.TempDir(), [][]int64{{1}, {0}, {}}, 2, "float32")
	ctx := context.Background()
	cases := []struct {
		name   string
		budget int64
		opts   *featurecache.Options
		want   error
	}{
		{"negative budget", -1, nil, featurecache.ErrBudget},
		{"table does not fit", 11, nil, featurecache.ErrBudget},
		{"dynamic no row fits", 10, &featurecache.Options{Policy: featurecache.PolicyDynamic}, featurecache.ErrBudget},
		{"profiled without counts", 100, &featurecache.Options{Policy: featurecache.PolicyProfiled}, featurecache.ErrInvalidOptions},
		{"counts wrong length", 100, &featurecache.Options{Counts: []uint32{1}}, featurecache.ErrInvalidOptions},
		{"bad policy", 100, &featurecache.Options{Policy: 9}, featurecache.ErrInvalidOptions},
		{"bad io depth", 100, &featurecache.Options{IODepth: -1}, featurecache.ErrInvalidOptions},
		{"ok nil options", 12, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := featurecache.New(ctx, d, tc.budget, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	c, err := featurecache.New(ctx, d, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Gather([]int64{3}, make([]byte, 8)); !errors.Is(err, featurecache.ErrNodeRange) {
		t.Fatalf("out of range id: %v", err)
	}
	if err := c.Gather([]int64{0, 1}, make([]byte, 8)); !errors.Is(err, featurecache.ErrShortBuffer) {
		t.Fatalf("short buffer: %v", err)
	}
	c.Close()
	if err := c.Gather([]int64{0}, make([]byte, 8)); !errors.Is(err, featurecache.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	ctxc, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := featurecache.New(ctxc, d, 100, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled fill: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []featurecache.Policy{featurecache.PolicyAuto, featurecache.PolicyProfiled, featurecache.PolicyDegree, featurecache.PolicyDynamic} {
		got, err := featurecache.ParsePolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := featurecache.ParsePolicy("lru"); !errors.Is(err, featurecache.ErrInvalidOptions) {
		t.Fatal(err)
	}
}

func TestCapacityFor(t *testing.T) {
	cases := []struct{ budget, rowBytes, n, want int64 }{
		{0, 8, 10, 0}, {39, 8, 10, 0}, {40, 8, 10, 0}, {47, 8, 10, 0}, {48, 8, 10, 1}, {1000, 8, 10, 10}, {100, 0, 10, 0},
	}
	for _, tc := range cases {
		if got := featurecache.CapacityFor(tc.budget, tc.rowBytes, tc.n); got != tc.want {
			t.Errorf("CapacityFor(%d, %d, %d) = %d, want %d", tc.budget, tc.rowBytes, tc.n, got, tc.want)
		}
		if got := featurecache.CapacityFor(tc.budget, tc.rowBytes, tc.n); got > 0 && featurecache.BytesFor(got, tc.rowBytes, tc.n) > tc.budget {
			t.Errorf("capacity %d exceeds budget %d", got, tc.budget)
		}
	}
}

// TestReadPlanSource: the merge gap comes from the option, else from
// device.json, else from the default profile.
func TestReadPlanSource(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	d := writeDataset(t, t.TempDir(), randomGraph(rng, 100, 4), 128, "float32")
	open := func(gap int64) featurecache.ReadPlan {
		t.Helper()
		c, err := featurecache.New(context.Background(), d, 0, &featurecache.Options{CoalesceGap: gap, IO: storage.IOPread})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ReadPlan()
	}
	if p := open(0); p.Source != "default" || p.GapRows != 25 || p.Engine != "pread" {
		t.Fatalf("no device.json: %+v, want the default profile's 25 rows", p)
	}
	prof := &storage.DeviceProfile{Version: storage.DeviceProfileVersion, ReadMode: "direct", RowBytes: 512, RandomDepth: 16, RandomReadsPerSec: 100e3, SeqDepth: 1, SeqReadBytes: 1 << 20, SeqBytesPerSec: 512e6}
	if err := storage.WriteDeviceProfile(d.Dir(), prof); err != nil {
		t.Fatal(err)
	}
	// 512e6 B/s / 100e3 reads/s / 512 B = 10 rows.
	if p := open(0); p.Source != storage.FileDevice || p.GapRows != 10 {
		t.Fatalf("device.json: %+v, want 10 rows from it", p)
	}
	if p := open(7); p.Source != "option" || p.GapRows != 7 {
		t.Fatalf("option 7: %+v", p)
	}
	if p := open(featurecache.PerRowReads); p.GapRows != 0 {
		t.Fatalf("per-row: %+v", p)
	}
	if err := (&featurecache.Options{CoalesceGap: -2}).Validate(); err == nil {
		t.Fatal("CoalesceGap -2 accepted")
	}
}

// TestGatherScratchCounted: a Gather's and a GatherF32's scratch (miss
// indices, requests, undecoded rows, the read session) is counted in
// memacct.BatchBuffers, within GatherCallBytes for the largest call and
// GatherSlotBytes, and uncounted on Close.
func TestGatherScratchCounted(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	adj := randomGraph(rng, 3000, 6)
	for _, dtype := range []string{"float32", "float16"} {
		t.Run(dtype, func(t *testing.T) {
			d := writeDataset(t, filepath.Join(t.TempDir(), dtype), adj, 40, dtype)
			base := memacct.Read().Bytes[memacct.BatchBuffers]
			opts := &featurecache.Options{Policy: featurecache.PolicyDegree, IODepth: 4, MaxReadBytes: 16 << 10}
			c, err := featurecache.New(context.Background(), d, budgetFor(d, 0.1), opts)
			if err != nil {
				t.Fatal(err)
			}
			gather := func(n int64) {
				ids := make([]int64, n)
				for i := range ids {
					ids[i] = rng.Int64N(d.NumNodes())
				}
				if err := c.GatherF32(ids, make([]float32, n*int64(d.FeatDim()))); err != nil {
					t.Fatal(err)
				}
			}
			var most int64
			for _, n := range []int64{10, 2500, 700} {
				most = max(most, n)
				gather(n)
				got := memacct.Read().Bytes[memacct.BatchBuffers] - base
				bound := featurecache.GatherCallBytes(d, most, opts) + featurecache.GatherSlotBytes(d, opts)
				if got < gatherFloor(n) || got > bound {
					t.Errorf("after %d ids (largest %d): counted %d bytes, want in [%d, %d]", n, most, got, gatherFloor(n), bound)
				}
			}
			// A call above the kept size frees its scratch when it
			// returns: what stays counted is what the earlier calls
			// left, plus the read session's per-item state of at most
			// one chunk.
			kept := memacct.Read().Bytes[memacct.BatchBuffers] - base
			big := int64(3 * 16384)
			gather(big)
			after := memacct.Read().Bytes[memacct.BatchBuffers] - base
			if bound := featurecache.GatherCallBytes(d, 16384, opts) + featurecache.GatherSlotBytes(d, opts); after > bound || after < kept {
				t.Errorf("after a call of %d ids: %d bytes counted (%d before), want at most the kept bound %d", big, after, kept, bound)
			}
			c.Close()
			if left := memacct.Read().Bytes[memacct.BatchBuffers] - base; left != 0 {
				t.Errorf("%d bytes still counted after Close", left)
			}
		})
	}
}

// gatherFloor is the least a call of n ids must count: its miss indices
// and requests.
func gatherFloor(n int64) int64 { return 24 * n }

// TestCapCountsHits: the rows a cache serves count as needed under the
// read cap (storage.ScatterOptions.CreditRows). With every other row
// cached, a batch of consecutive rows misses rows one apart. At cap 1.5
// the misses alone (100 rows) allow 50 rows of gap; the 99 one-row gaps
// are all one size, merged together or not at all, so each miss would be
// read alone (100 reads, as before the credit). With the 100 hits counted
// (1.5 × 200 rows needed) every gap fits and one read covers the batch.
func TestCapCountsHits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200
	d := writeDataset(t, t.TempDir(), randomGraph(rng, n, 4), 128, "float32")
	counts := make([]uint32, n)
	for v := 1; v < n; v += 2 {
		counts[v] = 100
	}
	ids := make([]int64, n)
	for v := range ids {
		ids[v] = int64(v)
	}
	for _, tc := range []struct {
		name      string
		budget    int64
		wantReads int64
	}{
		// No cache: 200 consecutive misses, one read.
		{"no cache", 0, 1},
		{"odd rows cached", 4*n + n/2*d.FeatRowBytes(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := storage.NewAccounting()
			c, err := featurecache.New(context.Background(), d, tc.budget, &featurecache.Options{Policy: featurecache.PolicyProfiled, Counts: counts,
				Mode: storage.ReadBuffered, IO: storage.IOPread, Stage: acct.Stage("g"), LoadStage: acct.Stage("l"),
				CoalesceGap: 10, MaxReadAmplification: 1.5, MaxReadBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.budget > 0 && (c.Contains(0) || !c.Contains(1)) {
				t.Fatalf("cache holds row 0: %v, row 1: %v; want the odd rows", c.Contains(0), c.Contains(1))
			}
			dst := make([]byte, n*d.FeatRowBytes())
			if err := c.Gather(ids, dst); err != nil {
				t.Fatal(err)
			}
			if s := snapshot(acct, "g"); s.ReadCalls != tc.wantReads {
				t.Errorf("%d read calls of %d bytes, want %d", s.ReadCalls, s.BytesRead, tc.wantReads)
			}
			rb := d.FeatRowBytes()
			for _, v := range ids {
				if string(dst[v*rb:(v+1)*rb]) != string(d.FeatureBytes(v)) {
					t.Fatalf("row %d differs from the dataset's", v)
				}
			}
		})
	}
}
