package importer

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// fortranNPY is a .npy file whose header says fortran_order True over
// the given bytes, as np.save writes a transposed (F-contiguous) array.
func fortranNPY(t testing.TB, d npy.DType, shape []int64, values any) []byte {
	t.Helper()
	b := npyBytes(t, d, shape, values)
	f := bytes.Replace(b, []byte("'fortran_order': False,"), []byte("'fortran_order': True, "), 1)
	if bytes.Equal(f, b) {
		t.Fatal("fortranNPY: no fortran_order in the header")
	}
	return f
}

// TestFortranOrderEdges imports edge arrays that np.save wrote in Fortran
// order (np.save(p, edge_index.T), torch's edge_index.t().numpy()) in every
// .npy-reading importer; each must give the same dataset as the edge list.
// Before, every one was refused ("npy: unsupported array: fortran_order
// True"). A Fortran-order feature matrix, whose rows are not contiguous, is
// refused naming the file and the fix.
func TestFortranOrderEdges(t *testing.T) {
	const n = 6
	src := []int64{0, 0, 1, 3, 3, 5, 2, 0, 4}
	dst := []int64{1, 2, 2, 0, 0, 4, 2, 5, 1}
	var text strings.Builder
	var pairs []int64 // the bytes of a C-order (E, 2), or a Fortran-order (2, E)
	for i := range src {
		fmt.Fprintf(&text, "%d %d\n", src[i], dst[i])
		pairs = append(pairs, src[i], dst[i])
	}
	rows := append(append([]int64{}, src...), dst...) // C-order (2, E), Fortran-order (E, 2)
	e := int64(len(src))
	gbMeta := fmt.Sprintf("graph:\n  nodes:\n    - num: %d\n  edges:\n    - format: numpy\n      path: edges/edges.npy\n", n)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]any{
		"el/e.txt": text.String(),
		// np.save(p, a.T) of a C-order [2, E] array: header (E, 2), Fortran.
		"npyE2/paper__cites__paper/edge_index.npy": fortranNPY(t, npy.Int64, []int64{e, 2}, rows),
		// np.save(p, a.T) of a C-order [E, 2] array: header (2, E), Fortran.
		"npy2E/paper__cites__paper/edge_index.npy": fortranNPY(t, npy.Int32, []int64{2, e}, toInt32(pairs)),
		"ogb/raw/data.npz": zipBytes(t, 0, map[string][]byte{
			"edge_index.npy":     fortranNPY(t, npy.Int64, []int64{2, e}, pairs),
			"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{n}),
		}),
		"ogbdefl/raw/data.npz": zipBytes(t, 8, map[string][]byte{
			"edge_index.npy":     fortranNPY(t, npy.Int64, []int64{2, e}, pairs),
			"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{n}),
		}),
		"gb/edges/edges.npy": fortranNPY(t, npy.Int64, []int64{2, e}, pairs),
		"gb/metadata.yaml":   gbMeta,
		// np.load gives (E, 2) where (2, E) is the format: refused as a
		// C-order (E, 2) is.
		"ogbE2/raw/data.npz": zipBytes(t, 0, map[string][]byte{
			"edge_index.npy":     fortranNPY(t, npy.Int64, []int64{e, 2}, rows),
			"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{n}),
		}),
		"gbE2/edges/edges.npy": fortranNPY(t, npy.Int64, []int64{e, 2}, rows),
		"gbE2/metadata.yaml":   gbMeta,
	})
	o := func() *Options {
		return &Options{Directed: true, KeepSelfLoops: true, KeepDuplicates: true, NumNodes: n}
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := ImportEdgeList(filepath.Join(dir, "el/e.txt"), ref, o()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		imp  func(string, string, *Options) (Report, error)
	}{
		{"npyE2", ImportNPY}, {"npy2E", ImportNPY}, {"ogb", ImportOGB}, {"ogbdefl", ImportOGB}, {"gb", ImportGraphBolt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			rep, err := tc.imp(filepath.Join(dir, tc.name), out, o())
			if err != nil {
				t.Fatal(err)
			}
			if rep.EdgesRead != e {
				t.Errorf("read %d edges, want %d", rep.EdgesRead, e)
			}
			sameArrays(t, ref, out)
		})
	}
	for _, tc := range []struct {
		name string
		imp  func(string, string, *Options) (Report, error)
	}{{"ogbE2", ImportOGB}, {"gbE2", ImportGraphBolt}} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := tc.imp(filepath.Join(dir, tc.name), out, o())
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), fmt.Sprintf("shape [%d 2]", e)) {
			t.Errorf("%s: Fortran-order (E, 2): %v, want the shape refused", tc.name, err)
		}
		assertNoDataset(t, out)
	}
}

