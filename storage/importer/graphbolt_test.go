package importer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// asGiven keeps a GraphBolt edge list exactly (the CLI's defaults for
// import graphbolt).
var asGiven = &Options{Directed: true, KeepSelfLoops: true, KeepDuplicates: true}

// randomDataset writes a random directed graph with self loops,
// float16 features, partial labels and splits.
func randomDataset(t *testing.T, dir string, seed uint64, n int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := storagetest.Graph{Name: "rand", Adj: make([][]int64, n), FeatDim: 5, FeatDType: "float16",
		Labels: make([]int32, n), NumClasses: 4}
	for v := range g.Adj {
		for range rng.IntN(6) {
			g.Adj[v] = append(g.Adj[v], rng.Int64N(int64(n)))
		}
		g.Labels[v] = int32(rng.IntN(5)) - 1
	}
	g.Feature = func(v int64, row []float32) {
		for i := range row {
			row[i] = float32(v%97) + float32(i)/8
		}
	}
	perm := rng.Perm(n)
	for i, v := range perm {
		switch {
		case i < n/2:
			g.Train = append(g.Train, int64(v))
		case i < 3*n/4:
			g.Valid = append(g.Valid, int64(v))
		case i < 7*n/8:
			g.Test = append(g.Test, int64(v))
		}
	}
	storagetest.Write(t, dir, g)
}

func roundTrip(t *testing.T, src string, o *graphbolt.Options) string {
	t.Helper()
	gb := filepath.Join(t.TempDir(), "gb")
	rep, err := graphbolt.Export(src, gb, o)
	if err != nil {
		t.Fatal(err)
	}
	// Seeds with label -1 are counted (DGL's loss fails on them).
	var want [3]int64
	if l := load(t, src); l.labels != nil {
		for k, sp := range l.splits {
			for _, v := range sp {
				if l.labels[v] == -1 {
					want[k]++
				}
			}
		}
	}
	if rep.UnlabelledSeeds != want {
		t.Errorf("UnlabelledSeeds %v, want %v", rep.UnlabelledSeeds, want)
	}
	if warned := strings.Contains(rep.String(), "label -1"); warned != (want != [3]int64{}) {
		t.Errorf("report warns %v with %v unlabelled seeds:\n%s", warned, want, rep)
	}
	back := filepath.Join(t.TempDir(), "back")
	if _, err := ImportGraphBolt(gb, back, asGiven); err != nil {
		t.Fatal(err)
	}
	sameArrays(t, src, back)
	ma, _ := storage.LoadManifest(src)
	mb, _ := storage.LoadManifest(back)
	if ma.Name != mb.Name || ma.NumNodes != mb.NumNodes || ma.NumEdges != mb.NumEdges || ma.FeatDim != mb.FeatDim ||
		ma.FeatDType != mb.FeatDType || ma.NumClasses != mb.NumClasses {
		t.Errorf("manifests differ:\n%+v\n%+v", ma, mb)
	}
	return gb
}

func TestGraphBoltRoundTripCora(t *testing.T) {
	src := t.TempDir()
	if _, err := ImportOGB(coraDir, src, nil); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, src, nil)
	roundTrip(t, src, &graphbolt.Options{IDDType: npy.Int32, NoLink: true})
}

func TestGraphBoltRoundTripRandom(t *testing.T) {
	seed := testSeed(t)
	for _, n := range []int{1, 7, 300} {
		src := filepath.Join(t.TempDir(), "src")
		randomDataset(t, src, seed, n)
		roundTrip(t, src, &graphbolt.Options{MemBytes: graphbolt.MinMemBytes})
	}
}

