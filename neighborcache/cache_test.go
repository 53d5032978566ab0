package neighborcache_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// writeGraph writes a random symmetric-ish graph with n nodes.
func writeGraph(t *testing.T, n int, r *rand.Rand) *storage.Dataset {
	t.Helper()
	adj := make([][]int64, n)
	for v := range adj {
		deg := r.IntN(12)
		if r.IntN(10) == 0 {
			deg = r.IntN(n)
		}
		set := map[int64]bool{}
		for len(set) < deg {
			set[int64(r.IntN(n))] = true
		}
		for u := range set {
			adj[v] = append(adj[v], u)
		}
	}
	return storagetest.Write(t, t.TempDir(), storagetest.Graph{Name: "t", Adj: adj})
}

func TestBudgetAndExactLists(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	d := writeGraph(t, 1500, r)
	n := d.NumNodes()
	cross := make([]int32, n)
	for v := range cross {
		cross[v] = int32(r.IntN(int(d.Degree(int64(v))) + 1))
	}
	var total int64
	for v := int64(0); v < n; v++ {
		total += 4*d.Degree(v) + 8
	}
	for trial := 0; trial < 40; trial++ {
		budget := r.Int64N(total + 2000)
		if trial == 0 {
			budget = 1 << 40
		}
		pol := neighborcache.PolicyDegree
		if trial%2 == 1 {
			pol = neighborcache.PolicyCross
		}
		before := memacct.Read().Bytes[memacct.NeighborCache]
		c, err := neighborcache.Build(d, &neighborcache.Options{Budget: budget, Policy: pol, Cross: cross})
		if err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.Bytes() > budget {
			t.Fatalf("budget %d: uses %d bytes", budget, st.Bytes())
		}
		// What Build allocated and counted is what Stats (and the
		// planner's model) says, for a non-empty cache.
		if counted := memacct.Read().Bytes[memacct.NeighborCache] - before; st.Nodes > 0 && counted != st.Bytes() {
			t.Fatalf("budget %d: Build counted %d bytes, Stats says %d", budget, counted, st.Bytes())
		}
		score := func(v int64) int64 {
			if pol == neighborcache.PolicyCross {
				return int64(cross[v])
			}
			return d.Degree(v)
		}
		minCached, maxUncached := int64(1<<62), int64(0)
		var nodes, edges int64
		for v := int64(0); v < n; v++ {
			l, ok := c.Lookup(v)
			if ok != c.Contains(v) {
				t.Fatalf("node %d: Lookup ok=%v, Contains=%v", v, ok, c.Contains(v))
			}
			if !ok {
				if score(v) > 0 {
					maxUncached = max(maxUncached, score(v))
				}
				continue
			}
			nodes++
			edges += int64(l.Len())
			minCached = min(minCached, score(v))
			want := d.Neighbors(v).AppendTo(nil)
			if got := l.AppendTo(nil); !slices.Equal(got, want) {
				t.Fatalf("node %d: cached list %v, want %v", v, got, want)
			}
			if l.Bytes() != d.Neighbors(v).Bytes() {
				t.Fatalf("node %d: bytes %d, want %d", v, l.Bytes(), d.Neighbors(v).Bytes())
			}
		}
		if nodes != st.Nodes || edges != st.Edges || st.DataBytes != 4*edges {
			t.Fatalf("stats %+v, counted %d nodes %d edges", st, nodes, edges)
		}
		if nodes > 0 && maxUncached > minCached {
			t.Fatalf("policy %s: uncached score %d above cached score %d", pol, maxUncached, minCached)
		}
		if trial == 0 && maxUncached != 0 {
			t.Fatalf("unlimited budget left a node with score %d uncached", maxUncached)
		}
		c.Close()
		if memacct.Read().Bytes[memacct.NeighborCache] != before {
			t.Fatalf("budget %d: Close left %d bytes counted", budget, memacct.Read().Bytes[memacct.NeighborCache]-before)
		}
	}
}

func TestNilAndEmpty(t *testing.T) {
	var c *neighborcache.Cache
	if _, ok := c.Lookup(3); ok || c.Bytes() != 0 {
		t.Fatal("nil cache not empty")
	}
	r := rand.New(rand.NewPCG(1, 2))
	d := writeGraph(t, 100, r)
	c, err := neighborcache.Build(d, &neighborcache.Options{Budget: 10})
	if err != nil {
		t.Fatal(err)
	}
	if c.Bytes() != 0 || c.Contains(0) {
		t.Fatalf("tiny budget: %+v", c.Stats())
	}
	if _, ok := c.Lookup(-1); ok {
		t.Fatal("negative id found")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *neighborcache.Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &neighborcache.Options{}, true},
		{"negative", &neighborcache.Options{Budget: -1}, false},
		{"cross without counts", &neighborcache.Options{Policy: neighborcache.PolicyCross}, false},
		{"unknown policy", &neighborcache.Options{Policy: "lru"}, false},
	} {
		err := tc.o.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, neighborcache.ErrInvalidOptions) {
			t.Errorf("%s: %v does not wrap ErrInvalidOptions", tc.name, err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	dir := b.TempDir()
	bl, _ := storage.Create(dir, nil)
	n := int64(1 << 16)
	csr, _ := bl.CreateCSR(n)
	var edges int64
	for v := int64(0); v < n; v++ {
		nb := []int64{(v + 1) % n, (v + 7) % n}
		slices.Sort(nb)
		csr.Append(v, nb)
		edges += 2
	}
	csr.Commit()
	bl.Finish(storage.Manifest{Name: "b", NumNodes: n, NumEdges: edges})
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, err := neighborcache.Build(d, &neighborcache.Options{Budget: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var hits int
	for i := 0; i < b.N; i++ {
		if _, ok := c.Lookup(r.Int64N(n)); ok {
			hits++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}
