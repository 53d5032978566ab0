package importer

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

const coraDir = "../../testdata/cora"

func TestCora(t *testing.T) {
	out := t.TempDir()
	rep, err := ImportOGB(coraDir, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	l := load(t, out)
	m := l.m
	if m.NumNodes != 2708 || m.NumEdges != 10556 || m.FeatDim != 1433 || m.NumClasses != 7 || !m.Symmetrized {
		t.Errorf("manifest %+v: want 2708 nodes, 10556 edges, dim 1433, 7 classes, symmetrised", m)
	}
	if len(l.splits[0]) != 140 || len(l.splits[1]) != 500 || len(l.splits[2]) != 1000 {
		t.Errorf("split sizes %d/%d/%d, want 140/500/1000", len(l.splits[0]), len(l.splits[1]), len(l.splits[2]))
	}
	if rep.EdgesRead != 5278 || rep.EdgesStored != 10556 || rep.SelfLoopsDropped != 0 || rep.DuplicatesDropped != 0 ||
		rep.Split != "planetoid" || rep.Labelled != 2708 || rep.BytesIn <= 0 || rep.BytesOut <= 0 {
		t.Errorf("report %+v", rep)
	}
	if m.SelfLoopsDropped != 0 || m.DuplicatesDropped != 0 || !strings.Contains(m.Source, "split=planetoid") {
		t.Errorf("manifest stats %+v", m)
	}
	// Planetoid: train is 0..139, valid 140..639, test 1708..2707.
	for k, first := range []int64{0, 140, 1708} {
		s := l.splits[k]
		if s[0] != first || s[len(s)-1] != first+int64(len(s))-1 || !slices.IsSorted(s) {
			t.Errorf("split %d: %d..%d", k, s[0], s[len(s)-1])
		}
	}
	// CSR is symmetric, sorted, free of self loops and duplicates.
	for v := int64(0); v < m.NumNodes; v++ {
		nb := l.indices[l.indptr[v]:l.indptr[v+1]]
		for i, u := range nb {
			if u == v || (i > 0 && nb[i-1] >= u) {
				t.Fatalf("node %d: neighbours %v not strictly ascending without self loops", v, nb)
			}
			if _, ok := slices.BinarySearch(l.indices[l.indptr[u]:l.indptr[u+1]], v); !ok {
				t.Fatalf("edge (%d,%d) has no reverse", v, u)
			}
		}
	}
	// Features and labels against the raw CSV.
	feats := readGzLines(t, filepath.Join(coraDir, "raw/node-feat.csv.gz"))
	labels := readGzLines(t, filepath.Join(coraDir, "raw/node-label.csv.gz"))
	for _, v := range []int{0, 1, 1234, 2707} {
		fields := strings.Split(feats[v], ",")
		for i, f := range fields {
			x, _ := strconv.ParseFloat(f, 32)
			if l.feats[v][i] != float32(x) {
				t.Fatalf("node %d feature %d = %v, raw CSV %q", v, i, l.feats[v][i], f)
			}
		}
	}
	for v, s := range labels {
		if want, _ := strconv.Atoi(s); l.labels[v] != int32(want) {
			t.Fatalf("node %d label %d, raw CSV %q", v, l.labels[v], s)
		}
	}
	// Edge 0 of the raw file is (0, 633).
	if _, ok := slices.BinarySearch(l.indices[l.indptr[0]:l.indptr[1]], 633); !ok {
		t.Error("edge (0, 633) missing")
	}
}

func readGzLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// smallOGB is a 4-node OGB raw layout: path (0,1,2,3) plus a self loop.
func smallOGB() map[string]any {
	return map[string]any{
		"raw/num-node-list.csv.gz": "4\n",
		"raw/num-edge-list.csv.gz": "4\n",
		"raw/edge.csv.gz":          "0,1\n1,2\n2,3\n3,3\n",
		"raw/node-feat.csv.gz":     "0.5,1,2\n1,1,1\n2,2,2\n3,3,3.25\n",
		"raw/node-label.csv.gz":    "0\n1\nnan\n2.0\n",
		"split/s/train.csv.gz":     "1\n0\n",
		"split/s/valid.csv.gz":     "3\n",
		"split/s/test.csv.gz":      "2\n",
	}
}

func TestSmallOGB(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	writeFiles(t, src, smallOGB())
	rep, err := ImportOGB(src, out, &Options{Name: "small"})
	if err != nil {
		t.Fatal(err)
	}
	l := load(t, out)
	want := loaded{
		indptr:  []int64{0, 1, 3, 5, 6},
		indices: []int64{1, 0, 2, 1, 3, 2},
		feats:   [][]float32{{0.5, 1, 2}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3.25}},
		labels:  []int32{0, 1, -1, 2},
		splits:  [3][]int64{{0, 1}, {3}, {2}},
	}
	want.m = l.m
	if !reflect.DeepEqual(l, want) {
		t.Errorf("got %+v\nwant %+v", l, want)
	}
	if l.m.Name != "small" || l.m.NumClasses != 3 || l.m.SelfLoopsDropped != 1 || rep.Labelled != 3 {
		t.Errorf("manifest %+v report %+v", l.m, rep)
	}
	// I17: node 2 is unlabelled (nan) and in the test split.
	if rep.SplitUnlabelled != [3]int64{0, 0, 1} || rep.FirstSplitUnlabelled != 2 ||
		!strings.Contains(rep.String(), "warning: split nodes without a label (training skips them): train 0, valid 0, test 1; first node 2") {
		t.Errorf("unlabelled split nodes not reported: %v %d\n%s", rep.SplitUnlabelled, rep.FirstSplitUnlabelled, rep)
	}
	// A random split draws labelled nodes only.
	files := smallOGB()
	for _, k := range []string{"split/s/train.csv.gz", "split/s/valid.csv.gz", "split/s/test.csv.gz"} {
		delete(files, k)
	}
	src2 := t.TempDir()
	writeFiles(t, src2, files)
	if rep, err := ImportOGB(src2, t.TempDir(), nil); err != nil || rep.SplitUnlabelled != [3]int64{} {
		t.Errorf("random split: %v %v", rep.SplitUnlabelled, err)
	}
}

