package train

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// refForward is a float64 full-graph forward pass written from the model
// definitions (docs/train.md, kernels' package doc) with nothing shared
// with the backend path: every node aggregates all its in-neighbours, GCN
// normalises by full-graph degrees, GAT attends over N(i) ∪ {i}. It returns
// every node's log-softmax row.
func refForward(t *testing.T, tr *Trainer) [][]float64 {
	d, m := tr.d, tr.model
	cfg := m.cfg
	n := int(d.NumNodes())
	par := map[string][]float64{}
	for _, p := range m.Params() {
		v := make([]float32, p.Rows*p.Cols)
		if err := tr.be.Download(v, p.W); err != nil {
			t.Fatal(err)
		}
		w := make([]float64, len(v))
		for i, x := range v {
			w[i] = float64(x)
		}
		par[p.Name] = w
	}
	nbrs := make([][]int, n)
	outDeg := make([]int, n)
	for v := range n {
		nl := d.Neighbors(int64(v))
		for k := range nl.Len() {
			u := int(nl.At(k))
			nbrs[v] = append(nbrs[v], u)
			outDeg[u]++
		}
	}
	h := make([][]float64, n)
	row := make([]float32, d.FeatDim())
	for v := range n {
		r := d.FeatureRow(int64(v), row)
		h[v] = make([]float64, len(r))
		var s float64
		for _, x := range r {
			s += math.Abs(float64(x))
		}
		for i, x := range r {
			h[v][i] = float64(x)
			if tr.o.NormalizeFeatures && s > 0 {
				h[v][i] /= s
			}
		}
	}
	// mul returns x·W for W in×out (row-major).
	mul := func(x, w []float64, out int) []float64 {
		y := make([]float64, out)
		for i, xi := range x {
			for j := range out {
				y[j] += xi * w[i*out+j]
			}
		}
		return y
	}
	in := cfg.InDim
	for l := range cfg.Layers {
		last := l == cfg.Layers-1
		out := cfg.Hidden
		if last {
			out = cfg.Classes
		}
		pre := fmt.Sprintf("layer%d.", l)
		nh := make([][]float64, n)
		switch cfg.Kind {
		case ModelSAGE:
			for v := range n {
				mean := make([]float64, in)
				for _, u := range nbrs[v] {
					for i := range mean {
						mean[i] += h[u][i] / float64(len(nbrs[v]))
					}
				}
				a, b := mul(h[v], par[pre+"w_self"], out), mul(mean, par[pre+"w_neigh"], out)
				for j := range a {
					a[j] += b[j] + par[pre+"bias"][j]
				}
				nh[v] = a
			}
		case ModelGCN:
			for v := range n {
				agg := make([]float64, in)
				for i := range agg {
					agg[i] = h[v][i] / math.Sqrt(float64(outDeg[v]+1))
				}
				for _, u := range nbrs[v] {
					for i := range agg {
						agg[i] += h[u][i] / math.Sqrt(float64(outDeg[u]+1))
					}
				}
				for i := range agg {
					agg[i] /= math.Sqrt(float64(len(nbrs[v]) + 1))
				}
				a := mul(agg, par[pre+"w"], out)
				for j := range a {
					a[j] += par[pre+"bias"][j]
				}
				nh[v] = a
			}
		case ModelGAT:
			H := cfg.Heads
			wh := make([][]float64, n)
			for v := range n {
				wh[v] = mul(h[v], par[pre+"w"], H*out)
			}
			al, ar := par[pre+"attn_l"], par[pre+"attn_r"]
			for v := range n {
				srcs := nbrs[v]
				if !slices.Contains(srcs, v) {
					srcs = append(slices.Clone(srcs), v)
				}
				o := make([]float64, H*out)
				for hd := range H {
					sc := make([]float64, len(srcs))
					mx := math.Inf(-1)
					for k, u := range srcs {
						var s float64
						for f := range out {
							s += al[hd*out+f]*wh[v][hd*out+f] + ar[hd*out+f]*wh[u][hd*out+f]
						}
						if s < 0 {
							s *= gatSlope
						}
						sc[k] = s
						mx = max(mx, s)
					}
					var z float64
					for k := range sc {
						sc[k] = math.Exp(sc[k] - mx)
						z += sc[k]
					}
					for k, u := range srcs {
						for f := range out {
							o[hd*out+f] += sc[k] / z * wh[u][hd*out+f]
						}
					}
				}
				if last {
					avg := make([]float64, out)
					for hd := range H {
						for f := range out {
							avg[f] += o[hd*out+f] / float64(H)
						}
					}
					o = avg
				}
				for j := range o {
					o[j] += par[pre+"bias"][j]
				}
				nh[v] = o
			}
		}
		if !last {
			for _, r := range nh {
				for i := range r {
					r[i] = max(r[i], 0)
				}
			}
		}
		h = nh
		in = len(h[0])
	}
	for _, r := range h {
		mx := slices.Max(r)
		var z float64
		for _, x := range r {
			z += math.Exp(x - mx)
		}
		for i := range r {
			r[i] -= mx + math.Log(z)
		}
	}
	return h
}

