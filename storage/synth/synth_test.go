package synth

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var seedFlag = flag.Int64("synth.seed", 7, "seed of the generated test graphs")

func testSeed(t testing.TB) int64 {
	t.Helper()
	t.Logf("seed %d (override with -synth.seed)", *seedFlag)
	return *seedFlag
}

// gen generates cfg into a fresh directory and opens it.
func gen(t testing.TB, cfg Config, opts *Options) (*storage.Dataset, Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	rep, err := Generate(dir, cfg, opts)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", cfg, err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, rep
}

func checksums(t testing.TB, d *storage.Dataset) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range d.Manifest().Files {
		out[f.Name] = f.Checksum
	}
	return out
}

func TestDeterminism(t *testing.T) {
	seed := testSeed(t)
	base := Config{Nodes: 3000, FeatDim: 24, Classes: 4, Seed: seed}
	ref, _ := gen(t, base, &Options{Workers: 1})
	want := checksums(t, ref)
	if len(want) != 7 {
		t.Fatalf("manifest lists %d files, want 7: %v", len(want), want)
	}
	// Neither the worker count nor the sort budget (spilling or not) may
	// change a byte.
	for _, opts := range []*Options{nil, {Workers: 3}, {Workers: 2, MemBytes: MinMemBytes}} {
		d, rep := gen(t, base, opts)
		if opts != nil && opts.MemBytes != 0 && rep.SortRuns == 0 {
			t.Errorf("MemBytes %d: expected the sort to spill", opts.MemBytes)
		}
		if opts != nil && opts.MemBytes == MinMemBytes && (rep.Workers != 1 || rep.SortBytes != extsort.MinMemBytes) {
			t.Errorf("MemBytes %d: %d workers and a sort buffer of %d, want 1 and %d", opts.MemBytes, rep.Workers, rep.SortBytes, extsort.MinMemBytes)
		}
		if got := checksums(t, d); !maps(got, want) {
			t.Errorf("options %+v: checksums %v, want %v", opts, got, want)
		}
	}
	other := base
	other.Seed = seed + 1
	d, _ := gen(t, other, nil)
	got := checksums(t, d)
	for name, sum := range got {
		if sum == want[name] {
			t.Errorf("seed %d and %d: %s identical (%s)", seed, other.Seed, name, sum)
		}
	}
	f16 := base
	f16.FeatDType = "float16"
	d, _ = gen(t, f16, nil)
	got = checksums(t, d)
	for name, sum := range got {
		if (sum == want[name]) != (name != storage.FileFeatures) {
			t.Errorf("float16: %s checksum %s, float32 run %s", name, sum, want[name])
		}
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestStructure(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{Nodes: 8000, FeatDim: 8}},
		{"homophily=0.5", Config{Nodes: 8000, FeatDim: 8, Homophily: 0.5, Classes: 4}},
		{"gamma=3,deg=10", Config{Nodes: 8000, FeatDim: 8, DegreeExp: 3, AvgDegree: 10}},
		{"many-communities", Config{Nodes: 8000, FeatDim: 8, Classes: 2, Communities: 80, AvgDegree: 8}},
		{"odd-sizes", Config{Nodes: 7919, FeatDim: 3, Classes: 3, Communities: 7, AvgDegree: 6.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Seed = seed
			d, rep := gen(t, tc.cfg, nil)
			cfg := tc.cfg.WithDefaults()
			vr, err := storage.Validate(d.Dir(), nil)
			if err != nil || !vr.OK() {
				t.Fatalf("storage.Validate: %v %+v", err, vr)
			}
			n := d.NumNodes()
			if n != cfg.Nodes || rep.Nodes != n || rep.Edges != d.NumEdges() {
				t.Fatalf("nodes %d edges %d, report %+v", n, d.NumEdges(), rep)
			}
			p, err := NewPlanted(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ip := d.Indptr()
			var maxDeg, intra int64
			for v := range n {
				if ip[v+1] < ip[v] {
					t.Fatalf("indptr decreases at %d", v)
				}
				nb := d.Neighbors(v)
				maxDeg = max(maxDeg, int64(nb.Len()))
				cv, _ := p.Community(v)
				for i := range nb.Len() {
					u := nb.At(i)
					if u < 0 || u >= n {
						t.Fatalf("edge (%d,%d) out of range", v, u)
					}
					if u == v {
						t.Fatalf("self loop at %d", v)
					}
					if i > 0 && nb.At(i-1) >= u {
						t.Fatalf("neighbours of %d not strictly ascending", v)
					}
					if !hasEdge(d, u, v) {
						t.Fatalf("edge (%d,%d) has no reverse", v, u)
					}
					if cu, _ := p.Community(u); cu == cv {
						intra++
					}
				}
			}
			mean := float64(d.NumEdges()) / float64(n)
			frac := float64(intra) / float64(d.NumEdges())
			t.Logf("mean degree %.2f (want %.1f), max %d, intra-community %.3f (homophily %.2f), dups %d, self loops %d",
				mean, cfg.AvgDegree, maxDeg, frac, cfg.Homophily, rep.DuplicatesDropped, rep.SelfLoopsDropped)
			if math.Abs(mean-cfg.AvgDegree) > 0.15*cfg.AvgDegree {
				t.Errorf("mean degree %.2f, want %.1f ± 15%%", mean, cfg.AvgDegree)
			}
			if float64(maxDeg) < 5*mean {
				t.Errorf("max degree %d not heavy-tailed (mean %.1f)", maxDeg, mean)
			}
			if math.Abs(frac-cfg.Homophily) > 0.04 {
				t.Errorf("intra-community fraction %.3f, want %.2f ± 0.04", frac, cfg.Homophily)
			}
			if 2*rep.SelfLoopsDropped+rep.DuplicatesDropped+rep.Edges == 0 {
				t.Error("empty graph")
			}
			if int64(d.FeatDim()) != int64(cfg.FeatDim) {
				t.Errorf("feat dim %d, want %d", d.FeatDim(), cfg.FeatDim)
			}
		})
	}
}

func hasEdge(d *storage.Dataset, u, v int64) bool {
	nb := d.Neighbors(u)
	lo, hi := 0, nb.Len()
	for lo < hi {
		mid := (lo + hi) / 2
		if nb.At(mid) < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo < nb.Len() && nb.At(lo) == v
}

func TestLabels(t *testing.T) {
	cfg := Config{Nodes: 5000, FeatDim: 4, Classes: 5, Communities: 10, Seed: testSeed(t)}
	d, _ := gen(t, cfg, nil)
	p, err := NewPlanted(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, cfg.Classes)
	comm := make([]int, cfg.Communities)
	contiguous := 0
	prev := -1
	for v, y := range d.Labels() {
		c, _ := p.Community(int64(v))
		if want := p.Label(int64(v)); y != want || int(y) != c%cfg.Classes {
			t.Fatalf("label[%d] = %d, want %d (community %d)", v, y, want, c)
		}
		counts[y]++
		comm[c]++
		if c == prev {
			contiguous++
		}
		prev = c
	}
	for c, k := range comm {
		if k != 500 {
			t.Errorf("community %d has %d members, want 500", c, k)
		}
	}
	// Communities are scattered over the id space, not id ranges: runs of
	// equal community should be as rare as for a random assignment (1/C).
	if f := float64(contiguous) / float64(cfg.Nodes); f > 0.2 {
		t.Errorf("%.2f of consecutive ids share a community; membership looks contiguous", f)
	}
	t.Logf("class counts %v", counts)
}

func TestSplits(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct{ train, valid, test float64 }{
		{0, 0, 0}, // defaults
		{0.5, 0, 0.25},
		{0.6, 0.2, 0.2},
	} {
		cfg := Config{Nodes: 20000, FeatDim: 2, AvgDegree: 2, Seed: seed, TrainFrac: tc.train, ValidFrac: tc.valid, TestFrac: tc.test}
		d, _ := gen(t, cfg, nil)
		c := cfg.WithDefaults()
		seen := make([]bool, c.Nodes)
		for i, s := range []struct {
			idx  []int64
			frac float64
		}{{d.TrainIdx(), c.TrainFrac}, {d.ValidIdx(), c.ValidFrac}, {d.TestIdx(), c.TestFrac}} {
			want := s.frac * float64(c.Nodes)
			tol := 4*math.Sqrt(want*(1-s.frac)) + 1
			if got := float64(len(s.idx)); math.Abs(got-want) > tol {
				t.Errorf("%v: split %d has %v nodes, want %v ± %.0f", tc, i, got, want, tol)
			}
			if !slices.IsSorted(s.idx) {
				t.Errorf("%v: split %d not sorted", tc, i)
			}
			for _, v := range s.idx {
				if seen[v] {
					t.Fatalf("%v: node %d in two splits", tc, v)
				}
				seen[v] = true
			}
		}
	}
}

// TestFeatureSignal checks the "GNN beats MLP" property in miniature:
// class means of the features follow the centroids, and averaging a
// node's neighbourhood classifies far better than its own features.
func TestFeatureSignal(t *testing.T) {
	cfg := Config{Nodes: 20000, Seed: 42}
	d, _ := gen(t, cfg, nil)
	c := cfg.WithDefaults()
	dim := c.FeatDim
	x, err := d.FeaturesF32()
	if err != nil {
		t.Fatal(err)
	}
	labels := d.Labels()
	for y := range c.Classes {
		mean := make([]float64, dim)
		k := 0
		for v, l := range labels {
			if int(l) == y {
				k++
				for j := range dim {
					mean[j] += float64(x[v*dim+j])
				}
			}
		}
		cen, err := Centroid(cfg, y)
		if err != nil {
			t.Fatal(err)
		}
		if r := corr(mean, cen); r < 0.9 {
			t.Errorf("class %d (%d nodes): correlation of class mean with centroid %.3f, want > 0.9", y, k, r)
		}
	}
	raw, agg := nearestCentroid(t, d, cfg)
	t.Logf("nearest class mean: raw features %.3f, neighbourhood mean %.3f", raw, agg)
	if raw > 0.5 || agg < 0.75 || agg-raw < 0.3 {
		t.Errorf("accuracy raw %.3f, aggregated %.3f: want raw < 0.5, aggregated > 0.75 and a margin > 0.3", raw, agg)
	}
}

func corr(a []float64, b []float32) float64 {
	var sa, sb, sab, saa, sbb float64
	n := float64(len(a))
	for i := range a {
		x, y := a[i], float64(b[i])
		sa, sb, sab, saa, sbb = sa+x, sb+y, sab+x*y, saa+x*x, sbb+y*y
	}
	cov := sab/n - sa/n*sb/n
	return cov / math.Sqrt((saa/n-sa*sa/n/n)*(sbb/n-sb*sb/n/n))
}

func TestFeatureMoments(t *testing.T) {
	// Features are normalised: per-dimension variance about 1 overall.
	cfg := Config{Nodes: 4000, FeatDim: 32, Seed: testSeed(t), FeatDType: "float16"}
	d, _ := gen(t, cfg, nil)
	var s, ss float64
	var x, row []float32
	for v := range d.NumNodes() {
		row = d.FeatureRow(v, row[:0])
		x = append(x, row...)
	}
	for _, f := range x {
		s += float64(f)
		ss += float64(f) * float64(f)
	}
	n := float64(len(x))
	if m, v := s/n, ss/n-(s/n)*(s/n); math.Abs(m) > 0.05 || math.Abs(v-1) > 0.05 {
		t.Errorf("feature mean %.3f variance %.3f, want about 0 and 1", m, v)
	}
}

func TestConfigValidate(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Nodes: 100}, true},
		{"all-set", Config{Nodes: 100, AvgDegree: 3, Communities: 5, FeatDim: 7, Classes: 5, TrainFrac: 0.3, ValidFrac: 0.3, TestFrac: 0.4, Homophily: 1, DegreeExp: 2.01, FeatNoise: 0.5, FeatDType: "float16", Seed: -3, Name: "x"}, true},
		{"zero-nodes", Config{}, false},
		{"negative-nodes", Config{Nodes: -1}, false},
		{"too-many-nodes", Config{Nodes: MaxNodes + 1}, false},
		{"fewer-nodes-than-classes", Config{Nodes: 10}, false},
		{"small-ok", Config{Nodes: 10, Classes: 2, AvgDegree: 2}, true},
		{"degree>=nodes", Config{Nodes: 20, Classes: 2, AvgDegree: 20}, false},
		{"negative-degree", Config{Nodes: 100, AvgDegree: -1}, false},
		{"nan-degree", Config{Nodes: 100, AvgDegree: nan}, false},
		{"one-class", Config{Nodes: 100, Classes: 1}, false},
		{"communities<classes", Config{Nodes: 100, Classes: 8, Communities: 4}, false},
		{"communities>nodes", Config{Nodes: 100, Classes: 2, Communities: 101}, false},
		{"negative-featdim", Config{Nodes: 100, FeatDim: -1}, false},
		{"huge-featdim", Config{Nodes: 100, FeatDim: MaxFeatDim + 1}, false},
		{"homophily>1", Config{Nodes: 100, Homophily: 1.5}, false},
		{"homophily<0", Config{Nodes: 100, Homophily: -0.1}, false},
		{"gamma=2", Config{Nodes: 100, DegreeExp: 2}, false},
		{"gamma<2", Config{Nodes: 100, DegreeExp: 1.5}, false},
		{"gamma-inf", Config{Nodes: 100, DegreeExp: math.Inf(1)}, false},
		{"negative-noise", Config{Nodes: 100, FeatNoise: -1}, false},
		{"bad-dtype", Config{Nodes: 100, FeatDType: "float64"}, false},
		{"split>1", Config{Nodes: 100, TrainFrac: 0.8, TestFrac: 0.3}, false},
		{"negative-split", Config{Nodes: 100, TrainFrac: -0.1}, false},
		{"nan-split", Config{Nodes: 100, ValidFrac: nan}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		nodes       int64
		classes     int
		communities int
	}{
		{100, 0, 16},
		{20000, 0, 16},
		{1_000_000, 0, 1008},
		{2_000_000, 0, 2000},
		{50_000, 4, 52},
	} {
		c := Config{Nodes: tc.nodes, Classes: tc.classes}.WithDefaults()
		if c.Communities != tc.communities || c.Communities%c.Classes != 0 {
			t.Errorf("nodes %d classes %d: communities %d, want %d", tc.nodes, tc.classes, c.Communities, tc.communities)
		}
	}
	c := Config{Nodes: 10}.WithDefaults()
	if c.AvgDegree != DefaultAvgDegree || c.FeatDim != DefaultFeatDim || c.Homophily != DefaultHomophily ||
		c.DegreeExp != DefaultDegreeExp || c.FeatDType != "float32" || c.TrainFrac != DefaultTrainFrac ||
		math.Abs(c.FeatNoise-DefaultNoisePerSqrtDim*math.Sqrt(128)) > 1e-12 || c.Name == "" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestOptionsValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    *Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &Options{}, true},
		{"small-mem", &Options{MemBytes: 1024}, false},
		{"below-least-mem", &Options{MemBytes: MinMemBytes - 1}, false},
		{"negative-mem", &Options{MemBytes: -1}, false},
		{"negative-workers", &Options{Workers: -1}, false},
		{"tempdir-missing", &Options{TempDir: filepath.Join(t.TempDir(), "nope")}, false},
		{"tempdir-file", &Options{TempDir: file}, false},
		{"tempdir-ok", &Options{TempDir: t.TempDir(), Workers: 2, MemBytes: MinMemBytes}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("error %v does not wrap ErrInvalidOptions", err)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	cfg := Config{Nodes: 500, FeatDim: 4, Classes: 2}
	if _, err := Generate(dir, Config{}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid config: %v", err)
	}
	if _, err := Generate(dir, cfg, &Options{Workers: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("invalid options: %v", err)
	}
	if _, err := Generate(dir, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir, cfg, nil); !errors.Is(err, storage.ErrExists) {
		t.Errorf("second Generate without Force: %v, want storage.ErrExists", err)
	}
	cfg.Seed = 9
	if _, err := Generate(dir, cfg, &Options{Force: true, MemBytes: MinMemBytes}); err != nil {
		t.Errorf("Force: %v", err)
	}
	m, err := storage.LoadManifest(dir)
	if err != nil || m.Seed != 9 {
		t.Fatalf("after Force: %v, seed %v", err, m)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 8 {
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("dataset dir holds %v, want 7 arrays + manifest (no temp files)", names)
	}
}

// recorder is a progress.Reporter that remembers what it was told.
type recorder struct {
	mu    sync.Mutex
	tasks map[string]*recTask
}

type recTask struct {
	r           *recorder
	total, done int64
	finished    bool
}

func (r *recorder) Start(desc string, total int64, _ progress.Unit) progress.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &recTask{r: r, total: total}
	r.tasks[desc] = t
	return t
}

func (t *recTask) Add(n int64)     { t.r.mu.Lock(); t.done += n; t.r.mu.Unlock() }
func (t *recTask) Describe(string) {}
func (t *recTask) Done()           { t.r.mu.Lock(); t.finished = true; t.r.mu.Unlock() }

func TestProgress(t *testing.T) {
	r := &recorder{tasks: map[string]*recTask{}}
	gen(t, Config{Nodes: 3000, FeatDim: 4, Classes: 3}, &Options{Progress: r})
	for _, name := range []string{"edges", "features"} {
		task := r.tasks[name]
		if task == nil || !task.finished || task.done != task.total || task.total <= 0 {
			t.Errorf("task %q: %+v", name, task)
		}
	}
}

func TestPerm(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 15, 16, 17, 1000, 4097, 65535} {
		p := newPerm(n, 12345)
		seen := make([]bool, n)
		ident := 0
		for x := range n {
			y := p.at(x)
			if y >= n || seen[y] {
				t.Fatalf("n=%d: π(%d)=%d repeats or out of range", n, x, y)
			}
			seen[y] = true
			if p.inv(y) != x {
				t.Fatalf("n=%d: π⁻¹(π(%d)) = %d", n, x, p.inv(y))
			}
			if y == x {
				ident++
			}
		}
		if n >= 1000 && ident > int(n/50) {
			t.Errorf("n=%d: %d fixed points; not much of a shuffle", n, ident)
		}
	}
	p := newPerm(1<<40, 1)
	for x := uint64(1<<40 - 1000); x < 1<<40; x++ {
		if p.inv(p.at(x)) != x {
			t.Fatalf("large domain: round trip fails at %d", x)
		}
	}
}

