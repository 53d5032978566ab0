package distdgl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/interop/internal/exportdir"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// readNPY loads a whole .npy file (test sizes only).
func readNPY(t *testing.T, path string) (npy.Header, []byte) { return storagetest.ReadNPY(t, path) }

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// check reads the export in out back and compares it with the dataset and
// partitioning it came from.
func check(t *testing.T, dir, out, part string, chunks int, labelDType npy.DType) {
	t.Helper()
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pt, err := partition.Open(dir, part)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	var meta Metadata
	b, err := os.ReadFile(filepath.Join(out, MetadataName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	n, e := d.NumNodes(), d.NumEdges()
	if len(meta.NumNodesPerChunk[0]) != chunks || len(meta.NumEdgesPerChunk[0]) != chunks {
		t.Fatalf("chunks %v %v, want %d", meta.NumNodesPerChunk, meta.NumEdgesPerChunk, chunks)
	}
	// Every edge, in CSR order: "u v" for each neighbour u of v.
	var want []string
	for v := range n {
		nb := d.Neighbors(v)
		for i := range nb.Len() {
			want = append(want, fmt.Sprintf("%d %d", nb.At(i), v))
		}
	}
	var got []string
	es := meta.Edges[EdgeType]
	if es.Format.Name != "csv" || es.Format.Delimiter != " " || len(es.Data) != chunks {
		t.Fatalf("edges spec %+v", es)
	}
	for c, p := range es.Data {
		lines := readLines(t, filepath.Join(out, p))
		if int64(len(lines)) != meta.NumEdgesPerChunk[0][c] {
			t.Errorf("%s: %d lines, metadata says %d", p, len(lines), meta.NumEdgesPerChunk[0][c])
		}
		got = append(got, lines...)
	}
	if int64(len(got)) != e || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("edges differ: %d lines, want %d", len(got), e)
	}
	// Node data: concatenate the chunks and compare every row.
	cat := func(name string) (npy.Header, []byte) {
		var all []byte
		var h npy.Header
		spec := meta.NodeData[NodeType][name]
		for c, p := range spec.Data {
			hh, data := readNPY(t, filepath.Join(out, p))
			if hh.Shape[0] != meta.NumNodesPerChunk[0][c] {
				t.Errorf("%s: %d rows, metadata says %d", p, hh.Shape[0], meta.NumNodesPerChunk[0][c])
			}
			h = hh
			all = append(all, data...)
		}
		return h, all
	}
	if d.FeatDim() > 0 {
		h, all := cat("feat")
		if h.DType.String() != d.Manifest().FeatDType || h.Shape[1] != int64(d.FeatDim()) {
			t.Errorf("feat %v %v", h.DType, h.Shape)
		}
		for v := range n {
			r := d.FeatureBytes(v)
			if string(all[v*int64(len(r)):(v+1)*int64(len(r))]) != string(r) {
				t.Fatalf("feature row %d differs", v)
			}
		}
	}
	if lab := d.Labels(); lab != nil {
		h, all := cat("label")
		if h.DType != labelDType {
			t.Errorf("label dtype %v, want %v", h.DType, labelDType)
		}
		for v, c := range lab {
			var x int64
			if labelDType == npy.Int32 {
				x = int64(int32(uint32(all[4*v]) | uint32(all[4*v+1])<<8 | uint32(all[4*v+2])<<16 | uint32(all[4*v+3])<<24))
			} else {
				for j := range 8 {
					x |= int64(all[8*v+j]) << (8 * j)
				}
			}
			if x != int64(c) {
				t.Fatalf("label of %d = %d, want %d", v, x, c)
			}
		}
	}
	for k, sp := range [][]int64{d.TrainIdx(), d.ValidIdx(), d.TestIdx()} {
		name := [3]string{"train_mask", "val_mask", "test_mask"}[k]
		if d.Manifest().File([3]string{storage.FileTrain, storage.FileValid, storage.FileTest}[k]) == nil {
			if _, ok := meta.NodeData[NodeType][name]; ok {
				t.Errorf("%s exported without a split", name)
			}
			continue
		}
		_, all := cat(name)
		in := map[int64]bool{}
		for _, v := range sp {
			in[v] = true
		}
		for v := range n {
			if (all[v] == 1) != in[v] || all[v] > 1 {
				t.Fatalf("%s[%d] = %d, want %v", name, v, all[v], in[v])
			}
		}
	}
	// The assignment matches part.npy.
	lines := readLines(t, filepath.Join(out, PartitionsDir, NodeType+".txt"))
	if int64(len(lines)) != n {
		t.Fatalf("%d assignment lines, want %d", len(lines), n)
	}
	for v, l := range lines {
		if p, err := strconv.Atoi(l); err != nil || int32(p) != pt.Part()[v] {
			t.Fatalf("assignment line %d = %q, want %d", v, l, pt.Part()[v])
		}
	}
	var pm PartitionMeta
	b, _ = os.ReadFile(filepath.Join(out, PartitionsDir, PartitionMetaName))
	if err := json.Unmarshal(b, &pm); err != nil || pm.NumParts != pt.K() || pm.Version != "1.0.0" || (pm.AlgoName != "metis" && pm.AlgoName != "random") {
		t.Errorf("partition_meta %+v %v", pm, err)
	}
}

func partitionIt(t *testing.T, dir string, k int, method partition.Method) {
	t.Helper()
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := partition.Run(d, &partition.Options{Parts: k, FirstLevel: k, Method: method, Force: true}); err != nil {
		t.Fatal(err)
	}
}

func TestExportCora(t *testing.T) {
	dir := t.TempDir()
	if _, err := importer.ImportOGB("../../testdata/cora", dir, nil); err != nil {
		t.Fatal(err)
	}
	partitionIt(t, dir, 4, partition.Fennel)
	out := filepath.Join(t.TempDir(), "out")
	rep, err := Export(dir, out, &Options{Partition: "fennel"})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	check(t, dir, out, "fennel", 4, npy.Int64)
	if rep.UnlabelledMasked != [3]int64{} {
		t.Errorf("Cora labels every node, UnlabelledMasked %v", rep.UnlabelledMasked)
	}
	// An existing export needs Force.
	if _, err := Export(dir, out, &Options{Partition: "fennel"}); !errors.Is(err, exportdir.ErrExists) {
		t.Fatalf("re-export without Force: %v, want ErrExists", err)
	}
	if _, err := Export(dir, out, &Options{Partition: "fennel", Force: true, NumChunks: 3, LabelDType: npy.Int32, MemBytes: MinMemBytes}); err != nil {
		t.Fatal(err)
	}
	check(t, dir, out, "fennel", 3, npy.Int32)
}

func TestExportRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	for _, n := range []int{1, 2, 50, 400} {
		dir := t.TempDir()
		g := storagetest.Graph{Adj: make([][]int64, n), FeatDim: 3, FeatDType: "float16", Labels: make([]int32, n), NumClasses: 3}
		for v := range g.Adj {
			for range rng.IntN(5) {
				g.Adj[v] = append(g.Adj[v], rng.Int64N(int64(n)))
			}
			g.Labels[v] = int32(rng.IntN(4)) - 1
			switch rng.IntN(4) {
			case 0:
				g.Train = append(g.Train, int64(v))
			case 1:
				g.Valid = append(g.Valid, int64(v))
			case 2:
				g.Test = append(g.Test, int64(v))
			}
		}
		g.Feature = func(v int64, row []float32) { row[0], row[2] = float32(v), -float32(v)/4 }
		storagetest.Write(t, dir, g)
		partitionIt(t, dir, 1+rng.IntN(min(n, 8)), partition.Random)
		chunks := 1 + rng.IntN(n)
		out := filepath.Join(t.TempDir(), "out")
		rep, err := Export(dir, out, &Options{Partition: "random", NumChunks: chunks, MemBytes: MinMemBytes})
		if err != nil {
			t.Fatal(err)
		}
		check(t, dir, out, "random", chunks, npy.Int64)
		// Masked nodes with label -1 are counted (DGL's loss fails on them).
		var want [3]int64
		for k, sp := range [][]int64{g.Train, g.Valid, g.Test} {
			for _, v := range sp {
				if g.Labels[v] == -1 {
					want[k]++
				}
			}
		}
		if rep.UnlabelledMasked != want {
			t.Errorf("n=%d: UnlabelledMasked %v, want %v", n, rep.UnlabelledMasked, want)
		}
		if warned := strings.Contains(rep.String(), "label -1"); warned != (want != [3]int64{}) {
			t.Errorf("n=%d: report warns %v with %v unlabelled:\n%s", n, warned, want, rep)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []*Options{nil, {}, {Partition: "p", NumChunks: -1}, {Partition: "p", LabelDType: npy.Float32}, {Partition: "p", MemBytes: 5}} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}

// TestExportSyncsBeforeMetadata: the chunk files are committed without an
// fsync each (Defer), so the export must make them durable with one
// syncfs of OUT after the last of them is in place and before
// metadata.json vouches for them. Nothing else checks that the call is
// there: without it every other test passes, and a crash after the
// metadata's rename could leave a complete-looking export with empty
// chunk files.
func TestExportSyncsBeforeMetadata(t *testing.T) {
	dir := t.TempDir()
	g := storagetest.Graph{Adj: [][]int64{{1}, {2}, {0}, {}}, FeatDim: 2, Labels: []int32{0, 1, 0, 1}, NumClasses: 2, Train: []int64{0, 1}}
	storagetest.Write(t, dir, g)
	partitionIt(t, dir, 2, partition.Random)
	out := filepath.Join(t.TempDir(), "out")
	var calls []string
	orig := syncFS
	t.Cleanup(func() { syncFS = orig })
	syncFS = func(path string) error {
		calls = append(calls, path)
		if _, err := os.Stat(filepath.Join(out, MetadataName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("syncfs with %s already written (%v)", MetadataName, err)
		}
		var files, temps int
		err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir():
			case strings.Contains(d.Name(), ".tmp-"):
				temps++
			default:
				files++
			}
			return nil
		})
		if err != nil || temps > 0 || files == 0 {
			t.Errorf("syncfs with %d files and %d temporary files in place (%v), want every chunk file committed", files, temps, err)
		}
		return orig(path)
	}
	if _, err := Export(dir, out, &Options{Partition: "random", NumChunks: 2, MemBytes: MinMemBytes}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] != out {
		t.Errorf("syncfs calls %q, want one of %s", calls, out)
	}
}