// layerwiseRows returns the log-softmax rows of nodes by layer-wise
// inference, keyed by node.
func layerwiseRows(t *testing.T, tr *Trainer, nodes []int64) (map[int64][]float32, *LayerwiseStats) {
	c := tr.model.cfg.Classes
	got := map[int64][]float32{}
	st, err := tr.logits(context.Background(), EvalLayerwise, nodes, nil, func(ids []int64, logp []float32) error {
		if !slices.IsSorted(ids) {
			t.Errorf("chunk ids not ascending")
		}
		for r, v := range ids {
			if _, dup := got[v]; dup {
				t.Errorf("node %d delivered twice", v)
			}
			got[v] = slices.Clone(logp[r*c : (r+1)*c])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }

// TestLayerwiseExact checks that layer-wise inference equals a float64
// full-graph forward pass and sampled inference with every fanout -1 over
// one batch holding every node (a full-graph forward through the model's
// own forward), for every model kind, on Cora and a small generated graph,
// over every node (one chunk per layer) and over the valid and test nodes
// under a 64 KiB chunk bound (receptive-field restriction, many chunks).
func TestLayerwiseExact(t *testing.T) {
	for _, ds := range []struct {
		name   string
		open   func(testing.TB) *storage.Dataset
		norm   bool
		hidden int
	}{
		{"cora", cora, true, 8}, {"synth", smallSynth, false, 8},
		// Hidden wider than the 16 features: push and files aggregate the
		// input first (aggregateFirst) on the lower layers.
		{"synth-wide", smallSynth, false, 24},
	} {
		for _, kind := range []string{ModelSAGE, ModelGCN, ModelGAT} {
			t.Run(ds.name+"/"+kind, func(t *testing.T) {
				d := ds.open(t)
				n := d.NumNodes()
				tr, err := New(context.Background(), d, &Options{Model: kind, Layers: 3, Hidden: ds.hidden, Heads: 2, Seed: *seedFlag,
					NormalizeFeatures: ds.norm, BatchSize: int(n), EvalMemBytes: minEvalMemBytes})
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				ref := refForward(t, tr)
				all := make([]int64, n)
				for i := range all {
					all[i] = int64(i)
				}
				full, err := tr.Predict(context.Background(), all, []int{-1, -1, -1})
				if err != nil {
					t.Fatal(err)
				}
				c := tr.model.cfg.Classes
				bad := 0
				for v := range n {
					for k := range c {
						if g, w := float64(full[int(v)*c+k]), ref[v][k]; !closeTo(g, w) && bad < 5 {
							bad++
							t.Errorf("full-graph sampled forward node %d class %d: %v, reference %v", v, k, g, w)
						}
					}
				}
				sub := slices.Concat(d.ValidIdx(), d.TestIdx())
				// Sampled batches of 7 targets at fanouts -1 see every
				// in-edge but only a sliver of the graph: the whole
				// graph's degrees (GCN) make them the same operator
				// (block-local degrees did not: the sweep's F49).
				tr.o.BatchSize = 7
				small, err := tr.Predict(context.Background(), sub, []int{-1, -1, -1})
				tr.o.BatchSize = int(n)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range sub {
					for k := range c {
						if g, w := float64(small[i*c+k]), ref[v][k]; !closeTo(g, w) && bad < 5 {
							bad++
							t.Errorf("sampled forward in batches of 7, node %d class %d: %v, reference %v", v, k, g, w)
						}
					}
				}
				// Every stage kind, over every node (one chunk per layer)
				// and over valid+test under a 64 KiB bound.
				for _, stage := range []string{lwAuto, lwMemory, lwPush, lwFiles, lwGather} {
					tr.lwStage = stage
					tr.o.EvalMemBytes = 64 << 20
					gotAll, stAll := layerwiseRows(t, tr, all)
					tr.o.EvalMemBytes = minEvalMemBytes
					if stage == lwFiles {
						// A few destinations per pass, not one.
						tr.o.EvalMemBytes = 256 << 10
					}
					gotSub, stSub := layerwiseRows(t, tr, sub)
					t.Logf("stage %q: all: chunks %v, stages %v; valid+test: restricted %v, rows %v, chunks %v, passes %v, stages %v",
						stage, stAll.chunks(), stAll.stages(), stSub.Restricted, stSub.rows(), stSub.chunks(), stSub.passes(), stSub.stages())
					if stage == lwFiles && stSub.Layers[0].Passes < 2 {
						t.Errorf("stage %q: %d passes on layer 0, want several", stage, stSub.Layers[0].Passes)
					}
					if len(gotAll) != int(n) || len(gotSub) != len(slices.Compact(slices.Sorted(slices.Values(sub)))) {
						t.Fatalf("stage %q: delivered %d and %d rows, want %d and the distinct valid+test nodes", stage, len(gotAll), len(gotSub), n)
					}
					if stSub.Layers[0].Chunks < 2 {
						t.Errorf("stage %q: a 64 KiB bound gave %d chunks on layer 0", stage, stSub.Layers[0].Chunks)
					}
					wantStage := stage
					if stage == lwPush && kind == ModelGAT {
						wantStage = lwGather // GAT's softmax needs every destination's score first: passes only
					}
					if stage != lwAuto {
						for _, s := range [][]string{stAll.stages(), stSub.stages()} {
							for l, k := range s {
								if k != wantStage {
									t.Errorf("stage %q: layer %d's input was %q, want %q", stage, l, k, wantStage)
								}
							}
						}
						// Aggregating first where the input is no wider
						// than the transformed rows, and pushing.
						shapes := tr.model.lwShapes()
						for _, st := range []*LayerwiseStats{stAll, stSub} {
							for l, ls := range st.Layers {
								want := wantStage != lwMemory && wantStage != lwGather && kind != ModelGAT && shapes[l].in <= shapes[l].z
								if ls.AggregateFirst != want {
									t.Errorf("stage %q: layer %d (in %d, z %d) aggregated first: %v, want %v", stage, l, shapes[l].in, shapes[l].z, ls.AggregateFirst, want)
								}
							}
						}
					}
					for _, got := range []map[int64][]float32{gotAll, gotSub} {
						for v, r := range got {
							for k := range c {
								if g, w := float64(r[k]), ref[v][k]; !closeTo(g, w) && bad < 10 {
									bad++
									t.Errorf("stage %q: layer-wise node %d class %d: %v, reference %v", stage, v, k, g, w)
								}
							}
						}
					}
				}
				tr.lwStage = lwAuto
			})
		}
	}
}

func inMemory(s *LayerwiseStats) []bool {
	return perLayer(s, func(l *LayerStats) bool { return l.InMemory })
}

// TestLayerwiseReadsInputOnce checks, through the dataset's storage
// accounting (the feature cache off, buffered reads), that a layer-wise
// pass reads the feature rows of the targets' L-hop in-neighbourhood
// (found by brute force) once each, whatever the number of chunks: on the
// generated graph's valid and test nodes (a field covering the graph, and
// a tight bound forcing many chunks) and on a few Cora test nodes (a
// field smaller than the graph).
func TestLayerwiseReadsInputOnce(t *testing.T) {
	const L = 3
	for _, tc := range []struct {
		name    string
		open    func(testing.TB) *storage.Dataset
		targets func(*storage.Dataset) []int64
		chunks  int // at least, on layer 0 under the tight bound
	}{
		{"synth", smallSynth, func(d *storage.Dataset) []int64 { return slices.Concat(d.ValidIdx(), d.TestIdx()) }, 10},
		{"cora", cora, func(d *storage.Dataset) []int64 { return d.TestIdx()[:20] }, 2},
	} {
		d := tc.open(t)
		sub := tc.targets(d)
		field := map[int64]bool{}
		for _, v := range sub {
			field[v] = true
		}
		for range L {
			for v := range maps.Clone(field) {
				nl := d.Neighbors(v)
				for k := range nl.Len() {
					field[nl.At(k)] = true
				}
			}
		}
		want := int64(len(field)) * d.FeatRowBytes()
		gathered := func() int64 {
			for _, s := range d.Accounting().Snapshot() {
				if s.Stage == storage.StageGather {
					// Requested, not read: the read planner may merge
					// neighbouring rows into one read, gap included.
					return s.BytesRequested
				}
			}
			return 0
		}
		for _, kind := range []string{ModelSAGE, ModelGCN, ModelGAT} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				tr, err := New(context.Background(), d, &Options{Model: kind, Layers: L, Hidden: 8, Heads: 2, Seed: *seedFlag,
					FeatCacheBytes: -1, FeatRead: storage.ReadBuffered})
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				for _, bound := range []int64{minEvalMemBytes, 64 << 20} {
					tr.o.EvalMemBytes = bound
					before := gathered()
					_, st := layerwiseRows(t, tr, sub)
					got := gathered() - before
					l0 := st.Layers[0]
					t.Logf("bound %d: chunks %v, in memory %v, feature bytes read %d (field %d of %d nodes, %d bytes), layer-0 gather rows %d",
						bound, st.chunks(), inMemory(st), got, len(field), d.NumNodes(), want, l0.GatherRows)
					if got != want || l0.InputBytes != want {
						t.Errorf("bound %d: read %d feature bytes (stats %d), want the field's %d once", bound, got, l0.InputBytes, want)
					}
					if bound == minEvalMemBytes && l0.Chunks < tc.chunks {
						t.Errorf("bound %d: %d chunks on layer 0, want at least %d", bound, l0.Chunks, tc.chunks)
					}
				}
			})
		}
	}
}