func toInt32(v []int64) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// TestFortranOrderOther: arrays with at most one dimension above 1 hold
// the same bytes in either order and import as C order; a Fortran-order
// feature matrix is refused naming the file and np.ascontiguousarray.
func TestFortranOrderOther(t *testing.T) {
	edges := npyBytes(t, npy.Int64, []int64{3, 2}, []int64{0, 1, 1, 2, 2, 3})
	feat := []float32{0, 1, 2, 3, 4, 5, 6, 7}
	label := []int64{0, 1, -1, 1}
	dirC, dirF, dirBad := t.TempDir(), t.TempDir(), t.TempDir()
	writeFiles(t, dirC, map[string]any{
		"paper__cites__paper/edge_index.npy": edges,
		"paper/node_feat.npy":                npyBytes(t, npy.Float32, []int64{4, 2}, feat),
		"paper/node_label_19.npy":            npyBytes(t, npy.Int64, []int64{4, 1}, label),
	})
	writeFiles(t, dirF, map[string]any{
		"paper__cites__paper/edge_index.npy": edges,
		"paper/node_feat.npy":                npyBytes(t, npy.Float32, []int64{4, 2}, feat),
		"paper/node_label_19.npy":            fortranNPY(t, npy.Int64, []int64{4, 1}, label),
	})
	writeFiles(t, dirBad, map[string]any{
		"paper__cites__paper/edge_index.npy": edges,
		"paper/node_feat.npy":                fortranNPY(t, npy.Float32, []int64{4, 2}, feat),
	})
	outC, outF := t.TempDir(), t.TempDir()
	if _, err := ImportNPY(dirC, outC, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportNPY(dirF, outF, nil); err != nil {
		t.Fatal(err)
	}
	sameArrays(t, outC, outF)
	// A 2×2 edge array is [E, 2] to import npy in either order: the
	// Fortran-order file of np.array([[0, 1], [2, 3]]) holds 0, 2, 1, 3
	// and means edges 0→1 and 2→3, as its C-order file does.
	sq, sqF := t.TempDir(), t.TempDir()
	writeFiles(t, sq, map[string]any{"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int64, []int64{2, 2}, []int64{0, 1, 2, 3})})
	writeFiles(t, sqF, map[string]any{"paper__cites__paper/edge_index.npy": fortranNPY(t, npy.Int64, []int64{2, 2}, []int64{0, 2, 1, 3})})
	outSq, outSqF := t.TempDir(), t.TempDir()
	var logs bytes.Buffer
	if _, err := ImportNPY(sq, outSq, &Options{NumNodes: 4, Directed: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	// The shape is ambiguous for two edges: the import says how it read it.
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "2×2, read as [E, 2]") {
		t.Errorf("a 2×2 edge array imported without a warning; log:\n%s", logs.String())
	}
	if _, err := ImportNPY(sqF, outSqF, &Options{NumNodes: 4, Directed: true}); err != nil {
		t.Fatal(err)
	}
	sameArrays(t, outSq, outSqF)
	if l := load(t, outSqF); !slices.Equal(l.indptr, []int64{0, 0, 1, 1, 2}) || !slices.Equal(l.indices, []int64{0, 2}) {
		t.Errorf("2×2 Fortran edges: CSR %v %v, want edges 0→1, 2→3", l.indptr, l.indices)
	}

	outBad := filepath.Join(t.TempDir(), "bad")
	_, err := ImportNPY(dirBad, outBad, nil)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "node_feat.npy") || !strings.Contains(err.Error(), "Fortran-order") ||
		!strings.Contains(err.Error(), "np.ascontiguousarray") {
		t.Errorf("Fortran-order features: %v, want an ErrFormat naming the file and the fix", err)
	}
	assertNoDataset(t, outBad)
}