// igbFiles is a 5-node IGB layout; headerless drops every .npy header.
func igbFiles(t testing.TB, headerless bool) map[string]any {
	feat := []float32{0, 1, 1, 2, 2, 3, 3, 4, 4, 5}
	label := []float32{0, 1, float32(math.NaN()), 1, 3}
	label2K := []int64{10, 11, 12, 13, 14}
	edges := []int64{0, 1, 1, 2, 2, 3, 3, 4, 4, 0, 1, 0}
	enc := func(d npy.DType, shape []int64, v any) []byte {
		if headerless {
			return rawBytes(t, v)
		}
		return npyBytes(t, d, shape, v)
	}
	return map[string]any{
		"paper/node_feat.npy":                enc(npy.Float32, []int64{5, 2}, feat),
		"paper/node_label_19.npy":            enc(npy.Float32, []int64{5}, label),
		"paper/node_label_2K.npy":            enc(npy.Int64, []int64{5, 1}, label2K),
		"paper__cites__paper/edge_index.npy": enc(npy.Int64, []int64{6, 2}, edges),
	}
}

var igbRaw = map[string]RawSpec{
	RoleFeat:  {DType: npy.Float32, Shape: []int64{5, 2}},
	RoleLabel: {DType: npy.Float32, Shape: []int64{5}},
	RoleEdges: {DType: npy.Int64, Shape: []int64{6, 2}},
}