// TestLayerwiseEvaluateSplits checks the one-pass evaluation of two splits
// against sampled evaluation with full neighbourhoods (SAGE: block-local
// and full-graph aggregation agree), and that no temporary file is left.
func TestLayerwiseEvaluateSplits(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Epochs: 1, Seed: *seedFlag, EvalMemBytes: minEvalMemBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	accs, st, err := tr.EvaluateSplits(context.Background(), d.ValidIdx(), d.TestIdx())
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range [][]int64{d.ValidIdx(), d.TestIdx()} {
		want, err := tr.Evaluate(context.Background(), s, []int{-1, -1})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(accs[i]-want) > 1e-9 {
			t.Errorf("split %d: layer-wise accuracy %v, sampled with full neighbourhoods %v", i, accs[i], want)
		}
	}
	if st == nil || st.BytesRead() == 0 || st.TempBytes() == 0 {
		t.Errorf("stats %+v: want bytes read and written", st)
	}
	ents, _ := os.ReadDir(d.Dir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".layerwise") {
			t.Errorf("temporary %s left behind", filepath.Join(d.Dir(), e.Name()))
		}
	}
}

// TestLayerwiseCancel checks that a cancelled pass returns the context's
// error and removes its temporary files.
func TestLayerwiseCancel(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 3, Hidden: 8, Seed: *seedFlag, EvalMemBytes: minEvalMemBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	all := make([]int64, d.NumNodes())
	for i := range all {
		all[i] = int64(i)
	}
	_, err = tr.logits(ctx, EvalLayerwise, all, nil, func([]int64, []float32) error {
		calls++
		cancel()
		return nil
	})
	if err != context.Canceled || calls != 1 {
		t.Fatalf("err %v after %d chunks, want context.Canceled after 1", err, calls)
	}
	ents, _ := os.ReadDir(d.Dir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".layerwise") {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

// TestLWArrayCompact writes a sparse set's rows into a temporary array in
// chunks (past lwFlushBytes, so flushes run), checks the file holds only
// the members' rows, and reads back subsets.
func TestLWArrayCompact(t *testing.T) {
	seed := *seedFlag
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	const n, width = 600_000, 32
	set := newBitset(n)
	var members []int64
	for v := int64(0); v < n; v++ {
		if r.IntN(3) == 0 {
			set.set(v)
			members = append(members, v)
		}
	}
	ix := newLWIndex(set)
	path := filepath.Join(t.TempDir(), "a.npy")
	a, err := createLWArray(path, ix, int64(len(members)), width)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	row := func(v int64, c int) float32 { return float32(v)*0.5 + float32(c) }
	var written int64
	for i := 0; i < len(members); i += 7000 {
		ids := members[i:min(i+7000, len(members))]
		src := make([]float32, len(ids)*width)
		for k, v := range ids {
			for c := range width {
				src[k*width+c] = row(v, c)
			}
		}
		nb, err := a.writeRows(ids, src)
		if err != nil {
			t.Fatal(err)
		}
		written += nb
	}
	if want := int64(len(members)) * width * 4; written != want || written < lwFlushBytes {
		t.Fatalf("wrote %d bytes, want %d (and at least one flush's %d)", written, want, lwFlushBytes)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := a.off + int64(len(members))*width*4; fi.Size() != want {
		t.Fatalf("file is %d bytes, want %d: only the members' rows", fi.Size(), want)
	}
	for range 20 {
		var ids []int64
		for _, v := range members {
			if r.IntN(50) == 0 {
				ids = append(ids, v)
			}
		}
		dst := make([]float32, len(ids)*width)
		if _, err := a.readRows(ids, dst); err != nil {
			t.Fatal(err)
		}
		for k, v := range ids {
			for c := range width {
				if got := dst[k*width+c]; got != row(v, c) {
					t.Fatalf("node %d column %d: read %v, want %v", v, c, got, row(v, c))
				}
			}
		}
	}
}

// bucketsDataset is a generated graph of a few more nodes than three
// lwAcc buckets, made once per test binary.
func bucketsDataset(t *testing.T) *storage.Dataset {
	return dataset(t, "synth-buckets", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 3*lwBucketRows + 123, FeatDim: 4, Classes: 2, Seed: 11}, nil)
		return err
	})
}

