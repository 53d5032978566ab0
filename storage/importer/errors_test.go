package importer

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// longEdges is an edge list long enough that cutting its gzip stream in
// half truncates it mid-file.
func longEdges() string {
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "%d,%d\n", i, i+1)
	}
	return b.String()
}

func TestBadInputs(t *testing.T) {
	type format int
	const (
		ogb format = iota
		igb
		edgeList
	)
	truncated := gz(t, longEdges())
	truncated = truncated[:len(truncated)/2]
	igbH := func(t testing.TB) map[string]any { return igbFiles(t, false) }
	tests := []struct {
		name   string
		format format
		base   func(testing.TB) map[string]any // default: smallOGB
		files  map[string]any                  // overrides
		opts   Options
		is     error
		want   []string // substrings of the error text
	}{
		{name: "truncated gzip", files: map[string]any{
			"raw/num-node-list.csv.gz": "20001\n", "raw/num-edge-list.csv.gz": "20000\n", "raw/edge.csv.gz": truncated},
			is: ErrFormat, want: []string{"edge.csv.gz: line ", "unexpected EOF"}},
		{name: "not gzip", files: map[string]any{"raw/edge.csv.gz": []byte("0,1\n")},
			is: ErrFormat, want: []string{"edge.csv.gz: not a valid gzip file"}},
		{name: "feature width", files: map[string]any{"raw/node-feat.csv.gz": "1,2,3\n1,2,3\n1,2\n1,2,3\n"},
			is: ErrFormat, want: []string{"node-feat.csv.gz: line 3: feature row has 2 values, want 3"}},
		{name: "feature rows", files: map[string]any{"raw/node-feat.csv.gz": "1,2,3\n1,2,3\n1,2,3\n"},
			is: ErrFormat, want: []string{"node-feat.csv.gz: 3 feature rows, want one per node (4, N from ", "num-node-list.csv.gz)"}},
		{name: "non-numeric feature", files: map[string]any{"raw/node-feat.csv.gz": "1,2,3\n1,x,3\n1,2,3\n1,2,3\n"},
			is: ErrFormat, want: []string{"node-feat.csv.gz: line 2, column 2: invalid float \"x\""}},
		{name: "non-numeric edge", files: map[string]any{"raw/edge.csv.gz": "0,1\n1,two\n"},
			is: ErrFormat, want: []string{"edge.csv.gz: line 2, column 2: invalid integer \"two\""}},
		{name: "edge columns", files: map[string]any{"raw/edge.csv.gz": "0,1\n1,2,3\n"},
			is: ErrFormat, want: []string{"edge.csv.gz: line 2: got 3 fields, want 2"}},
		{name: "edge id out of range", files: map[string]any{"raw/edge.csv.gz": "0,1\n\n1,4\n"},
			is: ErrFormat, want: []string{"edge.csv.gz: line 3: destination node 4 out of range [0, 4) (N = 4 from ", "raw/num-node-list.csv.gz)"}},
		{name: "negative edge id", files: map[string]any{"raw/edge.csv.gz": "-1,1\n"},
			is: ErrFormat, want: []string{"edge.csv.gz: line 1: negative source node id -1"}},
		{name: "edge count mismatch", files: map[string]any{"raw/num-edge-list.csv.gz": "5\n"},
			is: ErrFormat, want: []string{"num-edge-list.csv.gz: edge counts [5], but", "edge.csv.gz has 4 edges"}},
		{name: "heterogeneous", files: map[string]any{"raw/num-node-list.csv.gz": "4\n5\n"},
			is: ErrFormat, want: []string{"num-node-list.csv.gz: got 2 node counts", "heterogeneous"}},
		{name: "label out of range", files: map[string]any{"raw/node-label.csv.gz": "0\n1\n7\n2\n"}, opts: Options{NumClasses: 3},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 3: label 7 out of range [0, 3)"}},
		{name: "negative label", files: map[string]any{"raw/node-label.csv.gz": "0\n-2\n1\n2\n"},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 2: label -2 is negative; -1 or NaN mark unlabelled nodes"}},
		{name: "huge label", files: map[string]any{"raw/node-label.csv.gz": "0\n3000000000\n1\n2\n"},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 2: label 3e+09 is too large: labels are int32 classes below 2^31-1"}},
		{name: "zero nodes given", files: map[string]any{"raw/num-node-list.csv.gz": "0\n", "raw/edge.csv.gz": "", "raw/num-edge-list.csv.gz": nil,
			"raw/node-feat.csv.gz": nil, "raw/node-label.csv.gz": nil},
			is: ErrFormat, want: []string{"the graph has no nodes: N = 0 from ", "raw/num-node-list.csv.gz, and no edges"}},
		{name: "fractional label", files: map[string]any{"raw/node-label.csv.gz": "0\n1\n2.5\n2\n"},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 3: label 2.5 is not an integer"}},
		{name: "label text", files: map[string]any{"raw/node-label.csv.gz": "0\ncat\n"},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 2: invalid label \"cat\""}},
		{name: "too many labels", files: map[string]any{"raw/node-label.csv.gz": "0\n1\n2\n2\n1\n"},
			is: ErrFormat, want: []string{"node-label.csv.gz: line 5: more labels than nodes (4, N from ", "num-node-list.csv.gz)"}},
		{name: "split id out of range", files: map[string]any{"split/s/valid.csv.gz": "3\n10\n"},
			is: ErrFormat, want: []string{"valid.csv.gz: line 2: node 10 out of range [0, 4) (N = 4 from ", "num-node-list.csv.gz)"}},
		{name: "overlapping splits", files: map[string]any{"split/s/test.csv.gz": "2\n1\n"},
			is: ErrFormat, want: []string{"test.csv.gz: line 2: node 1 is also in train"}},
		{name: "repeated split id", files: map[string]any{"split/s/train.csv.gz": "0\n1\n0\n"},
			is: ErrFormat, want: []string{"train.csv.gz: line 3: node 0 listed twice in train"}},
		{name: "missing split file", files: map[string]any{"split/t/train.csv.gz": "0\n"}, opts: Options{Split: "t"},
			is: ErrLayout, want: []string{"valid.csv.gz"}},
		{name: "several splits", files: map[string]any{"split/t/train.csv.gz": "0\n"},
			is: ErrInvalidOptions, want: []string{"several splits", "s, t"}},
		{name: "unknown split", opts: Options{Split: "nope"},
			is: ErrInvalidOptions, want: []string{`Split "nope" not found`, "choices: s"}},
		{name: "missing edges", files: map[string]any{"raw/edge.csv.gz": nil},
			is: ErrLayout, want: []string{"missing", "edge.csv.gz"}},

		{name: "npz edge out of range", base: func(t testing.TB) map[string]any {
			f := papersNPZ(t, 8)
			f["raw/data.npz"] = zipBytes(t, 8, map[string][]byte{
				"edge_index.npy":     npyBytes(t, npy.Int64, []int64{2, 3}, []int64{0, 1, 2, 1, 9, 0}),
				"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{6}),
			})
			return f
		}, is: ErrFormat, want: []string{"data.npz[edge_index.npy]: element 4: edge 1: destination node 9 out of range [0, 6) (N = 6 from ", "data.npz[num_nodes_list.npy])"}},
		{name: "npz wrong member size", base: func(t testing.TB) map[string]any {
			f := papersNPZ(t, 0)
			f["raw/data.npz"] = zipBytes(t, 0, map[string][]byte{
				"edge_index.npy":     npyBytes(t, npy.Int64, []int64{2, 3}, []int64{0, 1, 2, 1, 2}),
				"num_nodes_list.npy": npyBytes(t, npy.Int64, []int64{1}, []int64{6}),
			})
			return f
		}, is: ErrFormat, want: []string{"data.npz[edge_index.npy]: member is 168 bytes, want 176"}},
		{name: "npz corrupt deflated member", base: func(t testing.TB) map[string]any {
			f := papersNPZ(t, 8)
			f["raw/data.npz"] = corruptMember(t, f["raw/data.npz"].([]byte), "node_feat.npy")
			return f
		}, is: ErrFormat, want: []string{"data.npz[node_feat.npy]: "}},
		{name: "npz label NaN ok, label 2.5 not", base: func(t testing.TB) map[string]any {
			f := papersNPZ(t, 8)
			f["raw/node-label.npz"] = zipBytes(t, 8, map[string][]byte{
				"node_label.npy": npyBytes(t, npy.Float32, []int64{6}, []float32{1, 0, 0, 2.5, 0, 0}),
			})
			return f
		}, is: ErrFormat, want: []string{"node-label.npz[node_label.npy]: element 3: label 2.5 is not an integer"}},

		{name: "headerless without spec", format: igb, base: func(t testing.TB) map[string]any { return igbFiles(t, true) },
			is: ErrInvalidOptions, want: []string{"node_feat.npy has no .npy header", "--raw feat=DTYPE:D0xD1, e.g. --raw feat=float32:100000000x1024", `(API: a RawSpec under key "feat")`}},
		{name: "headerless wrong size", format: igb, base: func(t testing.TB) map[string]any { return igbFiles(t, true) },
			opts: Options{Raw: map[string]RawSpec{
				RoleFeat:  {DType: npy.Float32, Shape: []int64{5, 3}},
				RoleLabel: igbRaw[RoleLabel], RoleEdges: igbRaw[RoleEdges]}},
			is: ErrFormat, want: []string{"node_feat.npy: file is 40 bytes, want 60 (0 header + float32[5 3] data)"}},
		{name: "npy wrong size", format: igb, base: igbH, files: map[string]any{
			"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int64, []int64{6, 2}, []int64{0, 1, 1, 2})},
			is: ErrFormat, want: []string{"edge_index.npy: file is 160 bytes, want 224"}},
		{name: "npy edge out of range", format: igb, base: igbH, files: map[string]any{
			"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Int32, []int64{2, 2}, []int32{0, 1, 5, 2})},
			is: ErrFormat, want: []string{"edge_index.npy: element 2: edge 1: source node 5 out of range [0, 5) (N = 5 from the rows of ", "paper/node_feat.npy)"}},
		{name: "npy edges only", format: igb, base: func(t testing.TB) map[string]any {
			f := igbH(t)
			delete(f, "paper/node_feat.npy")
			delete(f, "paper/node_label_19.npy")
			delete(f, "paper/node_label_2K.npy")
			return f
		}, is: ErrLayout, want: []string{"neither paper/node_feat.npy nor labels", "pass --num-nodes (Options.NumNodes)"}},
		{name: "npy edge beyond --num-nodes", format: igb, opts: Options{NumNodes: 4}, base: func(t testing.TB) map[string]any {
			f := igbH(t)
			delete(f, "paper/node_feat.npy")
			delete(f, "paper/node_label_19.npy")
			delete(f, "paper/node_label_2K.npy")
			return f
		}, is: ErrFormat, want: []string{"edge_index.npy: element 7: edge 3: destination node 4 out of range [0, 4) (N = 4 from --num-nodes (Options.NumNodes))"}},
		{name: "npy --num-nodes disagrees", format: igb, base: igbH, opts: Options{NumNodes: 4},
			is: ErrFormat, want: []string{"node_feat.npy: 5 rows, want 4 (N from --num-nodes (Options.NumNodes))"}},
		{name: "npy bad header", format: igb, base: igbH, files: map[string]any{
			"paper/node_feat.npy": []byte("\x93NUMPY\x01\x00\x10\x00{'descr': 'xx'}")},
			is: ErrFormat, want: []string{"node_feat.npy: npy: malformed header"}},
		{name: "npy rows disagree", format: igb, base: igbH, files: map[string]any{
			"paper/node_label_19.npy": npyBytes(t, npy.Int64, []int64{4}, []int64{0, 1, 2, 3})},
			is: ErrFormat, want: []string{"node_label_19.npy: 4 rows, want 5"}},
		{name: "npy float edges", format: igb, base: igbH, files: map[string]any{
			"paper__cites__paper/edge_index.npy": npyBytes(t, npy.Float32, []int64{1, 2}, []float32{0, 1})},
			is: ErrFormat, want: []string{"edge_index.npy: dtype float32, want an integer dtype"}},

		{name: "edge list id >= NumNodes", format: edgeList, opts: Options{NumNodes: 3},
			files: map[string]any{"e.txt": "# hi\n0 1\n1 2\n2 3\n"},
			is:    ErrFormat, want: []string{"e.txt: line 4: destination node 3 out of range [0, 3) (N = 3 from --num-nodes (Options.NumNodes))"}},
		{name: "edge list id >= feature rows", format: edgeList, opts: Options{FeatFile: "f2.npy"},
			files: map[string]any{"e.txt": "0 1\n1 2\n2 0\n", "f2.npy": npyBytes(t, npy.Float32, []int64{2, 2}, make([]float32, 4))},
			is:    ErrFormat, want: []string{"e.txt: line 2: destination node 2 out of range [0, 2) (N = 2 from the rows of ", "f2.npy; pass --num-nodes to set it)"}},
		{name: "edge list gzip without .gz is read as gzip", format: edgeList, files: map[string]any{"e.txt": gz(t, "0 1\n1\n")},
			is: ErrFormat, want: []string{"e.txt: line 2: got 1 fields, want 2"}},
		{name: "edge list delimiter starts comment", format: edgeList, opts: Options{Delim: '#'}, files: map[string]any{"e.txt": "0#1\n"},
			is: ErrInvalidOptions, want: []string{"Delim '#' starts Comment \"#\""}},
		{name: "edge list columns", format: edgeList, files: map[string]any{"e.txt": "0 1\n1\n"},
			is: ErrFormat, want: []string{"e.txt: line 2: got 1 fields, want 2"}},
		{name: "edge list csv feature width", format: edgeList, opts: Options{FeatFile: "f.csv"},
			files: map[string]any{"e.txt": "0 1\n1 2\n", "f.csv": "1,2\n3,4\n5\n"},
			is:    ErrFormat, want: []string{"f.csv: line 3: feature row has 1 values, want 2"}},
		// Hints on what an edge-list line probably is (fail before: the
		// errors ended at the parse error).
		{name: "edge list header line", format: edgeList, files: map[string]any{"e.txt": "src dst\n0 1\n"},
			is: ErrFormat, want: []string{`e.txt: line 1, column 1: invalid integer "src"; a header line? skip it with --comment (Options.Comment), e.g. --comment src`}},
		{name: "edge list named nodes", format: edgeList, files: map[string]any{"e.txt": "0 1\nalice bob\n"},
			is: ErrFormat, want: []string{`e.txt: line 2, column 1: invalid integer "alice"; node ids must be integers`}},
		{name: "edge list weight column", format: edgeList, files: map[string]any{"e.txt": "0 1 0.5\n"},
			is: ErrFormat, want: []string{"e.txt: line 1: got 3 fields, want 2; an edge line is \"src dst\"; weights and other columns are not read"}},
		{name: "edge list csv without --delim", format: edgeList, files: map[string]any{"e.txt": "0,1\r\n"},
			is: ErrFormat, want: []string{"e.txt: line 1: got 1 fields, want 2; is it ','-separated? pass --delim , (Options.Delim)"}},
		{name: "edge list blanks with --delim ,", format: edgeList, opts: Options{Delim: ','}, files: map[string]any{"e.txt": "0 1\n"},
			is: ErrFormat, want: []string{"e.txt: line 1: got 1 fields, want 2; are its fields separated by blanks? pass --delim whitespace"}},
		{name: "edge list feature rows vs inferred N", format: edgeList, opts: Options{FeatFile: "f.csv"},
			files: map[string]any{"e.txt": "0 1\n", "f.csv": "1,2\n3,4\n5,6\n"},
			is:    ErrFormat, want: []string{"f.csv: line 3: more feature rows than nodes (2, N from the largest edge id + 1; nodes after the last one with an edge need --num-nodes"}},
		{name: "edge list npy labels", format: edgeList, opts: Options{LabelFile: "l.npy", NumClasses: 2},
			files: map[string]any{"e.txt": "0 1\n", "l.npy": npyBytes(t, npy.Int32, []int64{2}, []int32{1, 2})},
			is:    ErrFormat, want: []string{"l.npy: element 1: label 2 out of range [0, 2)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
			files := map[string]any{}
			switch {
			case tc.base != nil:
				files = tc.base(t)
			case tc.format == ogb:
				files = smallOGB()
			}
			maps.Copy(files, tc.files)
			for name, c := range files {
				if c == nil {
					delete(files, name)
				}
			}
			writeFiles(t, src, files)
			opts := tc.opts
			var err error
			switch tc.format {
			case ogb:
				_, err = ImportOGB(src, out, &opts)
			case igb:
				_, err = ImportNPY(src, out, &opts)
			case edgeList:
				if opts.FeatFile != "" {
					opts.FeatFile = filepath.Join(src, opts.FeatFile)
				}
				if opts.LabelFile != "" {
					opts.LabelFile = filepath.Join(src, opts.LabelFile)
				}
				_, err = ImportEdgeList(filepath.Join(src, "e.txt"), out, &opts)
			}
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			if _, statErr := os.Stat(out); statErr == nil {
				assertNoDataset(t, out)
			}
		})
	}
}

// corruptMember flips a byte in the middle of a member's compressed data.
func corruptMember(t testing.TB, archive []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range zr.File {
		if m.Name == name {
			off, err := m.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			out := bytes.Clone(archive)
			out[off+int64(m.CompressedSize64)-3] ^= 0x5a
			return out
		}
	}
	t.Fatalf("no member %s", name)
	return nil
}
