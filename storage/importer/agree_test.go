package importer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// agreeGraph is a random graph with features (multiples of 1/8, exact in
// float16, float32, float64 and text) and labels (-1 or NaN unlabelled).
type agreeGraph struct {
	n, dim   int
	src, dst []int64
	feat     []float32 // n × dim
	label    []int64   // -1: unlabelled
}

func newAgreeGraph(rng *rand.Rand) agreeGraph {
	g := agreeGraph{n: 1 + rng.IntN(40), dim: 1 + rng.IntN(4)}
	for range 1 + rng.IntN(120) {
		u := rng.Int64N(int64(g.n))
		v := rng.Int64N(int64(g.n))
		switch rng.IntN(8) {
		case 0:
			v = u // a self loop
		case 1:
			if len(g.src) > 0 { // a duplicate, either way round
				i := rng.IntN(len(g.src))
				u, v = g.src[i], g.dst[i]
				if rng.IntN(2) == 0 {
					u, v = v, u
				}
			}
		}
		g.src, g.dst = append(g.src, u), append(g.dst, v)
	}
	// Node n-1 gets an edge, so that the largest id + 1 is n.
	g.src, g.dst = append(g.src, int64(g.n-1)), append(g.dst, rng.Int64N(int64(g.n)))
	for range g.n * g.dim {
		g.feat = append(g.feat, float32(rng.IntN(2001)-1000)/8)
	}
	for range g.n {
		g.label = append(g.label, int64(rng.IntN(6))-1)
	}
	return g
}

// csr is what the import must store, from the documented rules: edge u→v
// puts u in v's row (and v in u's when symmetrising), self loops once,
// duplicates dropped unless kept, rows ascending.
func (g agreeGraph) csr(o *Options) (indptr, indices []int64) {
	rows := make([][]int64, g.n)
	for i, u := range g.src {
		v := g.dst[i]
		if u == v {
			if o.KeepSelfLoops {
				rows[v] = append(rows[v], u)
			}
			continue
		}
		rows[v] = append(rows[v], u)
		if !o.Directed {
			rows[u] = append(rows[u], v)
		}
	}
	indptr = []int64{0}
	for _, r := range rows {
		slices.Sort(r)
		if !o.KeepDuplicates {
			r = slices.Compact(r)
		}
		indices = append(indices, r...)
		indptr = append(indptr, int64(len(indices)))
	}
	return indptr, indices
}

func f32text(x float32) string { return strconv.FormatFloat(float64(x), 'g', -1, 32) }

// labelText is one label line: -1 written as "-1", "nan", "NaN" or "-1.0".
func labelText(rng *rand.Rand, c int64) string {
	if c >= 0 {
		if rng.IntN(4) == 0 {
			return fmt.Sprintf("%d.0", c)
		}
		return strconv.FormatInt(c, 10)
	}
	return []string{"-1", "nan", "NaN", "-1.0"}[rng.IntN(4)]
}

func (g agreeGraph) floatLabels() []float64 {
	out := make([]float64, g.n)
	for i, c := range g.label {
		out[i] = float64(c)
		if c < 0 {
			out[i] = math.NaN()
		}
	}
	return out
}

// edgeNPY is the edge array in a random dtype (int32, int64, uint32),
// layout ([E, 2] or [2, E]) and order (C, or Fortran as np.save writes a
// transposed array).
func (g agreeGraph) edgeNPY(t *testing.T, rng *rand.Rand, want2E bool) ([]byte, string) {
	e := int64(len(g.src))
	var pairs, rows []int64
	for i := range g.src {
		pairs = append(pairs, g.src[i], g.dst[i])
	}
	rows = append(append(rows, g.src...), g.dst...)
	// The layout as np.load shows it, and the order np.save wrote: 0: C
	// [E, 2]; 1: C [2, E]; 2: Fortran [2, E] (the bytes of (src, dst)
	// pairs); 3: Fortran [E, 2] (the bytes of the sources, then the
	// destinations). A 2×2 array is [E, 2] to import npy (layouts 1 and 2
	// would mean other edges) and [2, E] to an npz (want2E: layouts 1, 2).
	layout := rng.IntN(4)
	if e == 2 {
		layout = []int{0, 3}[rng.IntN(2)]
	}
	if want2E {
		layout = 1 + rng.IntN(2)
	}
	vals, shape := pairs, []int64{e, 2}
	switch layout {
	case 1:
		vals, shape = rows, []int64{2, e}
	case 2:
		shape = []int64{2, e}
	case 3:
		vals = rows
	}
	dt := []npy.DType{npy.Int32, npy.Int64, npy.Uint32}[rng.IntN(3)]
	var data any = vals
	switch dt {
	case npy.Int32:
		data = toInt32(vals)
	case npy.Uint32:
		u := make([]uint32, len(vals))
		for i, x := range vals {
			u[i] = uint32(x)
		}
		data = u
	}
	desc := fmt.Sprintf("%s %v layout %d", dt, shape, layout)
	if layout >= 2 {
		return fortranNPY(t, dt, shape, data), desc + " fortran"
	}
	return npyBytes(t, dt, shape, data), desc
}

