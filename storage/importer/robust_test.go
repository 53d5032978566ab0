package importer

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// NaN, Inf and float16 overflow in features are rejected by default,
// naming the file, the line or element, the node and the column; with
// AllowNonFinite they are stored, counted and warned about.
func TestNonFiniteFeatures(t *testing.T) {
	inf := float32(math.Inf(1))
	ogb := func(feat string) map[string]any {
		f := smallOGB()
		f["raw/node-feat.csv.gz"] = feat
		return f
	}
	for _, tc := range []struct {
		name   string
		files  map[string]any
		ogb    bool
		f16    bool
		want   []string // substrings of the error
		stored int64    // non-finite values stored with AllowNonFinite
		over   bool     // they are finite values beyond the dtype (OverflowFeatures)
	}{
		{name: "csv nan", files: map[string]any{"f.csv": "1,2\n3,nan\n5,6\n7,8\n"},
			want: []string{"f.csv: line 2", "node 1, column 1", "is NaN"}, stored: 1},
		{name: "csv -inf", files: map[string]any{"f.csv": "1,2\n3,4\n-inf,6\n7,Inf\n"},
			want: []string{"f.csv: line 3", "node 2, column 0", "is -Inf"}, stored: 2},
		{name: "csv float16 overflow", f16: true, files: map[string]any{"f.csv": "1,2\n3,4\n5,6\n70000,8\n"},
			want: []string{"f.csv: line 4", "node 3, column 0", "70000, beyond float16's range (±65504)"}, stored: 1, over: true},
		{name: "npy inf", files: map[string]any{"f.npy": nil},
			want: []string{"f.npy: element 5", "node 2, column 1", "is +Inf"}, stored: 2},
		{name: "npy float64 overflow", files: map[string]any{"f64.npy": nil},
			want: []string{"f64.npy: element 3", "node 1, column 1", "is 1e+300, beyond float32's range (±3.4028235e+38)", "overflow to +Inf"}, stored: 1, over: true},
		{name: "npy float64 negative overflow", files: map[string]any{"f64neg.npy": nil},
			want: []string{"f64neg.npy: element 6", "node 3, column 0", "is -5e+40, beyond float32's range", "overflow to -Inf"}, stored: 1, over: true},
		{name: "npy float64 inf", files: map[string]any{"f64inf.npy": nil},
			want: []string{"f64inf.npy: element 0", "node 0, column 0", "is +Inf;"}, stored: 1},
		{name: "ogb csv nan", ogb: true, files: ogb("0.5,1,2\n1,nan,1\n2,2,2\n3,3,3.25\n"),
			want: []string{"node-feat.csv.gz: line 2", "node 1, column 1", "is NaN"}, stored: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			files := map[string]any{"e.txt": "0 1\n1 2\n2 3\n"}
			for k, v := range tc.files {
				files[k] = v
			}
			feat := ""
			for k := range tc.files {
				if !tc.ogb {
					feat = filepath.Join(src, k)
				}
			}
			if _, ok := files["f.npy"]; ok {
				files["f.npy"] = npyBytes(t, npy.Float32, []int64{4, 2}, []float32{1, 2, 3, 4, 5, inf, 7, inf})
			}
			if _, ok := files["f64neg.npy"]; ok {
				files["f64neg.npy"] = npyBytes(t, npy.Float64, []int64{4, 2}, []float64{1, 2, 3, 4, 5, 6, -5e40, 8})
			}
			if _, ok := files["f64inf.npy"]; ok {
				files["f64inf.npy"] = npyBytes(t, npy.Float64, []int64{4, 2}, []float64{math.Inf(1), 2, 3, 4, 5, 6, 7, 8})
			}
			if _, ok := files["f64.npy"]; ok {
				files["f64.npy"] = npyBytes(t, npy.Float64, []int64{4, 2}, []float64{1, 2, 3, 1e300, 5, 6, 7, 8})
			}
			writeFiles(t, src, files)
			imp := func(o *Options) (Report, string, error) {
				out := filepath.Join(t.TempDir(), "out")
				if tc.f16 {
					o.FeatDType = "float16"
				}
				if tc.ogb {
					r, err := ImportOGB(src, out, o)
					return r, out, err
				}
				o.FeatFile = feat
				r, err := ImportEdgeList(filepath.Join(src, "e.txt"), out, o)
				return r, out, err
			}
			_, out, err := imp(&Options{})
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err %v, want ErrFormat", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			assertNoDataset(t, out)

			var logs bytes.Buffer
			rep, out, err := imp(&Options{AllowNonFinite: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("AllowNonFinite: %v", err)
			}
			got, gotOver, line := rep.NonFiniteFeatures, rep.OverflowFeatures, "NaN/Inf feature values stored"
			if tc.over {
				got, gotOver, line = rep.OverflowFeatures, rep.NonFiniteFeatures, "overflowed to ±Inf on conversion"
			}
			if got != tc.stored || gotOver != 0 || !strings.Contains(rep.String(), line) {
				t.Errorf("stored %d values (other kind %d), want %d; report %s", got, gotOver, tc.stored, rep)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "count="+itoa(tc.stored)) {
				t.Errorf("no warning with the count in the log:\n%s", logs.String())
			}
			vr, err := storage.Validate(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := vr.FeatureNaN + vr.FeatureInf; got != tc.stored {
				t.Errorf("validate counts %d NaN/Inf, want %d", got, tc.stored)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Degenerate edge lists: empty, comments only, a stray huge id without
// NumNodes, and an explicit N too big for the disk are errors with the
// numbers; nothing is written.
func TestDegenerateEdgeLists(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]any{
		"empty.txt":    "",
		"comments.txt": "# a\n\n# b\n",
		"stray.txt":    "0 1\n1 2\n2 9000000000000000\n",
		"ok.txt":       "0 1\n1 2\n",
		"big.txt":      "0 1\n1 2\n2 3000000\n",
	})
	for _, tc := range []struct {
		file string
		o    Options
		free int64
		want []string
	}{
		{file: "empty.txt", want: []string{"empty.txt", "no edges"}},
		{file: "comments.txt", want: []string{"comments.txt", "no edges"}},
		{file: "stray.txt", want: []string{"largest node id 9000000000000000", "9000000000000001 nodes for 3 edges", "--num-nodes"}},
		{file: "ok.txt", o: Options{NumNodes: 1 << 40}, free: 1 << 30,
			want: []string{"1073741824 bytes free", "indptr.npy for 1099511627776 nodes needs 8796093022216 bytes"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			if tc.free > 0 {
				old := freeBytes
				freeBytes = func(string) (int64, error) { return tc.free, nil }
				defer func() { freeBytes = old }()
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := ImportEdgeList(filepath.Join(src, tc.file), out, &tc.o)
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			assertNoDataset(t, out)
		})
	}
	// Up to max(64 × edges, 2^20) nodes are inferred without NumNodes.
	out := filepath.Join(t.TempDir(), "out")
	if _, err := ImportEdgeList(filepath.Join(src, "ok.txt"), out, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportEdgeList(filepath.Join(src, "big.txt"), out, &Options{Force: true}); err == nil ||
		!strings.Contains(err.Error(), "largest node id 3000000") {
		t.Fatalf("id 3e6 for 3 edges: %v", err)
	}
}

// Sort-run directories left by a killed import are removed by the next
// successful import into the same directory, whatever their age.
func TestOldTempsRemovedOnSuccess(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]any{"e.txt": "0 1\n1 2\n"})
	out := t.TempDir()
	old := filepath.Join(out, tempPrefix+"123")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "run-0"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportEdgeList(filepath.Join(src, "e.txt"), out, nil); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("left after a successful import: %s", e.Name())
		}
	}
}