// TestGraphBoltLabelsFromSets drops the label feature: labels then come
// from the sets, and nodes in no set are unlabelled.
func TestGraphBoltLabelsFromSets(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	randomDataset(t, src, testSeed(t), 200)
	gb := roundTrip(t, src, nil)
	mpath := filepath.Join(gb, graphbolt.MetadataName)
	b, _ := os.ReadFile(mpath)
	s := strings.Replace(string(b), "name: label", "name: label_unused", 1)
	if err := os.WriteFile(mpath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "back")
	if _, err := ImportGraphBolt(gb, back, asGiven); err != nil {
		t.Fatal(err)
	}
	want, got := load(t, src), load(t, back)
	inSet := map[int64]bool{}
	for _, sp := range want.splits {
		for _, v := range sp {
			inSet[v] = true
		}
	}
	for v, c := range want.labels {
		if !inSet[int64(v)] {
			c = -1
		}
		if got.labels[v] != c {
			t.Fatalf("label of %d = %d, want %d", v, got.labels[v], c)
		}
	}
}

// TestGraphBoltBadInputs corrupts one file of a valid export at a time:
// the import must fail with an error that names the file and the element
// or field, and leave no dataset behind.
func TestGraphBoltBadInputs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	storagetest.Write(t, src, storagetest.Graph{
		Adj: [][]int64{{1, 2}, {0}, {0, 3}, {2}}, FeatDim: 2, Labels: []int32{0, 1, 2, 0}, NumClasses: 3,
		Train: []int64{0, 1}, Valid: []int64{2}, Test: []int64{3},
	})
	seeds, labels := graphbolt.SetPaths(0)
	testSeeds, _ := graphbolt.SetPaths(2)
	for _, tc := range []struct {
		name  string
		file  string
		data  func(t *testing.T) []byte // nil removes the file
		edit  func(string) string       // edits metadata.yaml instead
		want  []string
		isErr error
	}{
		{name: "no metadata", file: graphbolt.MetadataName, want: []string{"metadata.yaml not found"}, isErr: ErrLayout},
		{name: "empty metadata", edit: func(string) string { return " \n" }, want: []string{"metadata.yaml: the file is empty"}, isErr: ErrFormat},
		{name: "seeds of a link task", file: seeds, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{2, 2}, []int64{0, 1, 1, 2})
		}, want: []string{"train_seeds.npy", "shape [2 2], want (num_seeds,): only the first task (\"node_classification\") is read"}, isErr: ErrFormat},
		{name: "missing graph", edit: func(s string) string { return strings.Replace(s, "graph:", "grph:", 1) }, want: []string{"metadata.yaml", "graph: missing"}, isErr: ErrFormat},
		{name: "missing num", edit: func(s string) string { return strings.Replace(s, "num: 4", "nm: 4", 1) }, want: []string{"graph.nodes[0].num"}, isErr: ErrFormat},
		{name: "edges float", file: graphbolt.PathEdges, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Float32, []int64{2, 6}, make([]float32, 12))
		}, want: []string{"edges.npy", "want an integer dtype"}, isErr: ErrFormat},
		{name: "edges shape", file: graphbolt.PathEdges, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{6, 2}, make([]int64, 12))
		}, want: []string{"edges.npy", "want (2, num_edges)"}, isErr: ErrFormat},
		{name: "edge out of range", file: graphbolt.PathEdges, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{2, 3}, []int64{0, 1, 2, 1, 9, 3})
		}, want: []string{"edges.npy", "element 4", "destination node 9 out of range [0, 4) (N = 4 from ", "metadata.yaml graph.nodes[0].num)"}, isErr: ErrFormat},
		{name: "edges truncated", file: graphbolt.PathEdges, data: func(t *testing.T) []byte {
			b := npyBytes(t, npy.Int64, []int64{2, 3}, []int64{0, 1, 2, 1, 2, 3})
			return b[:len(b)-8]
		}, want: []string{"edges.npy", "file is"}, isErr: ErrFormat},
		{name: "seed out of range", file: seeds, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{2}, []int64{0, 4})
		}, want: []string{"train_seeds.npy", "element 1", "node 4 out of range [0, 4)"}, isErr: ErrFormat},
		{name: "seed in two sets", file: testSeeds, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{1}, []int64{1})
		}, want: []string{"test_seeds.npy", "element 0", "node 1 is also in train"}, isErr: ErrFormat},
		{name: "seeds float", file: seeds, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Float64, []int64{2}, []float64{0, 1})
		}, want: []string{"train_seeds.npy", "want an integer dtype"}, isErr: ErrFormat},
		{name: "set labels length", file: labels, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{3}, []int64{0, 1, 1})
		}, want: []string{"train_labels.npy", "3 labels for 2 seeds"}, isErr: ErrFormat},
		{name: "set labels disagree with label feature", file: labels, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{2}, []int64{0, 2})
		}, want: []string{"train_labels.npy: element 1", "label 2 of seed 1", "label.npy says 1"}, isErr: ErrLabelConflict},
		{name: "set says unlabelled, feature labels", file: labels, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Float32, []int64{2}, []float32{-1, 1})
		}, want: []string{"train_labels.npy: element 0", "label -1 of seed 0", "label.npy says 0"}, isErr: ErrLabelConflict},
		{name: "label feature length", file: graphbolt.PathLabel, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{3}, []int64{0, 1, 1})
		}, want: []string{"label.npy", "3 labels, want one per node (4, N from ", "metadata.yaml graph.nodes[0].num)"}, isErr: ErrFormat},
		{name: "label out of range", file: graphbolt.PathLabel, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Int64, []int64{4}, []int64{0, 1, 7, 0})
		}, want: []string{"label.npy", "element 2", "label 7 out of range"}, isErr: ErrFormat},
		{name: "features rows", file: graphbolt.PathFeat, data: func(t *testing.T) []byte {
			return npyBytes(t, npy.Float32, []int64{5, 2}, make([]float32, 10))
		}, want: []string{"feat.npy", "5 feature rows, want one per node (4, N from ", "metadata.yaml graph.nodes[0].num)"}, isErr: ErrFormat},
		{name: "seeds missing", file: seeds, want: []string{"train_seeds.npy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gb := filepath.Join(t.TempDir(), "gb")
			if _, err := graphbolt.Export(src, gb, &graphbolt.Options{NoLink: true}); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.edit != nil:
				p := filepath.Join(gb, graphbolt.MetadataName)
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, []byte(tc.edit(string(b))), 0o644); err != nil {
					t.Fatal(err)
				}
			case tc.data == nil:
				os.Remove(filepath.Join(gb, tc.file))
			default:
				if err := os.WriteFile(filepath.Join(gb, tc.file), tc.data(t), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := ImportGraphBolt(gb, out, asGiven)
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.isErr != nil && !errors.Is(err, tc.isErr) {
				t.Errorf("error %v does not match %v", err, tc.isErr)
			}
			assertNoDataset(t, out)
		})
	}
}