// TestLWAccPush checks the push accumulators against brute force on a
// graph of several buckets (lwBucketRows): a random subset of
// destinations, every node a source, rows written in ascending batches of
// random sizes (staged across bucket boundaries), for the mean and for
// GCN's normalised sum.
func TestLWAccPush(t *testing.T) {
	d := bucketsDataset(t)
	n := d.NumNodes()
	t.Logf("seed %d", *seedFlag)
	rng := rand.New(rand.NewPCG(*seedFlag, 3))
	const w = 3
	z := make([]float32, n*w)
	for i := range z {
		z[i] = rng.Float32()*2 - 1
	}
	outDeg := make([]int32, n)
	for _, u := range d.Indices32() {
		outDeg[u]++
	}
	dst := newBitset(n)
	var edges, rows int64
	for v := range n {
		if rng.IntN(3) == 0 {
			dst.set(v)
			edges += int64(d.Neighbors(v).Len())
			rows++
		}
	}
	for _, gcn := range []bool{false, true} {
		var od []int32
		if gcn {
			od = outDeg
		}
		a, _ := newLWAcc(d, newLWIndex(nil), newLWIndex(dst), rows, w, lwBucketRows, edges, od, nil)
		for b := range len(a.start) - 1 {
			e := a.edges[a.start[b]:a.start[b+1]]
			for i, x := range e {
				if r := int64(x >> 32); r/lwBucketRows != int64(b) || i > 0 && uint32(x) < uint32(e[i-1]) {
					t.Fatalf("gcn %v: bucket %d edge %d (source %d, destination %d) out of order", gcn, b, i, r, uint32(x))
				}
			}
		}
		for u := int64(0); u < n; {
			k := min(n-u, int64(1+rng.IntN(5000)))
			ids := make([]int64, k)
			for i := range ids {
				ids[i] = u + int64(i)
			}
			a.writeRows(ids, z[u*w:(u+k)*w])
			u += k
		}
		var ids []int64
		dst.each(func(v int64) { ids = append(ids, v) })
		got := make([]float32, len(ids)*w)
		a.readRows(ids, got)
		norm := func(v int64) float64 { return 1 / math.Sqrt(float64(outDeg[v])+1) }
		bad := 0
		for i, v := range ids {
			nl := d.Neighbors(v)
			for j := range w {
				var sum float64
				for k := range nl.Len() {
					u := nl.At(k)
					x := float64(z[u*w+int64(j)])
					if gcn {
						x *= norm(u)
					}
					sum += x
				}
				deg := float64(nl.Len())
				switch {
				case gcn:
					sum = (sum + float64(z[v*w+int64(j)])*norm(v)) / math.Sqrt(deg+1)
				case deg > 0:
					sum /= deg
				}
				if g := float64(got[i*w+j]); !closeTo(g, sum) && bad < 5 {
					bad++
					t.Errorf("gcn %v: node %d column %d: %v, brute force %v", gcn, v, j, g, sum)
				}
			}
		}
	}
}

