package importer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
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
	if _, err := graphbolt.Export(src, gb, o); err != nil {
		t.Fatal(err)
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