// TestDirectedEdgeConvention imports one directed edge list (with a
// duplicate and a self loop) in every format, kept exactly: every
// importer must store edge u→v in v's neighbour list, so all four give
// identical arrays, and the GraphBolt export of the edge-list import gives
// back the file's edges (I19).
func TestDirectedEdgeConvention(t *testing.T) {
	const n = 6
	src := []int64{0, 0, 1, 3, 3, 5, 2, 0, 4}
	dst := []int64{1, 2, 2, 0, 0, 4, 2, 5, 1}
	var text, csv strings.Builder
	for i := range src {
		fmt.Fprintf(&text, "%d %d\n", src[i], dst[i])
		fmt.Fprintf(&csv, "%d,%d\n", src[i], dst[i])
	}
	row2 := append(append([]int64{}, src...), dst...) // (2, E)
	var pairs []int64                                 // (E, 2)
	for i := range src {
		pairs = append(pairs, src[i], dst[i])
	}
	e := int64(len(src))
	dir := t.TempDir()
	writeFiles(t, dir, map[string]any{
		"el/e.txt":                                text.String(),
		"ogb/raw/edge.csv.gz":                     csv.String(),
		"ogb/raw/num-node-list.csv.gz":            fmt.Sprintf("%d\n", n),
		"npy/paper__cites__paper/edge_index.npy":  npyBytes(t, npy.Int64, []int64{e, 2}, pairs),
		"npy2/paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int64, []int64{2, e}, row2),
		"gb/edges/edges.npy":                      npyBytes(t, npy.Int64, []int64{2, e}, row2),
		"gb/metadata.yaml":                        fmt.Sprintf("graph:\n  nodes:\n    - num: %d\n  edges:\n    - format: numpy\n      path: edges/edges.npy\n", n),
	})
	o := func() *Options {
		return &Options{Directed: true, KeepSelfLoops: true, KeepDuplicates: true, NumNodes: n}
	}
	outs := map[string]string{}
	imp := map[string]func(string, string, *Options) (Report, error){
		"el/e.txt": ImportEdgeList, "ogb": ImportOGB, "npy": ImportNPY, "npy2": ImportNPY, "gb": ImportGraphBolt,
	}
	for name, f := range imp {
		out := filepath.Join(t.TempDir(), "out")
		if _, err := f(filepath.Join(dir, name), out, o()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		outs[name] = out
	}
	// Row v lists its in-neighbours in ascending order.
	want := [][]int64{{3, 3}, {0, 4}, {0, 1, 2}, {}, {5}, {0}}
	l := load(t, outs["el/e.txt"])
	for v := range want {
		got := l.indices[l.indptr[v]:l.indptr[v+1]]
		if len(got) != len(want[v]) || (len(got) > 0 && !slices.Equal(got, want[v])) {
			t.Errorf("edge list: row %d = %v, want %v (the sources of edges into %d)", v, got, want[v], v)
		}
	}
	for name, out := range outs {
		sameArrays(t, outs["el/e.txt"], out)
		_ = name
	}
	gb := filepath.Join(t.TempDir(), "gb")
	if _, err := graphbolt.Export(outs["el/e.txt"], gb, &graphbolt.Options{NoLink: true}); err != nil {
		t.Fatal(err)
	}
	s := npyInt64s(t, filepath.Join(gb, graphbolt.PathEdges))
	var gotPairs, wantPairs [][2]int64
	for i := range len(s) / 2 {
		gotPairs = append(gotPairs, [2]int64{s[i], s[len(s)/2+i]})
	}
	for i := range src {
		wantPairs = append(wantPairs, [2]int64{src[i], dst[i]})
	}
	cmp := func(a, b [2]int64) int {
		if c := a[0] - b[0]; c != 0 {
			return int(c)
		}
		return int(a[1] - b[1])
	}
	slices.SortFunc(gotPairs, cmp)
	slices.SortFunc(wantPairs, cmp)
	if !slices.Equal(gotPairs, wantPairs) {
		t.Errorf("export of the edge-list import has edges %v, want the file's %v", gotPairs, wantPairs)
	}
}

// unsortedDataset writes a graph whose neighbour lists are in an order of
// their own (as a relabelled copy keeps its source's order), with
// repeated neighbours and self loops, large enough that the import's
// sorter spills several runs at MinMemBytes.
func unsortedDataset(t *testing.T, dir string, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	b, err := storage.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.CreateCSR(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	for v := range n {
		nb := make([]int64, rng.IntN(40))
		for i := range nb {
			nb[i] = rng.Int64N(int64(n))
			if i > 0 && rng.IntN(8) == 0 {
				nb[i] = nb[rng.IntN(i)] // a repeat
			}
		}
		if err := c.Append(int64(v), nb); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(storage.Manifest{Name: "unsorted", NumNodes: int64(n), NumEdges: c.Edges()}); err != nil {
		t.Fatal(err)
	}
}

// TestGraphBoltRoundTripKeepsListOrder (I12): a neighbour list's order is
// data (the sampler draws positions), so export→import of a dataset whose
// lists are not sorted must give them back in the same order, through
// spilled runs too; with duplicates dropped the lists come back sorted.
func TestGraphBoltRoundTripKeepsListOrder(t *testing.T) {
	seed := testSeed(t)
	src := filepath.Join(t.TempDir(), "src")
	unsortedDataset(t, src, seed, 3000)
	gb := filepath.Join(t.TempDir(), "gb")
	if _, err := graphbolt.Export(src, gb, nil); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "back")
	o := *asGiven
	o.MemBytes = MinMemBytes
	rep, err := ImportGraphBolt(gb, back, &o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SortRuns < 2 {
		t.Errorf("only %d sort runs: the test should spill", rep.SortRuns)
	}
	sameArrays(t, src, back)

	// Without duplicates each list is sorted, as in the other formats.
	sorted := filepath.Join(t.TempDir(), "sorted")
	o.KeepDuplicates = false
	if _, err := ImportGraphBolt(gb, sorted, &o); err != nil {
		t.Fatal(err)
	}
	ip, ix := npyInt64s(t, filepath.Join(sorted, storage.FileIndptr)), npyInt64s(t, filepath.Join(sorted, storage.FileIndices))
	for v := range len(ip) - 1 {
		if l := ix[ip[v]:ip[v+1]]; !slices.IsSorted(l) {
			t.Fatalf("--keep-duplicates=false: list of %d not sorted: %v", v, l)
		}
	}
}

// TestGraphBoltRandomSplit (I13): a labelled GraphBolt dataset without a
// task gets a seeded random split of Options.SplitFrac over its
// labelled nodes, as the other formats do; one with sets keeps them and
// names the task in the report (C1).
func TestGraphBoltRandomSplit(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	g := storagetest.Graph{Adj: make([][]int64, 100), Labels: make([]int32, 100), NumClasses: 3}
	for v := range g.Adj {
		g.Adj[v] = []int64{int64((v + 1) % 100)}
		g.Labels[v] = int32(v%4) - 1 // 75 labelled
	}
	storagetest.Write(t, src, g)
	gb := filepath.Join(t.TempDir(), "gb")
	if _, err := graphbolt.Export(src, gb, nil); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(gb, graphbolt.MetadataName)
	b, _ := os.ReadFile(mpath)
	meta, _, ok := strings.Cut(string(b), "tasks:")
	if !ok {
		t.Fatalf("no tasks in\n%s", b)
	}
	if err := os.WriteFile(mpath, []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	imp := func(seed int64) (Report, loaded) {
		t.Helper()
		o := *asGiven
		o.SplitFrac, o.Seed = [3]float64{0.5, 0.25, 0.25}, seed
		out := filepath.Join(t.TempDir(), "out")
		rep, err := ImportGraphBolt(gb, out, &o)
		if err != nil {
			t.Fatal(err)
		}
		return rep, load(t, out)
	}
	rep, a := imp(3)
	if !rep.RandomSplit || rep.Split != "random" || rep.Train != 38 || rep.Valid != 19 || rep.Test != 19-1 {
		t.Errorf("report %+v: want a random split 38/19/18 of 75 labelled nodes", rep)
	}
	for k, sp := range a.splits {
		for _, v := range sp {
			if a.labels[v] < 0 {
				t.Errorf("split %d holds unlabelled node %d", k, v)
			}
		}
	}
	if _, b := imp(3); !reflect.DeepEqual(a.splits, b.splits) {
		t.Error("same seed, different split")
	}
	if _, b := imp(4); reflect.DeepEqual(a.splits, b.splits) {
		t.Error("--seed ignored: seeds 3 and 4 give the same split")
	}

	// With sets, the sets are the split, whatever SplitFrac says.
	src2 := filepath.Join(t.TempDir(), "src2")
	randomDataset(t, src2, 1, 50)
	gb2 := roundTrip(t, src2, nil)
	o := *asGiven
	o.SplitFrac = [3]float64{0.1, 0.1, 0.1}
	rep, err := ImportGraphBolt(gb2, filepath.Join(t.TempDir(), "o"), &o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RandomSplit || !strings.Contains(rep.String(), "split task node_classification: train 25, valid 12, test 6") {
		t.Errorf("report:\n%s", rep)
	}
}