func TestIGB(t *testing.T) {
	src, raw := t.TempDir(), t.TempDir()
	writeFiles(t, src, igbFiles(t, false))
	writeFiles(t, raw, igbFiles(t, true))
	outH, outR := t.TempDir(), t.TempDir()
	rep, err := ImportNPY(src, outH, &Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ImportNPY(raw, outR, &Options{Seed: 7, Raw: igbRaw}); err != nil {
		t.Fatal(err)
	}
	sameArrays(t, outH, outR)
	l := load(t, outH)
	// Edges 0-1,1-2,2-3,3-4,4-0 symmetrised; (1,0) duplicates (0,1)'s reverse twice.
	wantPtr := []int64{0, 2, 4, 6, 8, 10}
	wantIdx := []int64{1, 4, 0, 2, 1, 3, 2, 4, 0, 3}
	if !reflect.DeepEqual(l.indptr, wantPtr) || !reflect.DeepEqual(l.indices, wantIdx) {
		t.Errorf("CSR %v %v, want %v %v", l.indptr, l.indices, wantPtr, wantIdx)
	}
	if rep.DuplicatesDropped != 2 || rep.EdgesRead != 6 || rep.EdgesStored != 10 {
		t.Errorf("report %+v", rep)
	}
	if !reflect.DeepEqual(l.labels, []int32{0, 1, -1, 1, 3}) || l.m.NumClasses != 4 || l.m.FeatDim != 2 {
		t.Errorf("labels %v classes %d dim %d", l.labels, l.m.NumClasses, l.m.FeatDim)
	}
	if !rep.RandomSplit || len(l.splits[0])+len(l.splits[1])+len(l.splits[2]) != 4 {
		t.Errorf("random split %v over 4 labelled nodes", l.splits)
	}
	if l.feats[4][1] != 5 {
		t.Errorf("features %v", l.feats)
	}

	// The same edges as a [2, E] array.
	srcT, outT := t.TempDir(), t.TempDir()
	writeFiles(t, srcT, igbFiles(t, false))
	writeFiles(t, srcT, map[string]any{"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int32, []int64{2, 6},
		[]int32{0, 1, 2, 3, 4, 1, 1, 2, 3, 4, 0, 0})})
	if _, err := ImportNPY(srcT, outT, &Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	sameArrays(t, outH, outT)

	out2K := t.TempDir()
	if _, err := ImportNPY(src, out2K, &Options{LabelFile: "node_label_2K.npy"}); err != nil {
		t.Fatal(err)
	}
	if l := load(t, out2K); !reflect.DeepEqual(l.labels, []int32{10, 11, 12, 13, 14}) || l.m.NumClasses != 15 {
		t.Errorf("2K labels %v classes %d", l.labels, l.m.NumClasses)
	}
}

// papersNPZ is a papers100M-style source: edge_index [2, E], float16
// features, float64 labels with NaN, and a split named "time".
func papersNPZ(t testing.TB, method uint16) map[string]any {
	const n = 6
	src := []int64{0, 1, 2, 3, 4, 5, 0}
	dst := []int64{1, 2, 3, 4, 5, 0, 0}
	feat := make([]float16.Float16, n*3)
	for i := range feat {
		feat[i] = float16.Fromfloat32(float32(i) / 8)
	}
	nan := math.NaN()
	return map[string]any{
		"raw/data.npz": zipBytes(t, method, map[string][]byte{
			"edge_index.npy":     npyBytes(t, npy.Int64, []int64{2, 7}, append(src, dst...)),
			"node_feat.npy":      npyBytes(t, npy.Float16, []int64{n, 3}, feat),
			"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{n}),
		}),
		"raw/node-label.npz": zipBytes(t, method, map[string][]byte{
			"node_label.npy": npyBytes(t, npy.Float64, []int64{n, 1}, []float64{1, nan, 0, 2, nan, 1}),
		}),
		"split/time/train.csv.gz": "0\n3\n",
		"split/time/valid.csv.gz": "5\n",
		"split/time/test.csv.gz":  "2\n",
	}
}

func TestNPZStoredVsDeflated(t *testing.T) {
	var outs []string
	for _, method := range []uint16{0 /* zip.Store */, 8 /* zip.Deflate */} {
		src, out := t.TempDir(), t.TempDir()
		writeFiles(t, src, papersNPZ(t, method))
		rep, err := ImportOGB(src, out, nil)
		if err != nil {
			t.Fatalf("method %d: %v", method, err)
		}
		if rep.SelfLoopsDropped != 1 || rep.EdgesStored != 12 || rep.Split != "time" {
			t.Errorf("method %d: report %+v", method, rep)
		}
		outs = append(outs, out)
	}
	sameArrays(t, outs[0], outs[1])
	l := load(t, outs[0])
	if !reflect.DeepEqual(l.labels, []int32{1, -1, 0, 2, -1, 1}) || l.m.NumClasses != 3 {
		t.Errorf("labels %v classes %d", l.labels, l.m.NumClasses)
	}
	if !reflect.DeepEqual(l.indptr, []int64{0, 2, 4, 6, 8, 10, 12}) || !reflect.DeepEqual(l.indices[:2], []int64{1, 5}) {
		t.Errorf("CSR %v %v", l.indptr, l.indices)
	}
	if l.feats[5][2] != 17.0/8 || l.m.FeatDType != "float32" {
		t.Errorf("features %v (%s)", l.feats[5], l.m.FeatDType)
	}
	if !reflect.DeepEqual(l.splits, [3][]int64{{0, 3}, {5}, {2}}) {
		t.Errorf("splits %v", l.splits)
	}
}

// handEdges has a self loop (2,2), a duplicate (0,1), a reverse pair
// (1,2)/(2,1) and an isolated trailing node 4 (NumNodes 5).
const handEdges = "# comment\n0 1\n0 1\n1\t2\n2 1\n2 2\n3 0\n"

func TestEdgeListCSR(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		ptr, idx   []int64
		loops, dup int64
	}{
		{"default", Options{NumNodes: 5},
			[]int64{0, 2, 4, 5, 6, 6}, []int64{1, 3, 0, 2, 1, 0}, 1, 4},
		// Directed: line "u v" goes to v's list (row v holds u), so row 0
		// holds 3 (from "3 0") and row 1 holds 0 and 2.
		{"directed", Options{NumNodes: 5, Directed: true},
			[]int64{0, 1, 3, 4, 4, 4}, []int64{3, 0, 2, 1}, 1, 1},
		{"keep self loops", Options{NumNodes: 5, KeepSelfLoops: true},
			[]int64{0, 2, 4, 6, 7, 7}, []int64{1, 3, 0, 2, 1, 2, 0}, 0, 4},
		{"keep duplicates", Options{NumNodes: 5, KeepDuplicates: true},
			[]int64{0, 3, 7, 9, 10, 10}, []int64{1, 1, 3, 0, 0, 2, 2, 1, 1, 0}, 1, 0},
		{"directed, keep all", Options{NumNodes: 5, Directed: true, KeepDuplicates: true, KeepSelfLoops: true},
			[]int64{0, 1, 4, 6, 6, 6}, []int64{3, 0, 0, 2, 1, 2}, 0, 0},
		{"inferred N", Options{},
			[]int64{0, 2, 4, 5, 6}, []int64{1, 3, 0, 2, 1, 0}, 1, 4},
		{"tiny memory", Options{NumNodes: 5, MemBytes: MinMemBytes},
			[]int64{0, 2, 4, 5, 6, 6}, []int64{1, 3, 0, 2, 1, 0}, 1, 4},
	}
	dir := t.TempDir()
	edges := filepath.Join(dir, "hand.txt")
	writeFiles(t, dir, map[string]any{"hand.txt": handEdges, "hand.txt.gz": handEdges})
	for _, tc := range tests {
		for _, file := range []string{edges, edges + ".gz"} {
			out := t.TempDir()
			rep, err := ImportEdgeList(file, out, &tc.opts)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			l := load(t, out)
			if !reflect.DeepEqual(l.indptr, tc.ptr) || !reflect.DeepEqual(l.indices, tc.idx) {
				t.Errorf("%s (%s): CSR %v %v, want %v %v", tc.name, filepath.Base(file), l.indptr, l.indices, tc.ptr, tc.idx)
			}
			if rep.SelfLoopsDropped != tc.loops || rep.DuplicatesDropped != tc.dup || rep.EdgesRead != 6 ||
				l.m.SelfLoopsDropped != tc.loops || l.m.DuplicatesDropped != tc.dup || l.m.NumEdges != int64(len(tc.idx)) {
				t.Errorf("%s: report %+v manifest %+v, want %d self loops, %d duplicates", tc.name, rep, l.m, tc.loops, tc.dup)
			}
			if l.m.Name != "hand" || l.m.Symmetrized == tc.opts.Directed {
				t.Errorf("%s: name %q symmetrized %v", tc.name, l.m.Name, l.m.Symmetrized)
			}
		}
	}
}