func TestNormal(t *testing.T) {
	r := newRNG(1, 2, 3)
	var s, ss, s4 float64
	const n = 200000
	for range n {
		x := normal(r.next())
		s, ss, s4 = s+x, ss+x*x, s4+x*x*x*x
	}
	m, v := s/n, ss/n
	if math.Abs(m) > 0.01 || math.Abs(v-1) > 0.01 || math.Abs(s4/n-3) > 0.1 {
		t.Errorf("mean %.4f var %.4f fourth moment %.3f, want 0, 1, ~3", m, v, s4/n)
	}
}

func TestSampleRank(t *testing.T) {
	// The empirical rank distribution follows θ_k.
	m := newModel(Config{Nodes: 1000, Communities: 10, Classes: 2, AvgDegree: 10, DegreeExp: 2.5, FeatDim: 1, Homophily: 0.8})
	r := newRNG(5, 6, 7)
	const draws = 400000
	counts := make([]float64, 100)
	for range draws {
		counts[m.sampleRank(&r, 100, m.mass(100))]++
	}
	for _, k := range []uint64{0, 1, 10, 99} {
		want := draws * m.theta(k) * m.beta / m.mass(100)
		if math.Abs(counts[k]-want) > 5*math.Sqrt(want) {
			t.Errorf("rank %d drawn %v times, want %.0f", k, counts[k], want)
		}
	}
}

