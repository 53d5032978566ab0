package histcache_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// newCache makes a cache over n nodes whose candidates are exactly cand
// (they get score 1, others 0), width h.
func newCache(t testing.TB, n int, cand []int64, h int, opts *histcache.Options) *histcache.Cache {
	t.Helper()
	scores := make([]float32, n)
	for _, v := range cand {
		scores[v] = 1
	}
	c, err := histcache.New(histcache.Config{Scores: scores, Hidden: h, BudgetBytes: histcache.BytesFor(int64(n), int64(len(cand)), h)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Candidates(); fmt.Sprint(got) != fmt.Sprint(cand) {
		t.Fatalf("candidates %v, want %v", got, cand)
	}
	return c
}

// rows returns len(nodes)·h floats, row i = tag·1000 + node + j/100.
func rows(nodes []int64, h int, tag int) []float32 {
	out := make([]float32, len(nodes)*h)
	for i, v := range nodes {
		for j := range h {
			out[i*h+j] = float32(tag*1000) + float32(v) + float32(j)/100
		}
	}
	return out
}

func TestTransitionTable(t *testing.T) {
	const X = histcache.State(255) // rejected
	N, E, V, M, B := histcache.NotCandidate, histcache.Empty, histcache.Valid, histcache.MustRefresh, histcache.InBatchCompute
	events := []histcache.Event{histcache.EventPush, histcache.EventEvict, histcache.EventExpire, histcache.EventMarkInBatch, histcache.EventEndBatch, histcache.EventPull}
	want := map[histcache.State][]histcache.State{
		//  Push Evict Expire Mark EndBatch Pull
		N: {X, X, X, N, N, X},
		E: {V, E, X, E, E, X},
		V: {V, M, M, B, V, V},
		M: {V, M, X, M, M, X},
		B: {B, M, X, B, V, X},
	}
	for _, from := range []histcache.State{N, E, V, M, B} {
		for i, ev := range events {
			t.Run(fmt.Sprintf("%v/%v", from, ev), func(t *testing.T) {
				got, err := histcache.Transition(from, ev)
				if w := want[from][i]; w == X {
					if !errors.Is(err, histcache.ErrTransition) || got != from {
						t.Fatalf("got %v, %v; want rejection", got, err)
					}
				} else if err != nil || got != w {
					t.Fatalf("got %v, %v; want %v", got, err, w)
				}
			})
		}
	}
	if _, err := histcache.Transition(histcache.State(9), histcache.EventPush); !errors.Is(err, histcache.ErrTransition) {
		t.Fatal("unknown state accepted")
	}
}

func TestStalenessOneNeverReuses(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	const n, h = 64, 3
	var cand []int64
	for v := int64(0); v < n; v += 2 {
		cand = append(cand, v)
	}
	c := newCache(t, n, cand, h, &histcache.Options{Staleness: 1})
	for iter := int64(0); iter < 200; iter++ {
		nodes := make([]int64, 1+rng.IntN(20))
		for i := range nodes {
			nodes[i] = rng.Int64N(n)
		}
		hits := make([]bool, len(nodes))
		k, err := c.Lookup(iter, nodes, hits)
		if err != nil {
			t.Fatal(err)
		}
		if k != 0 {
			t.Fatalf("iteration %d: staleness 1 returned %d hits", iter, k)
		}
		if err := c.Pull(iter, nodes[:1], make([]float32, h)); !errors.Is(err, histcache.ErrNotPullable) {
			t.Fatalf("iteration %d: pull of an earlier push: %v", iter, err)
		}
		if _, err := c.Push(iter, nodes, rows(nodes, h, int(iter)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Hits != 0 || s.Pulls != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStalenessWindow(t *testing.T) {
	const h = 2
	c := newCache(t, 10, []int64{3, 7}, h, &histcache.Options{Staleness: 3})
	if _, err := c.Push(10, []int64{3}, rows([]int64{3}, h, 1), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		iter int64
		hit  bool
	}{{9, false}, {10, true}, {11, true}, {12, true}, {13, false}, {12, true}}
	for _, tc := range cases {
		hits := make([]bool, 2)
		if _, err := c.Lookup(tc.iter, []int64{3, 7}, hits); err != nil {
			t.Fatal(err)
		}
		if hits[0] != tc.hit || hits[1] {
			t.Fatalf("iteration %d: hits %v, want [%v false]", tc.iter, hits, tc.hit)
		}
	}
	// At iteration 13 the entry is stale: it must be refreshed. Stored
	// state stays Valid (usable for iteration 12 still).
	if st := c.StateAt(13, 3); st != histcache.MustRefresh {
		t.Fatalf("state at 13: %v, want MustRefresh", st)
	}
	if st, st9 := c.StateAt(12, 3), c.StateAt(9, 3); st != histcache.Valid || st9 != histcache.MustRefresh {
		t.Fatalf("state at 12: %v, at 9: %v", st, st9)
	}
	if err := c.Pull(13, []int64{3}, make([]float32, h)); !errors.Is(err, histcache.ErrNotPullable) {
		t.Fatalf("pull of a stale entry: %v", err)
	}
	s := c.Stats()
	if s.StaleRejections != 1 || s.Hits != 4 || s.Misses != 8 || s.Valid != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := c.Push(13, []int64{3}, rows([]int64{3}, h, 2), nil); err != nil {
		t.Fatal(err)
	}
	if st := c.State(3); st != histcache.Valid {
		t.Fatalf("state after refresh %v", st)
	}
}

// TestSlotTableIndexing would catch OUTRE's bug of indexing the embedding
// buffer with the state value: every candidate's state is Valid (2), yet
// each must read back its own row.
func TestSlotTableIndexing(t *testing.T) {
	const n, h = 100, 4
	cand := []int64{1, 5, 6, 17, 40, 41, 42, 77, 99}
	c := newCache(t, n, cand, h, nil)
	// Push in a scrambled order, in two calls.
	order := []int64{42, 1, 99, 6, 77}
	rest := []int64{5, 41, 17, 40}
	for _, p := range [][]int64{order, rest} {
		if _, err := c.Push(0, p, rows(p, h, 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	all := append(append([]int64{}, rest...), order...)
	dst := make([]float32, len(all)*h)
	if err := c.Pull(1, all, dst); err != nil {
		t.Fatal(err)
	}
	if want := rows(all, h, 0); fmt.Sprint(dst) != fmt.Sprint(want) {
		t.Fatalf("pulled\n%v\nwant\n%v", dst, want)
	}
}

// TestPullReturnsCurrentBatch checks that a pull after the push of batch
// i returns batch i's rows, never an earlier batch's.
func TestPullReturnsCurrentBatch(t *testing.T) {
	const h = 3
	nodes := []int64{2, 4, 8}
	c := newCache(t, 10, nodes, h, &histcache.Options{Staleness: 5})
	dst := make([]float32, len(nodes)*h)
	for i := int64(0); i < 12; i++ {
		if i > 0 {
			// Before batch i pushes: batch i−1's rows.
			if err := c.Pull(i, nodes, dst); err != nil {
				t.Fatal(err)
			}
			if want := rows(nodes, h, int(i-1)); fmt.Sprint(dst) != fmt.Sprint(want) {
				t.Fatalf("batch %d before push: got %v want %v", i, dst, want)
			}
		}
		if _, err := c.Push(i, nodes, rows(nodes, h, int(i)), nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Pull(i, nodes, dst); err != nil {
			t.Fatal(err)
		}
		if want := rows(nodes, h, int(i)); fmt.Sprint(dst) != fmt.Sprint(want) {
			t.Fatalf("batch %d after push: got %v want %v", i, dst, want)
		}
	}
	if _, err := c.Push(3, nodes[:1], rows(nodes[:1], h, 3), nil); !errors.Is(err, histcache.ErrIteration) {
		t.Fatalf("push of an old iteration: %v", err)
	}
}

func TestInBatchCompute(t *testing.T) {
	const h = 2
	c := newCache(t, 6, []int64{1, 2, 3}, h, nil)
	if _, err := c.Push(0, []int64{1, 2}, rows([]int64{1, 2}, h, 0), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkInBatch([]int64{1, 3, 5}); err != nil { // 3 Empty, 5 not a candidate
		t.Fatal(err)
	}
	want := map[int64]histcache.State{0: histcache.NotCandidate, 1: histcache.InBatchCompute, 2: histcache.Valid, 3: histcache.Empty, 5: histcache.NotCandidate}
	for v, st := range want {
		if got := c.State(v); got != st {
			t.Fatalf("node %d: %v, want %v", v, got, st)
		}
	}
	hits := make([]bool, 2)
	if _, err := c.Lookup(1, []int64{1, 2}, hits); err != nil || hits[0] || !hits[1] {
		t.Fatalf("lookup %v %v", hits, err)
	}
	if err := c.Pull(1, []int64{2, 1}, make([]float32, 2*h)); !errors.Is(err, histcache.ErrNotPullable) {
		t.Fatalf("pull of an in-batch node: %v", err)
	}
	// The batch computes node 1 exactly and pushes it.
	if _, err := c.Push(1, []int64{1}, rows([]int64{1}, h, 1), nil); err != nil {
		t.Fatal(err)
	}
	if st := c.State(1); st != histcache.InBatchCompute {
		t.Fatalf("after push in batch: %v", st)
	}
	c.EndBatch()
	if st := c.State(1); st != histcache.Valid {
		t.Fatalf("after EndBatch: %v", st)
	}
	dst := make([]float32, h)
	if err := c.Pull(2, []int64{1}, dst); err != nil || fmt.Sprint(dst) != fmt.Sprint(rows([]int64{1}, h, 1)) {
		t.Fatalf("pull after EndBatch: %v %v", dst, err)
	}
}

func TestGradPolicy(t *testing.T) {
	const h = 1
	cand := []int64{0, 1, 2, 3, 4, 5}
	c := newCache(t, 8, cand, h, &histcache.Options{Policy: histcache.PolicyGrad, PGrad: 0.5})
	if _, ok := c.Threshold(); ok {
		t.Fatal("threshold before any push")
	}
	if n, err := c.EvictUnstable([]int64{0}, []float32{100}); n != 0 || err != nil {
		t.Fatalf("evict before threshold: %d %v", n, err)
	}
	// Iteration 0: everything admitted at p=1 would be 6; at 0.5, the 3
	// smallest norms: nodes 1 (0.1), 3 (0.2), 5 (0.3); ties by id.
	all := cand
	n, err := c.Push(0, all, rows(all, h, 0), []float32{0.9, 0.1, 0.5, 0.2, float32(math.NaN()), 0.3})
	if err != nil || n != 3 {
		t.Fatalf("admitted %d, %v", n, err)
	}
	if th, ok := c.Threshold(); !ok || th != 0.3 {
		t.Fatalf("threshold %v %v", th, ok)
	}
	for _, v := range cand {
		want := histcache.Empty
		if v == 1 || v == 3 || v == 5 {
			want = histcache.Valid
		}
		if got := c.State(v); got != want {
			t.Fatalf("node %d: %v, want %v", v, got, want)
		}
	}
	// Iteration 1: pulled 1 and 3 come back with norms 0.5 and 0.25.
	if _, err := c.Push(1, []int64{0, 2, 7}, rows([]int64{0, 2, 7}, h, 1), []float32{0.4, 0.2, 0}); err != nil {
		t.Fatal(err) // node 7 not a candidate; 2 admitted (0.2), 0 refused; threshold 0.2
	}
	if n, err := c.EvictUnstable([]int64{1, 3, 7}, []float32{0.5, 0.15, 9}); n != 1 || err != nil {
		t.Fatalf("evicted %d, %v", n, err)
	}
	for v, st := range map[int64]histcache.State{0: histcache.Empty, 1: histcache.MustRefresh, 2: histcache.Valid, 3: histcache.Valid, 5: histcache.Valid} {
		if got := c.State(v); got != st {
			t.Fatalf("node %d: %v, want %v", v, got, st)
		}
	}
	// A refused push of a Valid entry evicts it.
	if _, err := c.Push(2, []int64{3, 5}, rows([]int64{3, 5}, h, 2), []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if c.State(5) != histcache.MustRefresh || c.State(3) != histcache.Valid {
		t.Fatalf("states %v %v", c.State(3), c.State(5))
	}
	s := c.Stats()
	if s.AdmissionRejections != 3+1+1 || s.Evictions != 2 || s.Pushes != 3+1+1 || s.Valid != 2 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := c.Push(3, []int64{0}, rows([]int64{0}, h, 3), nil); !errors.Is(err, histcache.ErrShape) {
		t.Fatalf("grad push without norms: %v", err)
	}
}

func TestBudgetAndCandidates(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	for range 50 {
		n := 1 + rng.IntN(200)
		h := 1 + rng.IntN(64)
		scores := make([]float32, n)
		positive := 0
		for i := range scores {
			if rng.IntN(3) > 0 {
				scores[i] = float32(rng.IntN(10)) // ties on purpose
				if scores[i] > 0 {
					positive++
				}
			}
		}
		budget := 4*int64(n) + rng.Int64N(int64(n)*int64(4*h+9)+1)
		c, err := histcache.New(histcache.Config{Scores: scores, Hidden: h, BudgetBytes: budget}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		k := int64(len(c.Candidates()))
		if s.MemBytes > budget || s.MemBytes != histcache.BytesFor(int64(n), k, h) {
			t.Fatalf("n %d h %d budget %d: mem %d", n, h, budget, s.MemBytes)
		}
		if k < int64(positive) && histcache.BytesFor(int64(n), k+1, h) <= budget {
			t.Fatalf("n %d h %d budget %d: %d candidates, one more fits", n, h, budget, k)
		}
		// Every candidate outranks every non-candidate.
		minIn, maxOut := float32(math.Inf(1)), float32(0)
		for v := range n {
			if c.IsCandidate(int64(v)) {
				minIn = min(minIn, scores[v])
			} else {
				maxOut = max(maxOut, scores[v])
			}
		}
		if k > 0 && minIn < maxOut {
			t.Fatalf("candidate score %v below non-candidate %v", minIn, maxOut)
		}
	}
	_, err := histcache.New(histcache.Config{Scores: make([]float32, 10), Hidden: 4, BudgetBytes: 39}, nil)
	if !errors.Is(err, histcache.ErrBudget) {
		t.Fatalf("small budget: %v", err)
	}
}

func TestOptionsAndErrors(t *testing.T) {
	cfg := histcache.Config{Scores: []float32{1, 1}, Hidden: 2, BudgetBytes: 1000}
	cases := []struct {
		name string
		cfg  histcache.Config
		opts *histcache.Options
		want error
	}{
		{"defaults", cfg, nil, nil},
		{"negative staleness", cfg, &histcache.Options{Staleness: -1}, histcache.ErrInvalidOptions},
		{"bad policy", cfg, &histcache.Options{Policy: 7}, histcache.ErrInvalidOptions},
		{"pgrad > 1", cfg, &histcache.Options{PGrad: 1.5}, histcache.ErrInvalidOptions},
		{"pgrad NaN", cfg, &histcache.Options{PGrad: math.NaN()}, histcache.ErrInvalidOptions},
		{"hidden 0", histcache.Config{Scores: cfg.Scores, BudgetBytes: 1000}, nil, histcache.ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := histcache.New(tc.cfg, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && c.Staleness() != histcache.DefaultStaleness {
				t.Fatalf("staleness %d", c.Staleness())
			}
		})
	}
	c, _ := histcache.New(cfg, nil)
	if _, err := c.Lookup(0, []int64{2}, make([]bool, 1)); !errors.Is(err, histcache.ErrNodeRange) {
		t.Fatal(err)
	}
	if _, err := c.Lookup(0, []int64{1}, nil); !errors.Is(err, histcache.ErrShape) {
		t.Fatal(err)
	}
	if _, err := c.Push(0, []int64{1}, make([]float32, 3), nil); !errors.Is(err, histcache.ErrShape) {
		t.Fatal(err)
	}
	if err := c.Pull(0, []int64{1}, make([]float32, 1)); !errors.Is(err, histcache.ErrShape) {
		t.Fatal(err)
	}
	for _, s := range []string{"staleness", "grad"} {
		if p, err := histcache.ParsePolicy(s); err != nil || p.String() != s {
			t.Fatal(s, p, err)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	const n, h = 200, 8
	var cand []int64
	for v := int64(0); v < n; v += 3 {
		cand = append(cand, v)
	}
	c := newCache(t, n, cand, h, &histcache.Options{Staleness: 4})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { // sampler
		rng := rand.New(rand.NewPCG(1, 1))
		hits := make([]bool, 32)
		nodes := make([]int64, 32)
		for i := range 300 {
			for j := range nodes {
				nodes[j] = rng.Int64N(n)
			}
			if _, err := c.Lookup(int64(i/3), nodes, hits); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() { // compute
		rng := rand.New(rand.NewPCG(2, 2))
		for i := range int64(100) {
			nodes := make([]int64, 16)
			for j := range nodes {
				nodes[j] = rng.Int64N(n)
			}
			if err := c.MarkInBatch(nodes[:2]); err != nil {
				errs <- err
				return
			}
			hits := make([]bool, len(nodes))
			if _, err := c.Lookup(i, nodes, hits); err != nil {
				errs <- err
				return
			}
			var pull []int64
			for j, ok := range hits {
				if ok {
					pull = append(pull, nodes[j])
				}
			}
			// Another goroutine may expire nothing (same staleness rule)
			// but may not push: pulls must succeed.
			dst := make([]float32, len(pull)*h)
			if err := c.Pull(i, pull, dst); err != nil {
				errs <- err
				return
			}
			if _, err := c.Push(i, nodes, rows(nodes, h, int(i)), nil); err != nil {
				errs <- err
				return
			}
			c.EndBatch()
		}
	})
	wg.Go(func() { // monitor
		var buf bytes.Buffer
		for range 20 {
			_ = c.Stats()
			buf.Reset()
			if _, err := c.WriteTo(&buf); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestBytesForCounted: BytesFor, which the planner sizes the cache with,
// equals what New allocates and counts in memacct.
func TestBytesForCounted(t *testing.T) {
	scores := make([]float32, 5000)
	for i := range scores {
		scores[i] = float32(i % 97)
	}
	for _, budget := range []int64{20000, 100000, 1 << 20} {
		before := memacct.Read().Bytes[memacct.HistoryCache]
		c, err := histcache.New(histcache.Config{Scores: scores, Hidden: 16, BudgetBytes: budget}, nil)
		if err != nil {
			t.Fatal(err)
		}
		counted := memacct.Read().Bytes[memacct.HistoryCache] - before
		if want := histcache.BytesFor(5000, c.Stats().Candidates, 16); counted != want || counted > budget {
			t.Errorf("budget %d: New counted %d bytes, BytesFor says %d", budget, counted, want)
		}
		c.Close()
		if memacct.Read().Bytes[memacct.HistoryCache] != before {
			t.Errorf("budget %d: Close left %d bytes counted", budget, memacct.Read().Bytes[memacct.HistoryCache]-before)
		}
	}
}

func TestEpochStaleness(t *testing.T) {
	cases := []struct {
		train int64
		batch int
		depth int64
		want  int64
	}{
		{13522, 1000, 2, 16},                             // the 3 GiB benchmark: 14 batches an epoch, past depth 2
		{10000, 1000, 0, 10},                             // exactly ten batches, no depth
		{10001, 1000, 0, 11},                             // a partial last batch is a batch
		{13522, 1000, 38, 52},                            // --spill's depth 38
		{140, 1000, 2, 3},                                // one batch an epoch: the previous epoch's
		{1_207_179, 1000, 2, histcache.DefaultStaleness}, // papers100M: OUTRE's 100
		{1_207_179, 1000, 150, 151},                      // a depth past 100 still leaves one age
		{0, 1000, 2, 3},
		{5, 0, 0, 1},
	}
	for _, tc := range cases {
		if got := histcache.EpochStaleness(tc.train, tc.batch, tc.depth); got != tc.want {
			t.Errorf("EpochStaleness(%d, %d, %d) = %d, want %d", tc.train, tc.batch, tc.depth, got, tc.want)
		}
	}
}
