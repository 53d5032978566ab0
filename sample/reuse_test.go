package sample_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/sample"
)

type setOf map[int64]bool

func (s setOf) Contains(v int64) bool { return s[v] }

// TestReuseForHook: a reused hop-1 node gets no hop-2 edges, its list is not
// looked up and nodes reachable only through it are not reached; a target
// in the set is expanded as usual.
func TestReuseForHook(t *testing.T) {
	adj := [][]int64{
		0: {1, 4},
		1: {0, 2, 3},
		2: {1},
		3: {1},
		4: {0, 5},
		5: {4, 6},
		6: {5},
	}
	d := writeDataset(t, adj, []int64{0, 1}, 0)
	for _, tc := range []struct {
		name        string
		reuse       setOf
		wantReused  []int32
		wantLookups int64
		wantNodes   int
	}{
		{"none", nil, nil, 5, 6},                                    // 0 1 | 4 2 3 | 5
		{"hop-1 node 4", setOf{4: true, 1: true}, []int32{2}, 4, 5}, // 4 not expanded, 5 never reached; target 1 expanded
		{"target only", setOf{0: true}, nil, 5, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls [][]int64
			s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{-1, -1}, BatchSize: 2, Workers: 1,
				ReuseFor: func(_ context.Context, epoch, index int, hop1 []int64) (sample.NodeSet, error) {
					calls = append(calls, slices.Clone(hop1))
					if tc.reuse == nil {
						return nil, nil
					}
					return tc.reuse, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bs, st := collect(t, s, 0)
			if len(bs) != 1 || len(calls) != 1 {
				t.Fatalf("%d batches, %d hook calls", len(bs), len(calls))
			}
			b := bs[0]
			hop1 := b.Blocks[1].Src[b.Blocks[1].NumDst:]
			if !slices.Equal(calls[0], hop1) {
				t.Errorf("hook saw hop-1 nodes %v, want %v", calls[0], hop1)
			}
			if !slices.Equal(b.Reused, tc.wantReused) {
				t.Errorf("Reused %v, want %v", b.Reused, tc.wantReused)
			}
			if st.Lookups != tc.wantLookups || len(b.Nodes()) != tc.wantNodes {
				t.Errorf("lookups %d nodes %v, want %d lookups %d nodes", st.Lookups, b.Nodes(), tc.wantLookups, tc.wantNodes)
			}
			blk := &b.Blocks[0]
			for i := 0; i < blk.NumDst; i++ {
				v, deg := blk.Src[i], blk.Indptr[i+1]-blk.Indptr[i]
				want := int64(len(adj[v]))
				if slices.Contains(tc.wantReused, int32(i)) {
					want = 0
				}
				if deg != want {
					t.Errorf("block 0: node %d has %d edges, want %d", v, deg, want)
				}
			}
			checkBatch(t, d, []int{-1, -1}, b, setOrEmpty(tc.reuse))
		})
	}
}

func setOrEmpty(s setOf) sample.NodeSet {
	if s == nil {
		return setOf{}
	}
	return s
}

// decide is a batch-dependent reuse decision.
func decide(index int, hop1 []int64) setOf {
	m := int64(index%3 + 2)
	s := setOf{}
	for _, v := range hop1 {
		if v%m == 0 {
			s[v] = true
		}
	}
	return s
}

// TestReuseForDeterministic: a ReuseFor that blocks batch i until the
// consumer has received batch i−2 (as the trainer does) gives the same
// batches as one that answers at once with one worker, and every batch
// satisfies the block invariants under its own set.
func TestReuseForDeterministic(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 21))
	adj, part, train := communityGraph(r, 10, 50, 10, 4, 2)
	d := writeDataset(t, adj, train, 0)
	parts, err := sample.NewMemPartitions(d, 10, part)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 2
	run := func(workers int, blocking bool) ([]*sample.Batch, []setOf) {
		var mu sync.Mutex
		var done []chan struct{}
		sets := map[int]setOf{}
		o := &sample.Options{Fanouts: []int{4, 4, 3}, BatchSize: 11, Mode: sample.ModePartition, PartsPerBatch: 2, Seed: seed, Workers: workers,
			ReuseFor: func(ctx context.Context, epoch, index int, hop1 []int64) (sample.NodeSet, error) {
				if blocking && index >= depth {
					mu.Lock()
					ch := done[index-depth]
					mu.Unlock()
					select {
					case <-ch:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				s := decide(index, hop1)
				mu.Lock()
				sets[index] = s
				mu.Unlock()
				return s, nil
			}}
		s, err := sample.New(d, parts, o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pl, err := s.Plan(3)
		if err != nil {
			t.Fatal(err)
		}
		done = make([]chan struct{}, len(pl.Batches))
		for i := range done {
			done[i] = make(chan struct{})
		}
		it := s.Epoch(context.Background(), 3)
		defer it.Close()
		var bs []*sample.Batch
		for range pl.Batches {
			b, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			close(done[b.Index])
			untimed(t, b)
			bs = append(bs, b)
		}
		out := make([]setOf, len(bs))
		for i := range out {
			out[i] = sets[i]
		}
		return bs, out
	}
	a, sa := run(1, false)
	b, _ := run(3, true)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("batches differ between a blocking ReuseFor with 3 workers and an immediate one with 1")
	}
	var reused int
	for i, bt := range a {
		checkBatch(t, d, []int{4, 4, 3}, bt, sa[i])
		reused += len(bt.Reused)
	}
	if reused == 0 {
		t.Fatal("no node was reused")
	}
}

// TestReuseForCancel: workers blocked in ReuseFor stop on cancellation.
func TestReuseForCancel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 12))
	adj, _, train := communityGraph(r, 10, 50, 10, 4, 1)
	d := writeDataset(t, adj, train, 0)
	s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{3, 3}, BatchSize: 5, Workers: 3,
		ReuseFor: func(ctx context.Context, _, index int, _ []int64) (sample.NodeSet, error) {
			if index == 0 {
				return nil, nil
			}
			<-ctx.Done() // never decided
			return nil, ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	it := s.Epoch(ctx, 0)
	if _, err := it.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := it.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	it.Close()
	goleak.VerifyNone(t)
}
