package importer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// TestEdgeListSniffsNPY: an edge list's feature and label files are .npy
// arrays by their magic or a .npy suffix in any case, not only by the
// suffix ".npy". Before, "f.NPY" or a .npy without the suffix was parsed
// as CSV text ("line 1, column 1: invalid float "\x93NUMPY...""), and an
// .npz archive (or a .npy given as the edge list) the same way; now the
// arrays import as "f.npy" does, and the archive is refused naming it.
func TestEdgeListSniffsNPY(t *testing.T) {
	feat := npyBytes(t, npy.Float32, []int64{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	label := npyBytes(t, npy.Int64, []int64{3}, []int64{0, 1, -1})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]any{
		"e.txt": "0 1\n1 2\n", "f.npy": feat, "l.npy": label,
		"f.NPY": feat, "l.Npy": label, "feat.bin": feat, "labels": label,
		"f.npz":     zipBytes(t, 8, map[string][]byte{"arr_0.npy": feat}),
		"edges.npy": npyBytes(t, npy.Int64, []int64{2, 2}, []int64{0, 1, 1, 2}),
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := ImportEdgeList(p("e.txt"), ref, &Options{FeatFile: p("f.npy"), LabelFile: p("l.npy")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, edges, feat, label string
		errFile                  string // "": imports as ref
	}{
		{"upper-case suffix", "e.txt", "f.NPY", "l.Npy", ""},
		{"no suffix", "e.txt", "feat.bin", "labels", ""},
		{"npz features", "e.txt", "f.npz", "", "f.npz"},
		{"npz labels", "e.txt", "f.npy", "f.npz", "f.npz"},
		{"npy edge list", "edges.npy", "", "", "edges.npy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{}
			if tc.feat != "" {
				o.FeatFile = p(tc.feat)
			}
			if tc.label != "" {
				o.LabelFile = p(tc.label)
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := ImportEdgeList(p(tc.edges), out, o)
			if tc.errFile == "" {
				if err != nil {
					t.Fatal(err)
				}
				sameArrays(t, ref, out)
				return
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.errFile) || strings.Contains(err.Error(), "invalid") {
				t.Errorf("got %v, want an ErrFormat naming %s and what it is", err, tc.errFile)
			}
			assertNoDataset(t, out)
		})
	}
}

// TestTextRefusesOtherCompressors: a bzip2, xz or zstd file where text is
// read (edge list, CSV features, OGB files) is refused naming the file and
// the compressor. Before, it was parsed as text: `line 1, column 1:
// invalid integer "BZh91AY&SY..."`.
func TestTextRefusesOtherCompressors(t *testing.T) {
	for _, tc := range []struct{ name, magic string }{
		{"bzip2", "BZh91AY&SY\x04\xe6\vT"},
		{"xz", "\xfd7zXZ\x00\x00\x04\xe6\xd6"},
		{"zstd", "\x28\xb5\x2f\xfd\x24\x0c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]any{
				"e.txt": tc.magic, "ok.txt": "0 1\n1 2\n", "f.csv": tc.magic,
				"ogb/raw/edge.csv": tc.magic, "ogb/raw/num-node-list.csv": "3\n",
			})
			for _, c := range []struct {
				file string
				run  func(out string) error
			}{
				{"e.txt", func(out string) error { _, err := ImportEdgeList(filepath.Join(dir, "e.txt"), out, nil); return err }},
				{"f.csv", func(out string) error {
					_, err := ImportEdgeList(filepath.Join(dir, "ok.txt"), out, &Options{FeatFile: filepath.Join(dir, "f.csv")})
					return err
				}},
				{"edge.csv", func(out string) error { _, err := ImportOGB(filepath.Join(dir, "ogb"), out, nil); return err }},
			} {
				out := filepath.Join(t.TempDir(), "out")
				err := c.run(out)
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.file+": is "+tc.name+"-compressed") {
					t.Errorf("%s: got %v, want an ErrFormat naming the file and %s", c.file, err, tc.name)
				}
				assertNoDataset(t, out)
			}
		})
	}
}

