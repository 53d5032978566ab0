package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExportCLI runs gen -> export graphbolt -> import graphbolt (arrays
// identical) and partition -> export distdgl, and the --force rule.
func TestExportCLI(t *testing.T) {
	tmp := t.TempDir()
	dir, gb, back, dd := filepath.Join(tmp, "g"), filepath.Join(tmp, "gb"), filepath.Join(tmp, "back"), filepath.Join(tmp, "dd")
	if _, _, err := run(t, "gen", dir, "--nodes", "3000", "--feat-dim", "8", "--classes", "4", "--seed", "5"); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "export", "graphbolt", dir, gb, "--mem", "32MiB"); err != nil || !strings.Contains(out, "GraphBolt dataset") {
		t.Fatalf("export graphbolt: %v\n%s", err, out)
	}
	// No lock file is left for DGL to hash (it preprocesses again when
	// any file of the directory changes), not even by a refused run.
	listing := func() []string {
		ents, err := os.ReadDir(gb)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	before := listing()
	if slices.Contains(before, ".lock") {
		t.Errorf("export left %v", before)
	}
	if _, _, err := run(t, "export", "graphbolt", dir, gb); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("export over an export without --force: %v", err)
	}
	if after := listing(); !slices.Equal(after, before) {
		t.Errorf("a refused export changed the directory: %v, was %v", after, before)
	}
	if _, _, err := run(t, "export", "graphbolt", dir, gb, "--force", "--id-dtype", "int32"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "import", "graphbolt", gb, back); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"indptr.npy", "indices.npy", "features.npy", "labels.npy", "train_idx.npy", "valid_idx.npy", "test_idx.npy"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(back, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs after export graphbolt + import graphbolt", f)
		}
	}
	// I9: --symmetrize on an already symmetric graph must not store every
	// edge twice.
	sym := filepath.Join(tmp, "sym")
	out, _, err := run(t, "import", "graphbolt", gb, sym, "--symmetrize", "--json")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "indices.npy"))
	b, _ := os.ReadFile(filepath.Join(sym, "indices.npy"))
	if !bytes.Equal(a, b) || !strings.Contains(out, `"symmetrized": true`) {
		t.Errorf("import graphbolt --symmetrize of a symmetric graph changed indices.npy (%d -> %d bytes)\n%s", len(a), len(b), out)
	}
	if _, _, err := run(t, "export", "distdgl", dir, dd); err == nil {
		t.Fatal("export distdgl without --partition succeeded")
	}
	if _, _, err := run(t, "partition", dir, "--parts", "4", "--first-level", "2"); err != nil {
		t.Fatal(err)
	}
	// I12: a relabelled copy keeps each list in its source's order, not
	// sorted; the round trip must give that order back byte for byte.
	pm, gbpm, pmback := filepath.Join(tmp, "pm"), filepath.Join(tmp, "gbpm"), filepath.Join(tmp, "pmback")
	if _, _, err := run(t, "relabel", dir, pm, "--partition", "fennel"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "export", "graphbolt", pm, gbpm); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "import", "graphbolt", gbpm, pmback, "--mem", "41MiB"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"indptr.npy", "indices.npy", "features.npy", "labels.npy"} {
		a, _ := os.ReadFile(filepath.Join(pm, f))
		b, _ := os.ReadFile(filepath.Join(pmback, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s of a relabelled copy differs after export graphbolt + import graphbolt", f)
		}
	}
	out, _, err = run(t, "export", "distdgl", dir, dd, "--partition", "fennel", "--chunks", "3", "--json")
	if err != nil || !strings.Contains(out, `"chunks": 3`) {
		t.Fatalf("export distdgl: %v\n%s", err, out)
	}
	for _, f := range []string{"metadata.json", "edges/edges-2.txt", "node_data/feat-0.npy", "partitions/_N.txt", "partitions/partition_meta.json"} {
		if _, err := os.Stat(filepath.Join(dd, f)); err != nil {
			t.Error(err)
		}
	}
}