// sabotage removes a directory when the "edges" task starts, after the
// sorter has checked it, so that the first spill fails mid-generation.
type sabotage struct{ dir string }

func (s sabotage) Start(desc string, _ int64, _ progress.Unit) progress.Task {
	if desc == "edges" {
		os.RemoveAll(s.dir)
	}
	return progress.Discard.Start(desc, 0, progress.Items)
}

func TestGenerateFailsCleanly(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "sort")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := Generate(dir, Config{Nodes: 20000, FeatDim: 64}, &Options{TempDir: tmp, MemBytes: MinMemBytes, Progress: sabotage{tmp}})
	if err == nil {
		t.Fatal("Generate succeeded without its temp dir")
	}
	t.Logf("error (expected): %v", err)
	if _, err := storage.LoadManifest(dir); !errors.Is(err, storage.ErrNotDataset) {
		t.Errorf("after a failed Generate: %v, want ErrNotDataset", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

func TestEdgeCases(t *testing.T) {
	for _, cfg := range []Config{
		{Nodes: 100, Classes: 2, AvgDegree: 1e-6, FeatDim: 1},
		{Nodes: 2, Classes: 2, AvgDegree: 1, FeatDim: 1, Homophily: 1},
		{Nodes: 500, Classes: 2, Homophily: 1, DegreeExp: 100, FeatDim: 65, FeatDType: "float16", TrainFrac: 1},
	} {
		d, rep := gen(t, cfg, nil)
		if vr, err := storage.Validate(d.Dir(), nil); err != nil || !vr.OK() {
			t.Errorf("%+v: storage.Validate: %v %+v", cfg, err, vr)
		}
		t.Logf("%+v: %d edges", cfg, rep.Edges)
	}
}

// The budget is split as documented: every worker that runs has its
// chunks counted, the sorter gets the rest, and the parts add up to
// MemBytes; workers are cut only while their chunks take more than half
// of what the reserve leaves.
func TestFitWorkers(t *testing.T) {
	for _, tc := range []struct {
		mem       int64
		want, got int
	}{
		{MinMemBytes, 8, 1},
		{MinMemBytes, 1, 1},
		{48 << 20, 16, 1},
		{ReserveBytes + 2*pipelineBytes(2), 16, 2},
		{ReserveBytes + 2*pipelineBytes(2) - 1, 16, 1},
		{256 << 20, 2, 2},
		{256 << 20, 64, 27},
		{1 << 30, 64, 64},
	} {
		w := fitWorkers(tc.mem, tc.want)
		if w != tc.got {
			t.Errorf("fitWorkers(%d MiB, %d) = %d, want %d", tc.mem>>20, tc.want, w, tc.got)
		}
		if s := sortBytes(tc.mem, w); s < extsort.MinMemBytes || s+ReserveBytes+pipelineBytes(w) != tc.mem {
			t.Errorf("mem %d, %d workers: sort buffer %d does not complete the budget", tc.mem, w, s)
		}
	}
}