// TestLWAccBuildParallel: the accumulators' edges, bucket starts and
// scales built by several goroutines (lwDestRanges) are the one-goroutine
// build's exactly, for every destination set drawn (all nodes through a
// nil set, a random half, a few scattered nodes), and the ranges tile the
// destination words with their first ranks right.
func TestLWAccBuildParallel(t *testing.T) {
	d := bucketsDataset(t)
	n := d.NumNodes()
	t.Logf("seed %d", *seedFlag)
	rng := rand.New(rand.NewPCG(*seedFlag, 9))
	half, few := newBitset(n), newBitset(n)
	for v := range n {
		if rng.IntN(2) == 0 {
			half.set(v)
		}
		if rng.IntN(997) == 0 {
			few.set(v)
		}
	}
	for _, tc := range []struct {
		name string
		dst  bitset
	}{{"all", nil}, {"half", half}, {"few", few}} {
		dix := newLWIndex(tc.dst)
		var edges, rows int64
		_ = eachOf(tc.dst, n, func(v int64) error {
			edges += int64(d.Neighbors(v).Len())
			rows++
			return nil
		})
		build := func(procs int) *lwAcc {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			parts := lwDestRanges(n, dix, edges)
			var w, k int64
			for _, r := range parts {
				if r.w0 != w || r.w1 <= r.w0 || int64(r.k0) != k {
					t.Fatalf("%s, %d procs: ranges %+v do not tile the words from rank 0", tc.name, procs, parts)
				}
				r.each(dix, n, func(uint64, int64) { k++ })
				w = r.w1
			}
			if w != (n+63)/64 || k != rows {
				t.Fatalf("%s, %d procs: ranges %+v end at word %d with %d destinations, want %d and %d", tc.name, procs, parts, w, k, (n+63)/64, rows)
			}
			if procs > 1 && edges >= 2*lwBuildMinEdges && len(parts) < 2 {
				t.Fatalf("%s: %d edges built by one goroutine of %d", tc.name, edges, procs)
			}
			a, _ := newLWAcc(d, newLWIndex(nil), dix, rows, 3, lwBucketRows, edges, nil, nil)
			return a
		}
		one, many := build(1), build(lwBuildParts)
		if !slices.Equal(one.edges, many.edges) || !slices.Equal(one.start, many.start) || !slices.Equal(one.scale, many.scale) {
			t.Fatalf("%s: the parallel build differs from the serial one", tc.name)
		}
	}
}