// featNPY is the features as float16, float32 or float64.
func (g agreeGraph) featNPY(t *testing.T, rng *rand.Rand) []byte {
	shape := []int64{int64(g.n), int64(g.dim)}
	switch rng.IntN(3) {
	case 0:
		h := make([]float16.Float16, len(g.feat))
		for i, x := range g.feat {
			h[i] = float16.Fromfloat32(x)
		}
		return npyBytes(t, npy.Float16, shape, h)
	case 1:
		d := make([]float64, len(g.feat))
		for i, x := range g.feat {
			d[i] = float64(x)
		}
		return npyBytes(t, npy.Float64, shape, d)
	}
	return npyBytes(t, npy.Float32, shape, g.feat)
}

// TestImportFormatsAgree writes one random graph in every format the
// importers read, with the formatting choices a user's data may make
// (separators, CRLF, comments, gzip or not, dtypes, layouts, Fortran
// order, NaN or -1 for unlabelled), imports each with the same random
// options and checks the CSR against the documented rules, the features
// and labels value for value, and that all formats give byte-identical
// arrays (the random split depends only on the seed and the labelled set).
func TestImportFormatsAgree(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 29))
	for iter := range 25 {
		g := newAgreeGraph(rng)
		o := func() *Options {
			return &Options{Seed: int64(iter), NumNodes: int64(g.n)}
		}
		base := o()
		base.Directed, base.KeepSelfLoops, base.KeepDuplicates = rng.IntN(3) == 0, rng.IntN(3) == 0, rng.IntN(3) == 0
		opts := func(numNodes bool) *Options {
			c := *base
			if !numNodes {
				c.NumNodes = 0
			}
			return &c
		}
		dir := t.TempDir()
		files := map[string]any{}
		p := func(name string) string { return filepath.Join(dir, name) }

		// Edge list: mixed separators, CRLF, comments and blank lines.
		var el strings.Builder
		nl := []string{"\n", "\r\n"}[rng.IntN(2)]
		el.WriteString("# an edge list" + nl)
		for i := range g.src {
			if rng.IntN(10) == 0 {
				el.WriteString([]string{"# mid-file comment", "", "   "}[rng.IntN(3)] + nl)
			}
			sep := []string{" ", "\t", "  ", " \t "}[rng.IntN(4)]
			fmt.Fprintf(&el, "%s%d%s%d%s", []string{"", " "}[rng.IntN(2)], g.src[i], sep, g.dst[i], nl)
		}
		var featCSV, labelTxt strings.Builder
		for v := range g.n {
			for j := range g.dim {
				if j > 0 {
					featCSV.WriteString(",")
				}
				featCSV.WriteString(f32text(g.feat[v*g.dim+j]))
			}
			featCSV.WriteString("\n")
			labelTxt.WriteString(labelText(rng, g.label[v]) + "\n")
		}
		ext := []string{".csv", ".csv.gz"}[rng.IntN(2)]
		var ogbEdges strings.Builder
		for i := range g.src {
			fmt.Fprintf(&ogbEdges, "%d,%d\n", g.src[i], g.dst[i])
		}
		edgesNPY, edgesDesc := g.edgeNPY(t, rng, false)
		npzEdges, npzDesc := g.edgeNPY(t, rng, true)
		npzMethod := uint16([]int{0, 8}[rng.IntN(2)])
		labelNPY := npyBytes(t, npy.Float64, []int64{int64(g.n), 1}, g.floatLabels())
		if rng.IntN(2) == 0 {
			labelNPY = npyBytes(t, npy.Int64, []int64{int64(g.n)}, g.label)
		}
		writeFiles(t, dir, map[string]any{
			"el/edges.txt":                el.String(),
			"el/feat.csv":                 featCSV.String(),
			"el/labels.txt":               labelTxt.String(),
			"el/feat.npy":                 g.featNPY(t, rng),
			"el/labels.npy":               labelNPY,
			"ogb/raw/edge" + ext:          ogbEdges.String(),
			"ogb/raw/num-node-list" + ext: fmt.Sprintf("%d\n", g.n),
			"ogb/raw/num-edge-list" + ext: fmt.Sprintf("%d\n", len(g.src)),
			"ogb/raw/node-feat" + ext:     featCSV.String(),
			"ogb/raw/node-label" + ext:    labelTxt.String(),
			"npz/raw/data.npz": zipBytes(t, npzMethod, map[string][]byte{
				"edge_index.npy":     npzEdges,
				"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{int64(g.n)}),
				"node_feat.npy":      g.featNPY(t, rng),
			}),
			"npz/raw/node-label.npz": zipBytes(t, npzMethod, map[string][]byte{
				"node_label.npy": npyBytes(t, npy.Float64, []int64{int64(g.n), 1}, g.floatLabels()),
			}),
			"igb/paper__cites__paper/edge_index.npy": edgesNPY,
			"igb/paper/node_feat.npy":                g.featNPY(t, rng),
			"igb/paper/node_label_19.npy":            labelNPY,
		})
		_ = files
		desc := fmt.Sprintf("iter %d (seed %d): n=%d e=%d dim=%d opts %+v; igb edges %s; npz edges %s (method %d); ogb %s",
			iter, seed, g.n, len(g.src), g.dim, *base, edgesDesc, npzDesc, npzMethod, ext)
		type imp struct {
			name string
			run  func(out string) (Report, error)
		}
		elOpts := func(feat, label string, numNodes bool) *Options {
			c := opts(numNodes)
			c.FeatFile, c.LabelFile = p(feat), p(label)
			return c
		}
		imps := []imp{
			{"edgelist text", func(out string) (Report, error) {
				return ImportEdgeList(p("el/edges.txt"), out, elOpts("el/feat.csv", "el/labels.txt", rng.IntN(2) == 0))
			}},
			{"edgelist npy", func(out string) (Report, error) {
				return ImportEdgeList(p("el/edges.txt"), out, elOpts("el/feat.npy", "el/labels.npy", false))
			}},
			{"ogb text", func(out string) (Report, error) { return ImportOGB(p("ogb"), out, opts(false)) }},
			{"ogb npz", func(out string) (Report, error) { return ImportOGB(p("npz"), out, opts(false)) }},
			{"npy", func(out string) (Report, error) { return ImportNPY(p("igb"), out, opts(rng.IntN(2) == 0)) }},
		}
		wantPtr, wantIdx := g.csr(base)
		var first string
		for _, im := range imps {
			out := filepath.Join(t.TempDir(), "out")
			rep, err := im.run(out)
			if err != nil {
				t.Fatalf("%s: %s: %v", desc, im.name, err)
			}
			if rep.EdgesRead != int64(len(g.src)) || rep.EdgesStored != int64(len(wantIdx)) {
				t.Errorf("%s: %s: read %d stored %d, want %d %d", desc, im.name, rep.EdgesRead, rep.EdgesStored, len(g.src), len(wantIdx))
			}
			l := load(t, out)
			if !reflect.DeepEqual(l.indptr, wantPtr) || !slices.Equal(l.indices, wantIdx) {
				t.Fatalf("%s: %s: CSR\n%v %v\nwant\n%v %v", desc, im.name, l.indptr, l.indices, wantPtr, wantIdx)
			}
			for v := range g.n {
				if !slices.Equal(l.feats[v], g.feat[v*g.dim:(v+1)*g.dim]) {
					t.Fatalf("%s: %s: features of %d = %v, want %v", desc, im.name, v, l.feats[v], g.feat[v*g.dim:(v+1)*g.dim])
				}
				if int64(l.labels[v]) != g.label[v] {
					t.Fatalf("%s: %s: label of %d = %d, want %d", desc, im.name, v, l.labels[v], g.label[v])
				}
			}
			if first == "" {
				first = out
				continue
			}
			sameArrays(t, first, out)
			if t.Failed() {
				t.Fatalf("%s: %s differs from %s", desc, im.name, imps[0].name)
			}
		}
	}
}
