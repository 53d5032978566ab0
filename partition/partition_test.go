package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// checkPartitioning verifies every invariant tying the output files to
// each other and to the dataset, and the balance caps.
func checkPartitioning(t *testing.T, dir string, g *graph, o *Options) Stats {
	t.Helper()
	p, err := Open(dir, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Verify(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	n := int64(len(g.adj))
	part := p.Part()
	if int64(len(part)) != n {
		t.Fatalf("part has %d entries, want %d", len(part), n)
	}
	seen := make([]bool, n)
	for q := range p.K() {
		for _, v := range p.Members(q) {
			if seen[v] {
				t.Fatalf("node %d listed twice", v)
			}
			seen[v] = true
		}
		adj := p.AdjacencyOf(q)
		var buf []int64
		for i, v := range adj.Nodes {
			buf = adj.AppendNeighbors(i, buf[:0])
			if fmt.Sprint(buf) != fmt.Sprint(g.adj[v]) && !(len(buf) == 0 && len(g.adj[v]) == 0) {
				t.Fatalf("part %d node %d: adjacency %v, want %v", q, v, buf, g.adj[v])
			}
			var cross int32
			for _, u := range g.adj[v] {
				if part[u] != part[v] {
					cross++
				}
			}
			if p.Cross()[v] != cross {
				t.Fatalf("node %d: cross %d, want %d", v, p.Cross()[v], cross)
			}
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("node %d unassigned", v)
		}
	}
	var ntrain int
	for q := range p.K() {
		ntrain += len(p.TrainMembers(q))
	}
	if ntrain != len(g.train) {
		t.Fatalf("%d training members, want %d", ntrain, len(g.train))
	}
	// Caps: the promise, ceil((1+ε)·n/k) nodes and ceil((1+ε)·t/k)
	// training nodes per final part, whatever the levels (it was the
	// two-level (1+ε)² bound before), counted from the files.
	if o.Method == Fennel || o.Method == FennelExact {
		c := o.withDefaults()
		k := float64(c.Parts)
		capN := math.Ceil((1 + c.Epsilon) * float64(n) / k)
		capT := math.Ceil((1 + c.Epsilon) * float64(len(g.train)) / k)
		for q := range p.K() {
			if float64(len(p.Members(q))) > capN || float64(len(p.TrainMembers(q))) > capT {
				t.Errorf("part %d: %d nodes, %d training nodes; caps %v, %v (k = %d x %d, eps %v)",
					q, len(p.Members(q)), len(p.TrainMembers(q)), capN, capT, c.FirstLevel, c.k2(), c.Epsilon)
			}
		}
	}
	return st
}

func TestProperties(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	for i := range 12 {
		n := 200 + r.IntN(1500)
		g, _ := planted(n, 2+r.IntN(20), 2+r.Float64()*12, r.Float64(), r.Float64()*0.5, r.Int64())
		dir := t.TempDir()
		d := g.write(t, dir)
		k := 1 + r.IntN(64)
		o := &Options{
			Method:     []Method{Fennel, FennelExact, Random}[i%3],
			Parts:      k,
			FirstLevel: randomDivisor(r, k),
			Passes:     1 + r.IntN(3),
			Order:      []string{OrderID, OrderRandom}[r.IntN(2)],
			Seed:       r.Int64(),
			Epsilon:    0.05 + r.Float64()*0.5,
			Workers:    1 + r.IntN(3),
			Name:       "p",
		}
		if r.IntN(4) == 0 {
			o.ParallelDegree = 1 + r.IntN(8) // exercise parallel frontier scoring
		}
		o.Refine = []int{-1, 1, 3}[r.IntN(3)]
		t.Run(fmt.Sprintf("%d-%s-n%d-k%d-k1%d-r%d", i, o.Method, n, k, o.FirstLevel, o.Refine), func(t *testing.T) {
			if _, err := Run(d, o); err != nil {
				t.Fatal(err)
			}
			checkPartitioning(t, dir, g, o)
		})
	}
}

func TestBloomMatchesExact(t *testing.T) {
	seed := testSeed(t)
	g, _ := planted(4000, 40, 12, 0.8, 0.2, seed)
	dir := t.TempDir()
	d := g.write(t, dir)
	cuts := map[Method]float64{}
	for _, m := range []Method{FennelExact, Fennel, Random} {
		st, err := Run(d, &Options{Method: m, Parts: 64, FirstLevel: 8, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		cuts[m] = st.EdgeCut
	}
	t.Logf("edge cut: exact %.4f bloom %.4f random %.4f", cuts[FennelExact], cuts[Fennel], cuts[Random])
	if math.Abs(cuts[Fennel]-cuts[FennelExact]) > 0.05 {
		t.Errorf("bloom cut %.4f differs from exact %.4f by more than 0.05", cuts[Fennel], cuts[FennelExact])
	}
	if cuts[Fennel] > 0.8*cuts[Random] {
		t.Errorf("bloom cut %.4f not clearly better than random %.4f", cuts[Fennel], cuts[Random])
	}
}

func TestDeterministic(t *testing.T) {
	seed := testSeed(t)
	g, _ := planted(3000, 30, 10, 0.7, 0.3, seed)
	dir := t.TempDir()
	d := g.write(t, dir)
	for _, m := range []Method{Fennel, FennelExact, Random} {
		for _, order := range []string{OrderID, OrderRandom} {
			var first []byte
			for i, workers := range []int{1, 2, 3, 2} {
				name := fmt.Sprintf("%s-%s-%d", m, order, i)
				_, err := Run(d, &Options{Method: m, Parts: 100, FirstLevel: 10, Order: order, Seed: seed,
					Workers: workers, Passes: 2, ParallelDegree: 5, Refine: 2, Name: name})
				if err != nil {
					t.Fatal(err)
				}
				b := readPart(t, dir, name)
				if first == nil {
					first = b
				} else if !bytes.Equal(first, b) {
					t.Fatalf("%s order=%s: part.npy differs with %d workers", m, order, workers)
				}
			}
		}
	}
}

func TestMetis(t *testing.T) {
	if _, err := exec.LookPath("gpmetis"); err != nil {
		t.Skip("gpmetis not on PATH")
	}
	g := cliques(4, 25)
	g.edge(0, 30)
	g.finish()
	dir := t.TempDir()
	d := g.write(t, dir)
	o := &Options{Method: Metis, Parts: 4}
	st, err := Run(d, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.CutEdges != 2 {
		t.Errorf("metis cut %d directed edges, want 2", st.CutEdges)
	}
	checkPartitioning(t, dir, g, o.withDefaultsPtr())
}

func (o *Options) withDefaultsPtr() *Options { c := o.withDefaults(); return &c }

func TestMetisMissing(t *testing.T) {
	if _, err := exec.LookPath("gpmetis"); err == nil {
		t.Setenv("PATH", t.TempDir())
	}
	g := cliques(2, 5)
	g.finish()
	d := g.write(t, t.TempDir())
	if _, err := Run(d, &Options{Method: Metis, Parts: 2}); !errors.Is(err, ErrNoMetis) {
		t.Fatalf("got %v, want ErrNoMetis", err)
	}
}

// TestMetisNoEdges: a graph without edges is refused before gpmetis runs
// (its own error was passed through raw: C11).
func TestMetisNoEdges(t *testing.T) {
	g := newGraph(10)
	g.finish()
	d := g.write(t, t.TempDir())
	if _, err := Run(d, &Options{Method: Metis, Parts: 2}); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "needs a graph with edges") {
		t.Fatalf("metis on 10 nodes and no edges: %v", err)
	}
}

func TestExistsForceAndOpenErrors(t *testing.T) {
	g := cliques(2, 10)
	g.finish()
	dir := t.TempDir()
	d := g.write(t, dir)
	if _, err := Open(dir, "fennel"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open before Run: %v", err)
	}
	o := &Options{Parts: 2}
	if _, err := Run(d, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(d, o); !errors.Is(err, ErrExists) {
		t.Fatalf("second Run: %v, want ErrExists", err)
	}
	o.Force = true
	if _, err := Run(d, o); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(Dir(dir, "fennel"), ManifestName)
	good, _ := os.ReadFile(mpath)
	// A truncated file is caught by the size check.
	ppath := filepath.Join(Dir(dir, "fennel"), FilePart)
	pb, _ := os.ReadFile(ppath)
	os.WriteFile(ppath, pb[:len(pb)-4], 0o644)
	if _, err := Open(dir, "fennel"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("truncated part.npy: %v", err)
	}
	// A flipped byte is caught by Open: the high byte of the last part id
	// by the range check, the low byte by the checksum.
	var ce *CorruptError
	for _, tc := range []struct {
		at   int
		want string
	}{{len(pb) - 1, "part.npy: element 19: part 16777"}, {len(pb) - 4, "but part.npy puts it in"}} {
		b := bytes.Clone(pb)
		b[tc.at] ^= 1
		os.WriteFile(ppath, b, 0o644)
		if _, err := Open(dir, "fennel"); !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("flipped byte %d: Open = %v, want %q", tc.at, err, tc.want)
		}
	}
	os.WriteFile(mpath, good[:len(good)/2], 0o644)
	if _, err := Open(dir, "fennel"); !errors.As(err, &ce) {
		t.Fatalf("truncated manifest: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &Options{}, true},
		{"single level", &Options{Parts: 8, FirstLevel: 8}, true},
		{"bad method", &Options{Method: "kl"}, false},
		{"k1 > k", &Options{Parts: 4, FirstLevel: 5}, false},
		{"k1 does not divide k", &Options{Parts: 200, FirstLevel: 15}, false},
		{"gamma", &Options{Gamma: 0.5}, false},
		{"epsilon", &Options{Epsilon: -1}, false},
		{"epsilon at most", &Options{Epsilon: MaxEpsilon}, true},
		{"epsilon huge", &Options{Epsilon: 1e9}, false},
		{"epsilon NaN", &Options{Epsilon: math.NaN()}, false},
		{"fp", &Options{FalsePositive: 1.5}, false},
		{"lambda", &Options{Lambda: -1}, false},
		{"order", &Options{Order: "dfs"}, false},
		{"order bfs", &Options{Order: OrderBFS}, true},
		{"name", &Options{Name: "../x"}, false},
		{"passes", &Options{Passes: -1}, false},
		{"refine none", &Options{Refine: -1}, true},
		{"refine", &Options{Refine: -2}, false},
		{"refine many", &Options{Refine: 101}, false},
		{"parts", &Options{Parts: -3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrOptions) {
				t.Fatalf("error %v does not wrap ErrOptions", err)
			}
		})
	}
}

func TestTourney(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	for range 50 {
		k := 1 + r.IntN(40)
		tr := newTourney(k)
		vals := make([]float64, k)
		for range 200 {
			i := r.IntN(k)
			v := float64(r.IntN(5))
			if r.IntN(6) == 0 {
				v = math.Inf(1)
			}
			vals[i] = v
			tr.set(i, v)
			want := -1
			for j, x := range vals {
				if !math.IsInf(x, 1) && (want < 0 || x < vals[want]) {
					want = j
				}
			}
			if got := tr.min(); got != want {
				t.Fatalf("min = %d, want %d (vals %v)", got, want, vals)
			}
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":"ssdgnn-partitions","version":1,"k":2,"num_nodes":3,"files":[]}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"k":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b, "manifest.json")
		if err == nil && m == nil {
			t.Fatal("nil manifest without error")
		}
	})
}

// randomDivisor returns a uniformly chosen divisor of k.
func randomDivisor(r interface{ IntN(int) int }, k int) int {
	var ds []int
	for d := 1; d <= k; d++ {
		if k%d == 0 {
			ds = append(ds, d)
		}
	}
	return ds[r.IntN(len(ds))]
}

func TestDefaultFirstLevel(t *testing.T) {
	for _, c := range []struct{ k, want int }{{10000, 100}, {200, 10}, {100, 10}, {97, 1}, {1, 1}, {12, 3}, {1024, 32}} {
		if got := defaultFirstLevel(c.k); got != c.want {
			t.Errorf("defaultFirstLevel(%d) = %d, want %d", c.k, got, c.want)
		}
	}
}

// TestSweepMatchesPerPart checks that OrderID's one-sweep second level
// (level2Sweep) assigns every node as running each first-level part's
// stream alone does. The Bloom filters' false-positive rate is high, so
// that their counts are far from exact and a stream that saw another
// part's nodes or filters would place differently.
func TestSweepMatchesPerPart(t *testing.T) {
	seed := testSeed(t)
	g, _ := planted(4000, 40, 10, 0.7, 0.3, seed)
	dir := t.TempDir()
	d := g.write(t, dir)
	for _, m := range []Method{Fennel, FennelExact} {
		for _, passes := range []int{1, 3} {
			base := fmt.Sprintf("%s-p%d", m, passes)
			o := Options{Method: m, Parts: 100, FirstLevel: 10, Order: OrderID, Seed: seed, Passes: passes,
				Refine: -1, Workers: 2, Name: base + "-perpart", perPart: true, FalsePositive: 0.2}
			if _, err := Run(d, &o); err != nil {
				t.Fatal(err)
			}
			want := readPart(t, dir, o.Name)
			for _, workers := range []int{1, 3} {
				o := Options{Method: m, Parts: 100, FirstLevel: 10, Order: OrderID, Seed: seed, Passes: passes,
					Refine: -1, Workers: workers, Name: fmt.Sprintf("%s-sweep%d", base, workers), FalsePositive: 0.2}
				if _, err := Run(d, &o); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(readPart(t, dir, o.Name), want) {
					t.Errorf("%s passes=%d workers=%d: the sweep's part.npy differs from part by part", m, passes, workers)
				}
			}
		}
	}
}

// TestReadAheadSame checks that gathering level 1's neighbours on a
// second goroutine (runAhead) assigns every node as gathering on the
// stream's own does, for both methods, one and three passes and every
// stream order, on a graph of many chunks with two hubs too big to be
// gathered ahead at Fennel's h (gathered by the stream itself).
func TestReadAheadSame(t *testing.T) {
	seed := testSeed(t)
	edges := aheadEdges(defaultHashes())
	n := 3 * edges
	g, _ := planted(n, 60, 20, 0.7, 0.2, seed) // chunks end on edges and on nodes
	for _, hub := range []int64{5, int64(n / 2)} {
		for u := range int64(n) {
			if u%2 == 0 {
				g.edge(hub, u)
			}
		}
	}
	g.finish()
	if deg := len(g.adj[5]); deg <= edges {
		t.Fatalf("hub degree %d, want over %d", deg, edges)
	}
	dir := t.TempDir()
	d := g.write(t, dir)
	for _, m := range []Method{Fennel, FennelExact} {
		for _, passes := range []int{1, 3} {
			for _, order := range []string{OrderBFS, OrderID, OrderRandom} {
				name := fmt.Sprintf("%s-p%d-%s", m, passes, order)
				var parts [2][]byte
				for i, noAhead := range []bool{true, false} {
					o := Options{Method: m, Parts: 40, FirstLevel: 8, Order: order, Seed: seed, Passes: passes,
						Refine: -1, Workers: 2, Name: fmt.Sprintf("%s-%v", name, noAhead), noReadAhead: noAhead}
					if _, err := Run(d, &o); err != nil {
						t.Fatal(err)
					}
					parts[i] = readPart(t, dir, o.Name)
				}
				if !bytes.Equal(parts[0], parts[1]) {
					t.Errorf("%s: part.npy with read-ahead differs from without", name)
				}
			}
		}
	}
}

// TestCountSweeps checks intraEdges and crossCounts, which share one
// per-node count (sameNeighbors), against counting by hand on a graph
// with self loops, for several worker counts.
func TestCountSweeps(t *testing.T) {
	seed := testSeed(t)
	g, _ := planted(3000, 30, 8, 0.6, 0.2, seed)
	for v := 0; v < len(g.adj); v += 7 {
		g.adj[v] = append(g.adj[v], int64(v)) // a self loop
	}
	g.finish()
	d := g.write(t, t.TempDir())
	r := rand.New(rand.NewPCG(uint64(seed), 11))
	const k = 13
	part := make([]int32, len(g.adj))
	for v := range part {
		part[v] = int32(r.IntN(k))
	}
	wantIntra := make([]float64, k)
	wantCross := make([]int32, len(g.adj))
	var wantCut int64
	for v, nb := range g.adj {
		for _, u := range nb {
			switch {
			case part[u] != part[v]:
				wantCross[v]++
				wantCut++
			case u != int64(v):
				wantIntra[part[v]] += 0.5
			}
		}
	}
	for _, workers := range []int{1, 2, 5} {
		if got := intraEdges(d, part, k, workers); !slices.Equal(got, wantIntra) {
			t.Errorf("workers %d: intraEdges %v, want %v", workers, got, wantIntra)
		}
		cross, cut := crossCounts(d, part, workers)
		if !slices.Equal(cross, wantCross) || cut != wantCut {
			t.Errorf("workers %d: crossCounts cut %d, want %d (per-node counts equal: %v)", workers, cut, wantCut, slices.Equal(cross, wantCross))
		}
	}
}

// TestReadAheadBounded checks the read-ahead's memory where it is
// allocated: every chunk it sends keeps the capacities it was allocated
// with (no append grew a buffer), holds every node of the stream once in
// order, with hubs over a chunk's edge budget left to the stream, and
// the chunks' bytes are readAheadBytes.
func TestReadAheadBounded(t *testing.T) {
	seed := testSeed(t)
	o := (&Options{Parts: 8, Seed: seed}).withDefaults()
	hk := defaultHashes()
	edges := aheadEdges(hk)
	n := 3 * edges
	g, _ := planted(n, 60, 40, 0.7, 0.2, seed) // 1024 nodes hold more than a chunk's edges
	for u := range int64(n) {
		if u%2 == 0 {
			g.edge(7, u)
		}
	}
	g.finish()
	d := g.write(t, t.TempDir())
	s := newStreamer(d, &o, levelSpec{k: 8, n: int64(n), m: float64(d.NumEdges()) / 2, out: make([]int32, n), filter: true},
		func(int64) bool { return false })
	if s.hashes() != hk {
		t.Fatalf("streamer h %d, default %d", s.hashes(), hk)
	}
	full := make(chan *aheadChunk, aheadChunks)
	free := make(chan *aheadChunk, aheadChunks+2)
	chunkBytes := func(c *aheadChunk) int64 {
		return int64(cap(c.items))*int64(unsafe.Sizeof(aheadNode{})) + 8*int64(cap(c.nbrs)+cap(c.locs)+cap(c.own))
	}
	var bytes int64
	for range aheadChunks + 2 {
		c := newAheadChunk(hk)
		bytes += chunkBytes(c)
		free <- c
	}
	if want := readAheadBytes(hk); bytes != want {
		t.Fatalf("chunks allocate %d bytes, readAheadBytes says %d", bytes, want)
	}
	for _, h := range []uint{0, 1, 10} { // FennelExact, and other rates
		if b, want := (aheadChunks+2)*chunkBytes(newAheadChunk(h)), readAheadBytes(h); b != want {
			t.Errorf("h=%d: chunks allocate %d bytes, readAheadBytes says %d", h, b, want)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.readAhead(2, full, free, stop)
	}()
	defer func() { // before the dataset is unmapped
		close(stop)
		wg.Wait()
	}()
	next, pass, bigs := 0, 0, 0
	for c := range full {
		if cap(c.nbrs) != 2*edges || cap(c.locs) != 2*edges*int(hk) || cap(c.items) != aheadNodes || cap(c.own) != aheadNodes*int(hk) {
			t.Fatalf("a chunk's buffers grew: caps %d %d %d %d", cap(c.nbrs), cap(c.locs), cap(c.items), cap(c.own))
		}
		if c.pass != pass {
			if next != n {
				t.Fatalf("pass %d ended after %d of %d nodes", pass, next, n)
			}
			pass, next = c.pass, 0
		}
		for _, it := range c.items {
			if it.v != int64(next) {
				t.Fatalf("pass %d: node %d where %d was due", pass, it.v, next)
			}
			if it.big != (it.v == 7) {
				t.Fatalf("node %d (degree %d): big = %v", it.v, len(g.adj[it.v]), it.big)
			}
			if it.big {
				bigs++
			}
			next++
		}
		free <- c
	}
	if pass != 1 || next != n || bigs != 2 {
		t.Fatalf("ended in pass %d after %d of %d nodes, %d big visits; want pass 1, all nodes, 2", pass, next, n, bigs)
	}
}

// Names lists the committed partitionings only: a directory without a
// manifest (an interrupted run) is not one.
func TestNames(t *testing.T) {
	g := cliques(2, 10)
	g.finish()
	dir := t.TempDir()
	d := g.write(t, dir)
	if names, err := Names(dir); err != nil || len(names) != 0 {
		t.Fatalf("before any: %q, %v", names, err)
	}
	for _, name := range []string{"b", "a"} {
		if _, err := Run(d, &Options{Parts: 2, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(Dir(dir, "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	if names, err := Names(dir); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Names = %q, %v; want [a b]", names, err)
	}
}
