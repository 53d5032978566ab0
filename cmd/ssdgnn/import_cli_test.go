package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// writeNPY writes a small int64 .npy file.
func writeNPY(t *testing.T, path string, shape []int64, v []int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	if _, err := npy.WriteFile(path, npy.Int64, shape, b); err != nil {
		t.Fatal(err)
	}
}

// TestImportNPYMessages: an edges-only IGB directory names --num-nodes,
// which import npy now has (I7), and a headerless file names the --raw
// flag as the user types it (I14).
func TestImportNPYMessages(t *testing.T) {
	src := t.TempDir()
	writeNPY(t, filepath.Join(src, "paper__cites__paper/edge_index.npy"), []int64{2, 2}, []int64{0, 1, 1, 2})
	out := filepath.Join(t.TempDir(), "o")
	if _, _, err := run(t, "import", "npy", src, out); err == nil || !strings.Contains(err.Error(), "pass --num-nodes") {
		t.Fatalf("edges only: %v", err)
	}
	o, _, err := run(t, "import", "npy", src, out, "--num-nodes", "3", "--json")
	if err != nil || !strings.Contains(o, `"nodes": 3`) {
		t.Fatalf("--num-nodes 3: %v\n%s", err, o)
	}
	if _, _, err := run(t, "import", "npy", src, filepath.Join(t.TempDir(), "o"), "--num-nodes", "2"); err == nil ||
		!strings.Contains(err.Error(), "out of range [0, 2) (N = 2 from --num-nodes") {
		t.Fatalf("--num-nodes 2: %v", err)
	}
	if _, _, err := run(t, "import", "npy", src, filepath.Join(t.TempDir(), "o"), "--num-nodes", "0"); err == nil {
		t.Fatal("--num-nodes 0 accepted")
	}

	raw := t.TempDir()
	if err := os.MkdirAll(filepath.Join(raw, "paper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(raw, "paper/node_feat.npy"), make([]byte, 32), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "import", "npy", raw, filepath.Join(t.TempDir(), "o"))
	if err == nil || !strings.Contains(err.Error(), "--raw feat=DTYPE:D0xD1, e.g. --raw feat=float32:100000000x1024") ||
		strings.Contains(err.Error(), "Options.--raw") {
		t.Fatalf("headerless: %v", err)
	}
}

// TestImportOutIsFile (C14) and a dataset without features (C8): OUT that
// is a plain file is named as such; a featureless import records no
// feature dtype.
func TestImportOutIsFile(t *testing.T) {
	dir := t.TempDir()
	edges, file := filepath.Join(dir, "e.txt"), filepath.Join(dir, "afile")
	if err := os.WriteFile(edges, []byte("0 1\n1 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "import", "edgelist", edges, file); err == nil || !strings.Contains(err.Error(), "OUT "+file+" is a file, not a directory") {
		t.Fatalf("OUT a file: %v", err)
	}
	out := filepath.Join(dir, "o")
	if _, _, err := run(t, "import", "edgelist", edges, out); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(out, "dataset.json"))
	if err != nil || !strings.Contains(string(m), `"feat_dtype": ""`) {
		t.Errorf("featureless dataset.json: %v\n%s", err, m)
	}
}