func TestEdgeListFeaturesLabels(t *testing.T) {
	dir := t.TempDir()
	feat := make([]float32, 4*3)
	for i := range feat {
		feat[i] = float32(i)*0.3337 - 1.5
	}
	writeFiles(t, dir, map[string]any{
		"e.txt":      "0,1\n1,2\n2,3\n",
		"feat.npy":   npyBytes(t, npy.Float32, []int64{4, 3}, feat),
		"feat.csv":   "1,2\n3,4\n5,6\n7,8\n",
		"labels.txt": "0\n1\n-1\n1\n",
		"labels.npy": npyBytes(t, npy.Int32, []int64{4}, []int32{0, 1, -1, 1}),
	})
	p := func(s string) string { return filepath.Join(dir, s) }
	// float16 round trip through the .npy path.
	out := t.TempDir()
	rep, err := ImportEdgeList(p("e.txt"), out, &Options{Delim: ',', FeatFile: p("feat.npy"), LabelFile: p("labels.npy"), FeatDType: "float16"})
	if err != nil {
		t.Fatal(err)
	}
	l := load(t, out)
	if l.m.FeatDType != "float16" || rep.FeatDim != 3 {
		t.Fatalf("feat dtype %s dim %d", l.m.FeatDType, rep.FeatDim)
	}
	for v := range 4 {
		for i := range 3 {
			want := feat[v*3+i]
			if !f32near(l.feats[v][i], want, float32(math.Abs(float64(want)))*(1.0/2048)+1e-7) {
				t.Errorf("feature [%d,%d] = %v, want %v within half precision", v, i, l.feats[v][i], want)
			}
		}
	}
	if !reflect.DeepEqual(l.labels, []int32{0, 1, -1, 1}) || l.m.NumClasses != 2 {
		t.Errorf("labels %v classes %d", l.labels, l.m.NumClasses)
	}
	// CSV features and text labels.
	out = t.TempDir()
	if _, err := ImportEdgeList(p("e.txt"), out, &Options{Delim: ',', FeatFile: p("feat.csv"), LabelFile: p("labels.txt"), NumClasses: 5}); err != nil {
		t.Fatal(err)
	}
	l = load(t, out)
	if !reflect.DeepEqual(l.feats, [][]float32{{1, 2}, {3, 4}, {5, 6}, {7, 8}}) || l.m.NumClasses != 5 {
		t.Errorf("features %v classes %d", l.feats, l.m.NumClasses)
	}
	// A stray huge label is refused, naming its node, unless
	// --num-classes states that many; nothing is left that looks done.
	writeFiles(t, dir, map[string]any{"stray.txt": "0\n1\n5000000\n1\n"})
	out = filepath.Join(t.TempDir(), "stray")
	_, err = ImportEdgeList(p("e.txt"), out, &Options{Delim: ',', LabelFile: p("stray.txt")})
	if err == nil || !strings.Contains(err.Error(), "node 2: label 5000000 would make 5000001 classes for 4 labelled nodes") {
		t.Errorf("stray label: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "dataset.json")); err == nil {
		t.Error("a refused import left a manifest")
	}
	if _, err := ImportEdgeList(p("e.txt"), t.TempDir(), &Options{Delim: ',', LabelFile: p("stray.txt"), NumClasses: 5000001, Force: true}); err != nil {
		t.Errorf("stated class count: %v", err)
	}
}

func TestRandomSplit(t *testing.T) {
	dir := t.TempDir()
	var labels strings.Builder
	labelled := 0
	for v := range 1000 {
		if v%7 == 3 {
			labels.WriteString("nan\n")
			continue
		}
		labelled++
		fmt.Fprintf(&labels, "%d\n", v%5)
	}
	writeFiles(t, dir, map[string]any{"e.txt": "0 999\n", "l.txt": labels.String()})
	imp := func(seed int64, frac [3]float64) loaded {
		out := t.TempDir()
		if _, err := ImportEdgeList(filepath.Join(dir, "e.txt"), out, &Options{LabelFile: filepath.Join(dir, "l.txt"), Seed: seed, SplitFrac: frac}); err != nil {
			t.Fatal(err)
		}
		return load(t, out)
	}
	a, b, c := imp(1, [3]float64{}), imp(1, [3]float64{}), imp(2, [3]float64{})
	if !reflect.DeepEqual(a.splits, b.splits) {
		t.Error("same seed, different splits")
	}
	if reflect.DeepEqual(a.splits, c.splits) {
		t.Error("different seeds, same splits")
	}
	L := float64(labelled)
	seen := map[int64]bool{}
	for k, s := range a.splits {
		if int64(len(s)) != int64(math.Round(L*DefaultSplitFrac[k])) || !slices.IsSorted(s) {
			t.Errorf("split %d: %d ids (sorted %v), want %v", k, len(s), slices.IsSorted(s), math.Round(L*DefaultSplitFrac[k]))
		}
		for _, v := range s {
			if seen[v] || a.labels[v] < 0 {
				t.Fatalf("node %d: repeated or unlabelled in split %d", v, k)
			}
			seen[v] = true
		}
	}
	if a.m.Seed != 1 {
		t.Errorf("manifest seed %d", a.m.Seed)
	}
	d := imp(3, [3]float64{0.1, 0, 0.05})
	if len(d.splits[0]) != int(math.Round(L*0.1)) || len(d.splits[1]) != 0 || len(d.splits[2]) != int(math.Round(L*0.05)) {
		t.Errorf("custom fractions: %d/%d/%d", len(d.splits[0]), len(d.splits[1]), len(d.splits[2]))
	}
}

// TestSpillEqualsInMemory imports a random edge list with the smallest
// sort budget, which spills many runs, and with the default budget, which
// spills none, and checks the datasets are identical.
func TestSpillEqualsInMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	const n, e = 3000, 60000
	var b strings.Builder
	for range e {
		fmt.Fprintf(&b, "%d %d\n", rng.IntN(n), rng.IntN(n))
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]any{"r.txt.gz": b.String()})
	small, big := t.TempDir(), t.TempDir()
	rs, err := ImportEdgeList(filepath.Join(dir, "r.txt.gz"), small, &Options{NumNodes: n, MemBytes: MinMemBytes, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ImportEdgeList(filepath.Join(dir, "r.txt.gz"), big, &Options{NumNodes: n})
	if err != nil {
		t.Fatal(err)
	}
	if rs.SortRuns < 10 || rb.SortRuns != 0 {
		t.Errorf("runs: tiny budget %d (want many), default %d (want 0)", rs.SortRuns, rb.SortRuns)
	}
	if rs.DuplicatesDropped != rb.DuplicatesDropped || rs.EdgesStored != rb.EdgesStored {
		t.Errorf("reports differ: %+v vs %+v", rs, rb)
	}
	sameArrays(t, small, big)
	t.Logf("%d runs, %d bytes spilled, %d edges stored, %d duplicates", rs.SortRuns, rs.SortSpilledBytes, rs.EdgesStored, rs.DuplicatesDropped)
}

func TestForce(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	writeFiles(t, src, smallOGB())
	if _, err := ImportOGB(src, out, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportOGB(src, out, nil); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second import: %v, want ErrExists", err)
	}
	if _, err := ImportOGB(src, out, &Options{Force: true, Split: "s"}); err != nil {
		t.Fatal(err)
	}
	load(t, out)
}

func TestOptionsValidate(t *testing.T) {
	var nilOpts *Options
	good := []*Options{nilOpts, {}, {FeatDType: "float16"}, {SplitFrac: [3]float64{0.5, 0.5, 0}}, {MemBytes: MinMemBytes},
		{Raw: map[string]RawSpec{RoleFeat: {DType: npy.Float32, Shape: []int64{3, 2}}}}, {Delim: ','}, {Delim: '\t', Comment: "%"}}
	for _, o := range good {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := []*Options{{FeatDType: "float64"}, {NumClasses: -1}, {SplitFrac: [3]float64{0.7, 0.7, 0}}, {SplitFrac: [3]float64{-0.1, 0, 0}},
		{SplitFrac: [3]float64{math.NaN(), 0, 0}}, {MemBytes: 10}, {NumNodes: -2}, {Raw: map[string]RawSpec{"x": {DType: npy.Float32, Shape: []int64{1}}}},
		{Raw: map[string]RawSpec{RoleFeat: {Shape: []int64{1}}}}, {Raw: map[string]RawSpec{RoleFeat: {DType: npy.Int64}}},
		{Raw: map[string]RawSpec{RoleFeat: {DType: npy.Int64, Shape: []int64{-1}}}}, {Delim: '1'}, {Comment: "a\nb"}}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := ImportEdgeList("nonexistent", t.TempDir(), &Options{FeatDType: "int8"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("import with bad options: %v", err)
	}
}

// recReporter counts progress tasks started and finished.
type recReporter struct {
	mu            sync.Mutex
	started, done int
	added         map[string]int64
}

type recTask struct {
	r    *recReporter
	desc string
}

func (r *recReporter) Start(desc string, total int64, unit progress.Unit) progress.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
	return &recTask{r, desc}
}

func (t *recTask) Add(n int64) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if t.r.added == nil {
		t.r.added = map[string]int64{}
	}
	t.r.added[t.desc] += n
}
func (t *recTask) Describe(string) {}
func (t *recTask) Done() {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.r.done++
}

// Every progress task started is finished, on success and on failure.
func TestProgressAndLogging(t *testing.T) {
	var logs strings.Builder
	for _, feat := range []string{"1,2,3\n1,2,3\n1,2,3\n1,2,3\n", "1,2,3\n1,2\n"} {
		src := t.TempDir()
		files := smallOGB()
		files["raw/node-feat.csv.gz"] = feat
		writeFiles(t, src, files)
		rec := &recReporter{}
		logs.Reset()
		_, err := ImportOGB(src, t.TempDir(), &Options{Progress: rec, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if rec.started < 2 || rec.started != rec.done {
			t.Errorf("err %v: %d tasks started, %d done", err, rec.started, rec.done)
		}
		if err == nil && (rec.added["edges"] != 6 || rec.added["features"] != 4 || !strings.Contains(logs.String(), "import finished")) {
			t.Errorf("progress %v, logs %s", rec.added, logs.String())
		}
		if err != nil && !strings.Contains(logs.String(), "import failed") {
			t.Errorf("logs %s", logs.String())
		}
	}
}
