package planner

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// mkBatch builds a batch from per-block adjacency over local ids. nodes
// lists global ids in local order; numDst[l] and edges[l][u] describe
// block l.
func mkBatch(nodes []int64, numDst []int, edges []map[int][]int32) *sample.Batch {
	L := len(numDst)
	b := &sample.Batch{Blocks: make([]sample.Block, L)}
	for l := 0; l < L; l++ {
		blk := &b.Blocks[l]
		blk.NumDst = numDst[l]
		srcLen := len(nodes)
		if l > 0 {
			srcLen = numDst[l-1]
		}
		blk.Src = nodes[:srcLen]
		blk.Indptr = make([]int64, numDst[l]+1)
		for u := 0; u < numDst[l]; u++ {
			blk.Indices = append(blk.Indices, edges[l][u]...)
			blk.Indptr[u+1] = int64(len(blk.Indices))
		}
	}
	return b
}

func TestAnalyzerHand(t *testing.T) {
	// Two layers: target 0; hop 1: 1, 2; hop 2: 3, 4, 5 (global id = local id + 10).
	two := mkBatch([]int64{10, 11, 12, 13, 14, 15}, []int{3, 1},
		[]map[int][]int32{{0: {1}, 1: {3, 4}, 2: {4, 5}}, {0: {1, 2}}})
	// Three layers: hop 1: 1, 2; hop 2: 3, 4; hop 3: 5, 6.
	three := mkBatch([]int64{10, 11, 12, 13, 14, 15, 16}, []int{5, 3, 1},
		[]map[int][]int32{{1: {6}, 3: {5}, 4: {5}}, {1: {3}, 2: {4}}, {0: {1, 2}}})
	tests := []struct {
		name      string
		b         *sample.Batch
		cached    map[int64]bool
		feat      []uint32
		hs, hg, n []uint32 // indexed by global id − 10
		sampled   int64
	}{
		{"two-layer", two, nil, []uint32{1, 1, 1, 1, 1, 1}, []uint32{0, 2, 2, 0, 0, 0}, []uint32{0, 1, 1, 0, 0, 0}, []uint32{1, 1, 1, 0, 0, 0}, 7},
		{"two-layer, 11 cached", two, map[int64]bool{11: true}, []uint32{1, 1, 1, 1, 1, 1}, []uint32{0, 0, 2, 0, 0, 0}, []uint32{0, 1, 1, 0, 0, 0}, []uint32{1, 1, 1, 0, 0, 0}, 7},
		{"three-layer", three, nil, []uint32{1, 1, 1, 1, 1, 1, 1}, []uint32{0, 2, 2, 0, 0, 0, 0}, []uint32{0, 2, 1, 0, 0, 0, 0}, []uint32{1, 1, 1, 1, 1, 0, 0}, 7},
		// With 13's list cached, the edge 13→15 is free: 11's subtree is 1 (11→13) + 0.
		{"three-layer, 13 cached", three, map[int64]bool{13: true}, []uint32{1, 1, 1, 1, 1, 1, 1}, []uint32{0, 1, 2, 0, 0, 0, 0}, []uint32{0, 2, 1, 0, 0, 0, 0}, []uint32{1, 1, 1, 1, 1, 0, 0}, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounters(20)
			a := &analyzer{global: func(v int64) bool { return tc.cached[v] }}
			tot := a.add(tc.b, c)
			if tot.sampled != tc.sampled || tot.gathered != int64(len(tc.feat)) {
				t.Errorf("totals %+v", tot)
			}
			k := len(tc.feat)
			for name, p := range map[string][2][]uint32{"feat": {c.feat[10 : 10+k], tc.feat}, "hist_sample": {c.histSample[10 : 10+k], tc.hs},
				"hist_gather": {c.histGather[10 : 10+k], tc.hg}, "nbr": {c.nbr[10 : 10+k], tc.n}} {
				if !slices.Equal(p[0], p[1]) {
					t.Errorf("%s = %v, want %v", name, p[0], p[1])
				}
			}
		})
	}
}

func TestAnalyzerDynamic(t *testing.T) {
	two := mkBatch([]int64{10, 11, 12, 13, 14, 15}, []int{3, 1},
		[]map[int][]int32{{0: {1}, 1: {3, 4}, 2: {4, 5}}, {0: {1, 2}}})
	c := newCounters(20)
	a := &analyzer{dynamic: func(v int64) bool { return v == 12 }}
	a.add(two, c)
	if got := c.histSample[10:13]; !slices.Equal(got, []uint32{0, 2, 0}) {
		t.Errorf("hist_sample %v", got)
	}
	if got := c.nbr[10:13]; !slices.Equal(got, []uint32{1, 1, 0}) {
		t.Errorf("nbr %v", got)
	}
}