// TestNPYNamesNPZInstead: import npy with an .npz (np.savez output) where
// its layout names a .npy refuses naming both files. Before, an .npz of
// the features or labels was skipped without a word (the import made a
// dataset without them), and one of the edges was reported as a missing
// .npy.
func TestNPYNamesNPZInstead(t *testing.T) {
	feat := npyBytes(t, npy.Float32, []int64{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	label := npyBytes(t, npy.Int64, []int64{3}, []int64{0, 1, -1})
	edges := npyBytes(t, npy.Int64, []int64{2, 2}, []int64{0, 1, 1, 2})
	npz := func(b []byte) []byte { return zipBytes(t, 8, map[string][]byte{"arr_0.npy": b}) }
	for _, tc := range []struct {
		name  string
		files map[string]any
		npz   string // "": imports
	}{
		{"features", map[string]any{"paper/node_feat.npz": npz(feat), "paper/node_label_19.npy": label, "paper__cites__paper/edge_index.npy": edges}, "paper/node_feat.npz"},
		{"labels", map[string]any{"paper/node_feat.npy": feat, "paper/node_label_19.npz": npz(label), "paper__cites__paper/edge_index.npy": edges}, "paper/node_label_19.npz"},
		{"edges", map[string]any{"paper/node_feat.npy": feat, "paper__cites__paper/edge_index.npz": npz(edges)}, "paper__cites__paper/edge_index.npz"},
		{"other label file as npz", map[string]any{"paper/node_feat.npy": feat, "paper/node_label_19.npy": label, "paper/node_label_2K.npz": npz(label),
			"paper__cites__paper/edge_index.npy": edges}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
			writeFiles(t, src, tc.files)
			_, err := ImportNPY(src, out, nil)
			if tc.npz == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), filepath.Join(src, tc.npz)+" is there") {
				t.Errorf("got %v, want an ErrLayout naming %s", err, tc.npz)
			}
			assertNoDataset(t, out)
		})
	}
}

// TestEdgeListFromPipe: an edge list, feature file or label file given as
// a pipe (the shell's <(zcat edges.gz), /dev/fd/N) imports as the same
// regular file does. Before, the .npy/zip sniff opened the pipe and read
// its first 6 bytes, which the import then never saw: "10 11\n" as the
// first line was an edge dropped without a word (3 nodes, 2 edges instead
// of 12 and 3), and "0.5,1\n" a feature row.
func TestEdgeListFromPipe(t *testing.T) {
	const n = 12
	var feats, labels strings.Builder
	for v := range n {
		fmt.Fprintf(&feats, "0.5,%d\n", v)
		fmt.Fprintf(&labels, "%d\n", v%3)
	}
	files := map[string]string{"e.txt": "10 11\n0 1\n1 2\n", "f.csv": feats.String(), "l.csv": labels.String()}
	src := t.TempDir()
	writeFiles(t, src, map[string]any{"e.txt": files["e.txt"], "f.csv": files["f.csv"], "l.csv": files["l.csv"]})
	want := filepath.Join(t.TempDir(), "want")
	if _, err := ImportEdgeList(filepath.Join(src, "e.txt"), want, &Options{FeatFile: filepath.Join(src, "f.csv"), LabelFile: filepath.Join(src, "l.csv")}); err != nil {
		t.Fatal(err)
	}
	for _, piped := range []string{"e.txt", "f.csv", "l.csv"} {
		t.Run(piped, func(t *testing.T) {
			path := map[string]string{}
			for name := range files {
				path[name] = filepath.Join(src, name)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := w.WriteString(files[piped]); err != nil { // within the pipe's buffer
				t.Fatal(err)
			}
			w.Close()
			path[piped] = fmt.Sprintf("/dev/fd/%d", r.Fd())
			out := filepath.Join(t.TempDir(), "out")
			if _, err := ImportEdgeList(path["e.txt"], out, &Options{FeatFile: path["f.csv"], LabelFile: path["l.csv"]}); err != nil {
				t.Fatal(err)
			}
			sameArrays(t, want, out)
		})
	}
}
