package partition

import (
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

var (
	update   = flag.Bool("update", false, "rewrite golden files under testdata/")
	seedFlag = flag.Int64("seed", 0, "seed for randomised tests (0: pick one and print it)")
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m)
}

// testSeed returns the -seed flag or a fresh seed, and logs it.
func testSeed(t testing.TB) int64 {
	s := *seedFlag
	if s == 0 {
		s = rand.Int64N(1 << 40)
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

// graph is an adjacency list plus training ids, before it becomes a
// dataset.
type graph struct {
	adj   [][]int64
	train []int64
}

func newGraph(n int) *graph { return &graph{adj: make([][]int64, n)} }

func (g *graph) edge(u, v int64) {
	if u == v {
		return
	}
	g.adj[u] = append(g.adj[u], v)
	g.adj[v] = append(g.adj[v], u)
}

// finish sorts and deduplicates every list.
func (g *graph) finish() {
	for v := range g.adj {
		slices.Sort(g.adj[v])
		g.adj[v] = slices.Compact(g.adj[v])
	}
	slices.Sort(g.train)
	g.train = slices.Compact(g.train)
}

// cliques builds c disjoint cliques of size s (ids contiguous).
func cliques(c, s int) *graph {
	g := newGraph(c * s)
	for b := range c {
		for i := range s {
			for j := i + 1; j < s; j++ {
				g.edge(int64(b*s+i), int64(b*s+j))
			}
		}
	}
	return g
}

// planted builds a planted-partition graph: n nodes in c communities
// (assigned at random, so ids do not reveal them), about deg neighbours
// per node of which a fraction pin inside the community, and a fraction
// trainFrac of training nodes.
func planted(n, c int, deg, pin, trainFrac float64, seed int64) (*graph, []int) {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	g := newGraph(n)
	comm := make([]int, n)
	members := make([][]int64, c)
	for v := range comm {
		comm[v] = r.IntN(c)
		members[comm[v]] = append(members[comm[v]], int64(v))
	}
	edges := int(float64(n) * deg / 2)
	for range edges {
		u := int64(r.IntN(n))
		var v int64
		if r.Float64() < pin {
			m := members[comm[u]]
			v = m[r.IntN(len(m))]
		} else {
			v = int64(r.IntN(n))
		}
		g.edge(u, v)
	}
	for v := range n {
		if r.Float64() < trainFrac {
			g.train = append(g.train, int64(v))
		}
	}
	g.finish()
	return g, comm
}

// write stores g as a dataset in dir.
func (g *graph) write(t testing.TB, dir string) *storage.Dataset {
	t.Helper()
	train := g.train
	if train == nil {
		train = []int64{}
	}
	return storagetest.Write(t, dir, storagetest.Graph{Adj: g.adj, Train: train, Symmetrized: true})
}

func openDataset(t testing.TB, dir string) *storage.Dataset {
	t.Helper()
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// defaultHashes is the Bloom filters' h at DefaultFalsePositive for a
// part of many members.
func defaultHashes() uint {
	_, h := slicedParams(1<<20, DefaultFalsePositive)
	return h
}

// readPart returns the bytes of partitioning name's part.npy in dir.
func readPart(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(dir, name), FilePart))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// importCora imports the bundled Cora (testdata/cora) into dir/name and
// opens it; the caller closes it.
func importCora(t testing.TB, dir, name string) *storage.Dataset {
	t.Helper()
	src := filepath.Join(dir, name)
	if _, err := importer.ImportOGB("../testdata/cora", src, nil); err != nil {
		t.Fatal(err)
	}
	return openDataset(t, src)
}
