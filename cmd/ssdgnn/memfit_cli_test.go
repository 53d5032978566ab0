package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/interop/distdgl"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestWritersLeastMem: each command that writes a dataset refuses a
// --mem one byte below its least, naming it, and runs at exactly that
// least (internal/membudget's reserve beside what the command allocates).
func TestWritersLeastMem(t *testing.T) {
	tmp := t.TempDir()
	dir := writerTestData(t, tmp)
	edges := filepath.Join(tmp, "e.txt")
	if err := os.WriteFile(edges, []byte("0 1\n1 2\n2 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := partition.Open(dir, "p4")
	if err != nil {
		t.Fatal(err)
	}
	relabelLeast := partition.RelabelMinMemFor(d, p, "")
	d.Close()
	p.Close()
	n := 0
	for _, tc := range []struct {
		name  string
		least int64
		args  func(out string) []string
		want  string // in the refusal one byte below least
	}{
		{"gen", synth.MinMemBytes, func(out string) []string { return []string{"gen", out, "--nodes", "2000", "--feat-dim", "8"} }, "want at least"},
		{"import", importer.MinMemBytes, func(out string) []string { return []string{"import", "edgelist", edges, out} }, "want at least"},
		{"relabel", relabelLeast, func(out string) []string { return []string{"relabel", dir, out, "--partition", "p4"} },
			fmt.Sprintf("need at least %d bytes (%s) for the id map, sort keys and buffers; --mem is", relabelLeast, bytefmt.Up(relabelLeast))},
		{"export graphbolt", graphbolt.MinMemBytes, func(out string) []string { return []string{"export", "graphbolt", dir, out} }, "want at least 32 MiB"},
		{"export distdgl", distdgl.MinMemBytes, func(out string) []string { return []string{"export", "distdgl", dir, out, "--partition", "p4"} }, "want at least 48 MiB"},
	} {
		n++
		below := filepath.Join(tmp, fmt.Sprintf("below%d", n))
		_, _, err := run(t, append(tc.args(below), "--mem", fmt.Sprint(tc.least-1))...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s --mem %d (one byte below its least): %v, want a refusal with %q", tc.name, tc.least-1, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(below, storage.ManifestName)); err == nil {
			t.Errorf("%s: a refused run wrote a dataset", tc.name)
		}
		at := filepath.Join(tmp, fmt.Sprintf("at%d", n))
		if _, _, err := run(t, append(tc.args(at), "--mem", fmt.Sprint(tc.least))...); err != nil {
			t.Errorf("%s --mem %d (its least): %v", tc.name, tc.least, err)
		}
	}
}

// TestWritersFitSmallCgroup: without --mem, a writing command under a
// memory cgroup takes the whole limit as its budget (the budget already
// leaves the page cache its room), so it runs wherever the same --mem
// given explicitly does. Before, --mem was the limit less 16 MiB: gen
// was refused under 48 MiB ("raise the limit to at least 55.1 MiB") and
// export distdgl under 56 MiB (64 MiB), though --mem 48MiB ran in both.
func TestWritersFitSmallCgroup(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "64MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	tmp := t.TempDir()
	dir := writerTestData(t, tmp)
	for _, tc := range []struct {
		limit string
		args  []string
	}{
		{"48MiB", []string{"gen", filepath.Join(tmp, "g2"), "--nodes", "2000", "--feat-dim", "8"}},
		{"56MiB", []string{"export", "distdgl", dir, filepath.Join(tmp, "dd"), "--partition", "p4"}},
	} {
		out, err := exec.Command(bin, append([]string{"bench", "capped", "--limit", tc.limit, "--", bin}, tc.args...)...).CombinedOutput()
		want := fmt.Sprintf("--mem %s: the memory cgroup's limit", strings.Replace(tc.limit, "MiB", " MiB", 1))
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s under a %s cgroup without --mem: %v, want it to run with %q\n%s", tc.args[0], tc.limit, err, want, out)
		}
	}
}

// writerTestData generates the writers' test dataset under tmp (2,000
// nodes) with a partitioning "p4" of 4 parts, and returns its directory.
func writerTestData(t *testing.T, tmp string) string {
	t.Helper()
	dir := filepath.Join(tmp, "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "3", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "4", "--name", "p4"); err != nil {
		t.Fatal(err)
	}
	return dir
}