func handProfile(feat, hs, hg []uint32, beta float64) *Profile {
	n := int64(len(feat))
	return &Profile{Meta: Meta{Format: "ssdgnn-profile", Version: 1, Name: "t", NumNodes: n, FeatRowBytes: 10, IDBytes: 4,
		Beta: beta, PresampleEpochs: 1}, Feat: feat, HistSample: hs, HistGather: hg, Nbr: make([]uint32, n)}
}

func TestPlanHand(t *testing.T) {
	// N = 4, rows of 10 B, H = 1 (21 B per embedding slot: 4 B of
	// embedding, 8 B of node id, 1 B of state, 8 B of iteration), β = 0.5:
	// hist score = 0.5·[0 2 0 0] + [1 0 4 0] = [1 1 4 0]. Tables 32 B,
	// R = 81 − 32 = 49.
	p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	res, err := Plan(p, &PlanOptions{MemBytes: 81, Hidden: 1, Step: 0.5, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	// α=0: 0 rows, ⌊49/21⌋ = 2 embeddings → 4+1 = 5.
	// α=½: ⌊24/10⌋ = 2 rows → 5+3, ⌊25/21⌋ = 1 embedding → 4: 12.
	// α=1: 4 rows → 9, no embeddings: 9.
	if got := benefits(res); !slices.Equal(got, []float64{5, 12, 9}) || res.Alpha != 0.5 || res.Feature.Entries != 2 || res.History.Entries != 1 {
		t.Fatalf("curve %v, α %v, feature %+v, history %+v", benefits(res), res.Alpha, res.Feature, res.History)
	}
	if res.Predicted.FeatRows != 8 || res.Predicted.HistGatherRows != 4 || res.Predicted.HistSampledNeighbors != 0 ||
		res.Predicted.FeatureBytesSaved != 120 {
		t.Errorf("predicted %+v", res.Predicted)
	}
	if res.Memory.GatherPhaseBytes != 16+20+16+21 {
		t.Errorf("memory %+v", res.Memory)
	}
}

// benefits is res's curve: Eq. 5 at every α step.
func benefits(res *PlanResult) []float64 {
	var b []float64
	for _, c := range res.Curve {
		b = append(b, c.Benefit)
	}
	return b
}

// brute evaluates Eq. 5 directly at every α step: the feature cache
// holds the nodes of largest Feat (ties towards the smaller id) and is
// worth their held-out counts (Feat without them), times the share of the
// epoch's rows the history cache's nodes leave; the history cache holds
// the nodes of largest score.
func brute(p *Profile, o *PlanOptions) (bestAlpha, bestBenefit float64) {
	n := p.Meta.NumNodes
	steps := int(math.Round(1 / o.Step))
	r := o.MemBytes - 8*n
	order := func(score func(i int) float64) []int {
		var idx []int
		for i := range int(n) {
			if score(i) > 0 {
				idx = append(idx, i)
			}
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(score(b), score(a)) })
		return idx
	}
	sumFirst := func(idx []int, k int64, x func(i int) float64) float64 {
		var t float64
		for _, i := range idx[:min(k, int64(len(idx)))] {
			t += x(i)
		}
		return t
	}
	hits := func(i int) float64 { return float64(p.Feat[i]) }
	if p.FeatHeldOut != nil {
		hits = func(i int) float64 { return float64(p.FeatHeldOut[i]) }
	}
	histScore := func(i int) float64 { return p.Meta.Beta*float64(p.HistSample[i]) + float64(p.HistGather[i]) }
	featOrder := order(func(i int) float64 { return float64(p.Feat[i]) })
	histOrder := order(func(i int) float64 { return float64(float32(histScore(i))) })
	bestBenefit = -1
	for i := 0; i <= steps; i++ {
		fd := int64(math.Floor(float64(r) * float64(i) / float64(steps)))
		// The history cache's share beyond its candidates goes to the
		// feature cache.
		kh := min(histcache.CapacityFor(4*n+r-fd, n, o.Hidden), int64(len(histOrder)))
		fd += 4*n + r - fd - histcache.BytesFor(n, kh, o.Hidden)
		kf := min(featurecache.CapacityFor(4*n+fd, p.Meta.FeatRowBytes, n), int64(len(featOrder)))
		keep := 1.0
		if g := p.Meta.GatheredRows; g > 0 {
			keep = max(1-sumFirst(histOrder, kh, func(i int) float64 { return float64(p.HistGather[i]) })/float64(g), 0)
		}
		b := sumFirst(featOrder, kf, hits)*keep + sumFirst(histOrder, kh, histScore)
		if b > bestBenefit {
			bestAlpha, bestBenefit = float64(i)/float64(steps), b
		}
	}
	return
}

func randProfile(r *rand.Rand, n int) *Profile {
	a := func(max uint32) []uint32 {
		x := make([]uint32, n)
		for i := range x {
			if r.IntN(3) > 0 {
				x[i] = uint32(r.IntN(int(max)))
			}
		}
		return x
	}
	p := handProfile(a(100), a(50), a(30), []float64{0.25, 0.5, 1, 2, 4}[r.IntN(5)])
	p.Meta.FeatRowBytes = int64(4 * (1 + r.IntN(64)))
	p.Nbr = a(20)
	if r.IntN(2) == 0 {
		p.FeatHeldOut, p.Meta.HeldOutEpoch = a(100), 1
		p.Meta.GatheredRows = int64(sum(p.Feat)) + r.Int64N(int64(sum(p.HistGather))+1)
	}
	return p
}

func TestPlanMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(60)
		p := randProfile(r, n)
		o := &PlanOptions{MemBytes: 8*int64(n) + r.Int64N(int64(n)*300+1), Hidden: 1 + r.IntN(16), Decoupled: true}
		res, err := Plan(p, o)
		if err != nil {
			t.Fatal(err)
		}
		o.Step = DefaultStep
		wa, wb := brute(p, o)
		if res.Alpha != wa || res.Predicted.Benefit != wb {
			t.Fatalf("trial %d (n %d, mem %d, H %d): α %v benefit %v, brute force α %v benefit %v", trial, n, o.MemBytes, o.Hidden, res.Alpha, res.Predicted.Benefit, wa, wb)
		}
		// The reason's parts add up to the benefit it names.
		if bp := res.Predicted.BenefitParts; !near(bp[0]+bp[1]+bp[2], res.Predicted.Benefit) {
			t.Fatalf("trial %d: benefit parts %v add up to %v, benefit %v", trial, bp, bp[0]+bp[1]+bp[2], res.Predicted.Benefit)
		}
	}
}

func TestPlanNeverExceedsBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 2))
	for trial := 0; trial < 300; trial++ {
		n := 1 + r.IntN(2000)
		p := randProfile(r, n)
		indptr := make([]int64, n+1)
		for v := 0; v < n; v++ {
			indptr[v+1] = indptr[v] + int64(r.IntN(30))
		}
		o := &PlanOptions{MemBytes: 1 + r.Int64N(int64(n)*int64(200+r.IntN(2000))), Hidden: r.IntN(300) - 10,
			Decoupled: r.IntN(2) == 0, Indptr: indptr, NbrStep: 0.1}
		if r.IntN(2) == 0 {
			o.FeatRowBytes = int64(1 + r.IntN(5000))
		}
		res, err := Plan(p, o)
		if errors.Is(err, ErrBudget) {
			if o.MemBytes >= 8*int64(n) {
				t.Fatalf("trial %d: ErrBudget with %d bytes for %d nodes", trial, o.MemBytes, n)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, h, nb := res.Feature, res.History, res.Neighbor
		total := f.Bytes() + h.Bytes()
		if !o.Decoupled {
			total += nb.Bytes()
		}
		if total > o.MemBytes || nb.Bytes() > o.MemBytes || res.Memory.GatherPhaseBytes != total {
			t.Fatalf("trial %d: %d bytes (neighbour %d) of %d: %+v", trial, total, nb.Bytes(), o.MemBytes, res)
		}
		rb := res.FeatRowBytes
		if featurecache.BytesFor(f.Entries, rb, int64(n)) != f.Bytes() || featurecache.CapacityFor(f.BudgetBytes, rb, int64(n)) != f.Entries {
			t.Fatalf("trial %d: feature split %+v disagrees with featurecache", trial, f)
		}
		if o.Hidden > 0 && (histcache.BytesFor(int64(n), h.Entries, o.Hidden) != h.Bytes() || histcache.CapacityFor(h.BudgetBytes, int64(n), o.Hidden) != h.Entries) {
			t.Fatalf("trial %d: history split %+v disagrees with histcache", trial, h)
		}
		var sum int64
		for _, it := range res.Memory.Items {
			sum += it.Bytes
		}
		if o.Decoupled {
			sum -= nb.Bytes()
		}
		if sum != total {
			t.Fatalf("trial %d: memory items sum to %d, want %d", trial, sum, total)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	p := handProfile([]uint32{1, 2, 3, 4}, make([]uint32, 4), make([]uint32, 4), 1)
	if _, err := Plan(p, &PlanOptions{MemBytes: 31, Decoupled: true}); !errors.Is(err, ErrBudget) {
		t.Errorf("31 bytes for 4 nodes: %v", err)
	}
	if _, err := Plan(p, &PlanOptions{MemBytes: 32, Decoupled: true}); err != nil {
		t.Errorf("exactly the tables: %v", err)
	}
	if _, err := Plan(p, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("nil options: %v", err)
	}
	if _, err := Plan(p, &PlanOptions{MemBytes: 100}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("not decoupled without Indptr: %v", err)
	}
	if _, err := Plan(p, &PlanOptions{MemBytes: 100, Decoupled: true, NumNodes: 5}); !errors.Is(err, ErrMismatch) {
		t.Errorf("wrong N: %v", err)
	}
}

// testDataset generates a small synthetic dataset once per test.
func testDataset(t testing.TB) *storage.Dataset {
	return storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 16, Classes: 4, Seed: 5, TrainFrac: 0.2, ValidFrac: 0.05, TestFrac: 0.05},
		&synth.Options{Workers: 2})
}

func memParts(t testing.TB, d *storage.Dataset, k int) *sample.MemPartitions {
	part := make([]int32, d.NumNodes())
	for v := range part {
		part[v] = int32(v * k / len(part)) // synth communities are contiguous id ranges
	}
	mp, err := sample.NewMemPartitions(d, k, part)
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

// stripTiming drops what differs between two runs of one profile: the
// timings (and Beta, which the timings give), the files Save fills in and
// the run's id.
func stripTiming(m Meta) Meta {
	m.SampleSeconds, m.GatherSeconds, m.Beta, m.Files, m.RunID = 0, 0, 0, nil, ""
	return m
}

func TestProfileDeterministicAndRoundTrip(t *testing.T) {
	d := testDataset(t)
	mp := memParts(t, d, 30)
	nc, err := neighborcache.Build(d, &neighborcache.Options{Budget: 64 << 10, Policy: neighborcache.PolicyCross, Cross: mp.Cross()})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []sample.Mode{sample.ModeRandom, sample.ModePartition} {
		t.Run(string(mode), func(t *testing.T) {
			o := &ProfileOptions{Name: "p-" + string(mode), Fanouts: []int{5, 5, 5}, BatchSize: 64, Mode: mode, PartsPerBatch: 4,
				Seed: 9, PresampleEpochs: 2, NeighborCache: nc, Workers: 2}
			p1, err := RunProfile(context.Background(), d, mp, o)
			if err != nil {
				t.Fatal(err)
			}
			o.Workers = 1
			p2, err := RunProfile(context.Background(), d, mp, o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stripTiming(p1.Meta), stripTiming(p2.Meta)) {
				t.Fatalf("meta differs:\n%+v\n%+v", stripTiming(p1.Meta), stripTiming(p2.Meta))
			}
			for i, a := range p1.arrays() {
				if !slices.Equal(*a.a, *p2.arrays()[i].a) {
					t.Fatalf("%s differs between runs", a.name)
				}
			}
			m := p1.Meta
			if m.Batches == 0 || m.SampledNeighbors == 0 || m.GatheredRows == 0 || !(m.Beta > 0) ||
				m.SumFeat < uint64(m.GatheredRows) || m.SumHistSample == 0 || m.SumHistGather == 0 || m.SumNbr == 0 {
				t.Fatalf("implausible profile: %+v", m)
			}
			if m.Lookups.Global.Hits == 0 {
				t.Errorf("neighbour cache never hit: %+v", m.Lookups)
			}
			if mode == sample.ModePartition && m.Lookups.Dynamic.Hits == 0 {
				t.Errorf("dynamic cache never hit: %+v", m.Lookups)
			}
			if (mode == sample.ModePartition) != (m.MaxDynamicBytes > 0) {
				t.Errorf("%s: largest dynamic cache %d bytes", mode, m.MaxDynamicBytes)
			}

			dir := t.TempDir()
			if err := p1.Save(dir); err != nil {
				t.Fatal(err)
			}
			q, err := LoadProfile(dir, o.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(q, p1) {
				t.Fatalf("round trip differs:\n%+v\n%+v", q.Meta, p1.Meta)
			}
			res, err := Plan(q, &PlanOptions{MemBytes: 200 << 10, Hidden: 16, Indptr: d.Indptr()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Memory.GatherPhaseBytes > 200<<10 {
				t.Fatalf("plan over budget: %+v", res.Memory)
			}
			// Damage one array byte: LoadProfile must name the file.
			path := filepath.Join(ProfilePath(dir, o.Name), FileSavedIOHistGather)
			raw, _ := os.ReadFile(path)
			raw[len(raw)-1] ^= 0xff
			os.WriteFile(path, raw, 0o644)
			var ce *CorruptError
			if _, err := LoadProfile(dir, o.Name); !errors.As(err, &ce) || ce.File != path {
				t.Fatalf("damaged profile: %v", err)
			}
			if _, err := LoadProfile(dir, "absent"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("absent profile: %v", err)
			}
		})
	}
}

func TestProfileSummaryAndPlot(t *testing.T) {
	p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	if err := WriteProfileSummary(&discard{}, p); err != nil {
		t.Fatal(err)
	}
	res, err := Plan(p, &PlanOptions{MemBytes: 81, Hidden: 1, Step: 0.5, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePlan(&discard{}, res); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.png")
	if err := PlotPlan(res, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
	// The axis names the benefit's unit as the why line does; it said
	// "feature rows saved / epoch" when the plan's unit was device time.
	pp, err := planPlot(res)
	if err != nil {
		t.Fatal(err)
	}
	if unit := benefitUnit(res.Reads != nil); !strings.Contains(pp.Y.Label.Text, unit) || !strings.Contains(res.Reason, unit) {
		t.Errorf("plot axis %q and why line %q do not both name the unit %q", pp.Y.Label.Text, res.Reason, unit)
	}
	// The plan of TestPlanHand predicts 8 feature rows.
	c := Compare(res, Measured{FeatRows: 7, FeatureBytesSaved: 70}, Measured{FeatRows: 9, FeatureBytesSaved: 90})
	if c.Epochs != 2 || c.Rows[0].Measured != 8 || c.Rows[0].Ratio != 1 {
		t.Fatalf("compare %+v", c)
	}
	if err := WriteComparison(&discard{}, c); err != nil {
		t.Fatal(err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestBenefitPartsAddUp: the why line's parts add up to the benefit with
// the neighbour cache in the split and decoupled from it (where it is
// fitted apart and not part of the benefit).
func TestBenefitPartsAddUp(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	withNbr := 0
	defer func() {
		if withNbr == 0 {
			t.Errorf("no trial planned a neighbour cache into the benefit: the test checks nothing of its part")
		}
	}()
	for trial := 0; trial < 100; trial++ {
		n := 1 + r.IntN(60)
		p := randProfile(r, n)
		indptr := make([]int64, n+1)
		for v := range n {
			indptr[v+1] = indptr[v] + int64(r.IntN(8))
		}
		for _, dec := range []bool{false, true} {
			o := &PlanOptions{MemBytes: 12*int64(n) + r.Int64N(int64(n)*300+1), Hidden: 1 + r.IntN(16), Decoupled: dec, Indptr: indptr}
			res, err := Plan(p, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Predicted.BenefitParts[2] > 0 {
				withNbr++
			}
			if bp := res.Predicted.BenefitParts; !near(bp[0]+bp[1]+bp[2], res.Predicted.Benefit) {
				t.Fatalf("trial %d, decoupled %v: parts %v add up to %v, benefit %v", trial, dec, bp, bp[0]+bp[1]+bp[2], res.Predicted.Benefit)
			}
		}
	}
}

// TestWritePlanSaysWhereTheRestWent: with a budget above what the caches
// can use, α is only where Eq. 5's search started (the history cache's
// leftover goes to the feature cache) and not the feature cache's share:
// the line says every cache holds all its candidates and how much is
// unused (before: "α 0.00 (feature cache share ...)" above a feature
// cache of 24.6 MiB and a history cache of 3.0 MiB; sweep 28, P11). A
// budget the caches use says nothing more.
func TestWritePlanSaysWhereTheRestWent(t *testing.T) {
	p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	for _, c := range []struct {
		mem    int64
		unused bool
	}{{1 << 20, true}, {81, false}} {
		res, err := Plan(p, &PlanOptions{MemBytes: c.mem, Hidden: 1, Decoupled: true})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WritePlan(&b, res); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "every cache holds all its candidates"); got != c.unused {
			t.Errorf("budget %d (caches use %d): said every cache is full %v, want %v:\n%s", c.mem, res.Memory.GatherPhaseBytes, got, c.unused, b.String())
		}
	}
}