// TestPushEdgesParallel: a bucket pushed by several goroutines, with
// the assembly (f32.AddRows), gives a plain serial loop's sums bit for bit, including destinations with many edges
// that straddle the even cut points, and rows narrower than the assembly
// AXPY.
func TestPushEdgesParallel(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // the parallel path on any machine
	rng := rand.New(rand.NewPCG(*seedFlag, 17))
	for _, width := range []int{3, 32} {
		const bucket, dsts = 512, 700
		var es []uint64
		for k := range dsts {
			deg := rng.IntN(12)
			if k%97 == 0 {
				deg = 3000 // a hub across a cut point
			}
			for range deg {
				es = append(es, uint64(rng.IntN(bucket))<<32|uint64(k))
			}
		}
		if len(es) < lwPushParallelEdges {
			t.Fatalf("%d edges: below the parallel threshold", len(es))
		}
		rows := make([]float32, bucket*width)
		for i := range rows {
			rows[i] = rng.Float32()*2 - 1
		}
		mk := func() *lwAcc {
			return &lwAcc{width: width, bucket: bucket, edges: es, start: []int64{0, int64(len(es))}, acc: make([]float32, dsts*width)}
		}
		serial, par := mk(), mk()
		for _, e := range es { // the plain loop, not axpy's assembly
			o, k := int(e>>32), int(uint32(e))
			for j := range width {
				serial.acc[k*width+j] += rows[o*width+j]
			}
		}
		par.pushEdges(0, rows)
		for i := range serial.acc {
			if math.Float32bits(serial.acc[i]) != math.Float32bits(par.acc[i]) {
				t.Fatalf("width %d: acc[%d] = %v pushed in parallel, %v serially", width, i, par.acc[i], serial.acc[i])
			}
		}
	}
}

// TestLwReadAhead: every member of the set is read once, in id order, in
// runs of the given size numbered from 0; want skips runs without reading
// them; use sees each read run's rows; an error from read or from use is
// returned and stops the reader.
func TestLwReadAhead(t *testing.T) {
	const n, size, width = 1000, 64, 3
	set := newBitset(n)
	for v := int64(0); v < n; v += 3 {
		set.set(v)
	}
	var members []int64
	set.each(func(v int64) { members = append(members, v) })
	fill := func(_ int64, ids []int64, rows []float32) error {
		for i, v := range ids {
			for k := range width {
				rows[i*width+k] = float32(v*10 + int64(k))
			}
		}
		return nil
	}
	for _, skipOdd := range []bool{false, true} {
		var want func(int64, []int64) bool
		if skipOdd {
			want = func(run int64, _ []int64) bool { return run%2 == 0 }
		}
		var seen []int64
		var runs []int64
		err := lwReadAhead(context.Background(), set, n, size, width, want, fill, func(run int64, ids []int64, rows []float32) error {
			runs = append(runs, run)
			for i, v := range ids {
				if rows[i*width+2] != float32(v*10+2) {
					return fmt.Errorf("run %d: row of %d holds %v", run, v, rows[i*width:(i+1)*width])
				}
			}
			seen = append(seen, ids...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var wantIDs, wantRuns []int64
		for r := int64(0); r*size < int64(len(members)); r++ {
			if !skipOdd || r%2 == 0 {
				wantRuns = append(wantRuns, r)
				wantIDs = append(wantIDs, members[r*size:min((r+1)*size, int64(len(members)))]...)
			}
		}
		if !slices.Equal(runs, wantRuns) || !slices.Equal(seen, wantIDs) {
			t.Fatalf("skip odd %v: runs %v (want %v), %d ids (want %d)", skipOdd, runs, wantRuns, len(seen), len(wantIDs))
		}
	}
	boom := errors.New("boom")
	reads := 0
	err := lwReadAhead(context.Background(), set, n, size, width, nil, func(run int64, ids []int64, rows []float32) error {
		reads++
		if run == 2 {
			return boom
		}
		return nil
	}, func(int64, []int64, []float32) error { return nil })
	if !errors.Is(err, boom) || reads != 3 {
		t.Errorf("read error: %v after %d reads, want boom after 3", err, reads)
	}
	reads = 0
	err = lwReadAhead(context.Background(), set, n, size, width, nil, func(int64, []int64, []float32) error {
		reads++
		return nil
	}, func(run int64, _ []int64, _ []float32) error {
		if run == 0 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || reads > 2 {
		t.Errorf("use error: %v after %d reads, want boom and at most 2 reads (the failed run and the one read ahead)", err, reads)
	}
}

// loopySynth is smallSynth with explicit self loops (every third node)
// and a repeated edge (every fifth node's first neighbour twice): lists
// as a dataset imported with --keep-self-loops and --keep-duplicates has.
func loopySynth(t testing.TB) *storage.Dataset {
	src := smallSynth(t)
	return dataset(t, "loopy", func(dir string) error {
		b, err := storage.Create(dir, nil)
		if err != nil {
			return err
		}
		n := src.NumNodes()
		csr, err := b.CreateCSR(n)
		if err != nil {
			return err
		}
		var edges int64
		for v := range n {
			nl := src.Neighbors(v)
			var nb []int64
			for i := range nl.Len() {
				nb = append(nb, nl.At(i))
			}
			if v%5 == 0 && len(nb) > 0 {
				nb = append(nb, nb[0])
			}
			if v%3 == 0 {
				nb = append(nb, v)
			}
			slices.Sort(nb)
			if err := csr.Append(v, nb); err != nil {
				return err
			}
			edges += int64(len(nb))
		}
		if err := csr.Commit(); err != nil {
			return err
		}
		feats, err := src.FeaturesF32()
		if err != nil {
			return err
		}
		for _, a := range []struct {
			name  string
			dtype npy.DType
			tail  []int64
			write func(*storage.ArrayWriter) error
		}{
			{storage.FileFeatures, npy.Float32, []int64{int64(src.FeatDim())}, func(w *storage.ArrayWriter) error { return w.WriteFloat32s(feats) }},
			{storage.FileLabels, npy.Int32, nil, func(w *storage.ArrayWriter) error { return w.WriteInt32s(src.Labels()) }},
			{storage.FileTrain, npy.Int64, nil, func(w *storage.ArrayWriter) error { return w.WriteInt64s(src.TrainIdx()) }},
			{storage.FileValid, npy.Int64, nil, func(w *storage.ArrayWriter) error { return w.WriteInt64s(src.ValidIdx()) }},
			{storage.FileTest, npy.Int64, nil, func(w *storage.ArrayWriter) error { return w.WriteInt64s(src.TestIdx()) }},
		} {
			w, err := b.CreateArray(a.name, a.dtype, a.tail)
			if err != nil {
				return err
			}
			if err := a.write(w); err != nil {
				w.Abort()
				return err
			}
			if err := w.Commit(); err != nil {
				return err
			}
		}
		m := src.Manifest()
		return b.Finish(storage.Manifest{Name: "loopy", NumNodes: n, NumEdges: edges, FeatDim: m.FeatDim, FeatDType: m.FeatDType, NumClasses: m.NumClasses})
	})
}

// TestLayerwiseSelfLoopsAndRepeats: on lists with explicit self loops and
// repeated edges, every stage kind agrees with the float64 reference
// (which, as the kernels, counts a repeated edge twice and gives GAT a
// self loop only where the list lacks one).
func TestLayerwiseSelfLoopsAndRepeats(t *testing.T) {
	d := loopySynth(t)
	n := d.NumNodes()
	for _, kind := range []string{ModelSAGE, ModelGCN, ModelGAT} {
		t.Run(kind, func(t *testing.T) {
			tr, err := New(context.Background(), d, &Options{Model: kind, Layers: 2, Hidden: 8, Heads: 2, Seed: *seedFlag, BatchSize: int(n)})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ref := refForward(t, tr)
			sub := slices.Concat(d.ValidIdx(), d.TestIdx())
			c := tr.model.cfg.Classes
			bad := 0
			for _, stage := range []string{lwMemory, lwPush, lwFiles, lwGather} {
				tr.lwStage = stage
				tr.o.EvalMemBytes = 256 << 10
				got, st := layerwiseRows(t, tr, sub)
				t.Logf("stage %q: stages %v, passes %v", stage, st.stages(), st.passes())
				for v, r := range got {
					for k := range c {
						if g, w := float64(r[k]), ref[v][k]; !closeTo(g, w) && bad < 10 {
							bad++
							t.Errorf("stage %q: node %d class %d: %v, reference %v", stage, v, k, g, w)
						}
					}
				}
			}
		})
	}
}

// TestRemoveStaleLW: a layer-wise pass's temporary directory left by a
// killed process is removed by the next pass; a running process's is not.
func TestRemoveStaleLW(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := filepath.Join(dir, fmt.Sprintf(".layerwise-%d-123", cmd.Process.Pid))
	live := filepath.Join(dir, lwDirPrefix()+"456")
	other := filepath.Join(dir, ".layerwise-x")
	for _, p := range []string{dead, live, other} {
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleLW(dir)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead process's directory survived: %v", err)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

// TestLayerwiseWithinBound: the layer-wise pass's counted memory (its
// arrays and the backend's tensors, pooled storage included) stays within
// its chunk bound after training, for every model. Before the backend's
// drain reset its pool's bound, the pool refilled to training's peak
// beside the chunks: 1.4–2.6× the bound here, and GAT at --mem 100MiB
// past the whole budget.
func TestLayerwiseWithinBound(t *testing.T) {
	d := smallSynth(t)
	for _, model := range []string{ModelSAGE, ModelGCN, ModelGAT} {
		t.Run(model, func(t *testing.T) {
			tr, err := New(context.Background(), d, &Options{Model: model, Layers: 3, Hidden: 16, Heads: 2, Epochs: 1, Seed: *seedFlag})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if _, err := tr.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			nodes := make([]int64, d.NumNodes())
			for i := range nodes {
				nodes[i] = int64(i)
			}
			for _, bound := range []int64{1 << 20, 4 << 20} {
				tr.o.EvalMemBytes = bound
				if p, ok := tr.be.(interface{ ReleasePooled() }); ok {
					p.ReleasePooled() // as layerwise does: the base is what it starts from
				}
				base := memacct.Read()
				memacct.ResetPeak()
				st, err := tr.layerwise(context.Background(), nodes, func([]int64, kernels.Tensor) error { return nil })
				if err != nil {
					t.Fatal(err)
				}
				s := memacct.Read()
				t.Logf("bound %d: peak %d over the base (inference %d, backend %d), chunks %v", bound, s.Peak-base.Total,
					s.MaxBytes[memacct.Inference]-base.Bytes[memacct.Inference], s.MaxBytes[memacct.Backend]-base.Bytes[memacct.Backend], st.chunks())
				if over := s.Peak - base.Total; over > bound {
					t.Errorf("bound %d: the pass counted %d bytes over its base (%.2f× the bound)", bound, over, float64(over)/float64(bound))
				}
			}
		})
	}
}

// TestBlockByPosIsBlockBySearch: the two ways of building a chunk's block
// give the same indices and other sources, and blockByPos leaves its
// position map as it found it (all −1), on random chunks.
func TestBlockByPosIsBlockBySearch(t *testing.T) {
	seed := *seedFlag
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	const n = 5000
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	// Fixed chunks first: the first and last node as destinations and as
	// other sources, repeated neighbours, no neighbours, no others.
	fixed := []struct{ dst, nbr []int64 }{
		{[]int64{0}, []int64{n - 1, 0, n - 1, 0}},
		{[]int64{n - 1}, []int64{0, 0, n - 1}},
		{[]int64{0, n - 1}, []int64{n - 1, 1, n - 2, 0, 1}},
		{[]int64{0, 1, 2}, nil},
		{[]int64{3, 4}, []int64{4, 3, 4}},
	}
	for trial := range 200 + len(fixed) {
		var dst, nbr []int64
		if trial < len(fixed) {
			dst, nbr = fixed[trial].dst, fixed[trial].nbr
		} else {
			lo := rng.Int64N(n)
			for v := lo; v < n && len(dst) < 1+rng.IntN(300); v += 1 + rng.Int64N(4) {
				dst = append(dst, v)
			}
			nbr = make([]int64, rng.IntN(3000))
			for k := range nbr {
				if rng.IntN(4) == 0 {
					nbr[k] = dst[rng.IntN(len(dst))]
				} else {
					nbr[k] = rng.Int64N(n)
				}
			}
		}
		want := make([]int32, len(nbr))
		wantOthers := blockBySearch(dst, nbr, want)
		got := make([]int32, len(nbr))
		gotOthers := blockByPos(pos, dst, nbr, got)
		if !slices.Equal(got, want) || !slices.Equal(gotOthers, wantOthers) {
			t.Fatalf("seed %d, trial %d: blockByPos gave %v / %v, blockBySearch %v / %v", seed, trial, got, gotOthers, want, wantOthers)
		}
		if i := slices.IndexFunc(pos, func(p int32) bool { return p != -1 }); i >= 0 {
			t.Fatalf("seed %d, trial %d: pos[%d] = %d after blockByPos", seed, trial, i, pos[i])
		}
	}
}
