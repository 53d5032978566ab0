package main

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
)

// treeSums is the SHA-256 of every regular file under dir but its lock.
func treeSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() || e.Name() == ".lock" {
			return err
		}
		b, err := os.ReadFile(p)
		sums[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestOutputsNeverOverwriteInputs: every output flag that names a file of
// the dataset (through a link too), the checkpoint being read, another
// output, a missing directory, or an export or relabel directory that is,
// lies in or contains the dataset, is refused before any work, and the
// dataset's files are byte-identical afterwards.
func TestOutputsNeverOverwriteInputs(t *testing.T) {
	dir := genSmall(t)
	ck := filepath.Join(t.TempDir(), "ck")
	for _, args := range [][]string{
		{"partition", dir, "--parts", "4"},
		{"profile", dir, "--fanouts", "4,4", "--batch-size", "64"},
		{"train", dir, "--epochs", "1", "--hidden", "8", "--fanouts", "4,4", "--batch-size", "64", "--checkpoint", ck},
	} {
		if _, _, err := run(t, args...); err != nil {
			t.Fatal(args, err)
		}
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if _, _, err := run(t, "plan", dir, "--mem", "16MiB", "--out", planFile); err != nil {
		t.Fatal(err)
	}
	nodesFile := filepath.Join(t.TempDir(), "nodes.npy")
	if _, err := npy.WriteFile(nodesFile, npy.Int64, []int64{2}, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	other := genSmall(t)
	if _, _, err := run(t, "profile", other, "--fanouts", "4,4", "--batch-size", "64"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "plan", other, "--mem", "16MiB"); err != nil {
		t.Fatal(err)
	}
	links := t.TempDir()
	symToOther, linkDir, hardToOther := filepath.Join(links, "m.jsonl"), filepath.Join(links, "d"), filepath.Join(links, "h.jsonl")
	if err := errors.Join(os.Symlink(filepath.Join(other, "train_idx.npy"), symToOther), os.Symlink(filepath.Join(other, "profile"), linkDir),
		os.Link(filepath.Join(other, "valid_idx.npy"), hardToOther)); err != nil {
		t.Fatal(err)
	}
	otherBefore := treeSums(t, other)
	link := filepath.Join(t.TempDir(), "link.npy")
	if err := os.Symlink(filepath.Join(dir, "labels.npy"), link); err != nil {
		t.Fatal(err)
	}
	ckFile := filepath.Join(ck, "checkpoint.ssdc")
	before := treeSums(t, dir)
	ckBefore := treeSums(t, ck)
	out := filepath.Join(t.TempDir(), "p.npy")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"infer", dir, "--checkpoint", ck, "--out", filepath.Join(dir, "features.npy")}, "a file of dataset"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", link}, "labels.npy, a file of dataset"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", out, "--logits", filepath.Join(dir, "partitions", "fennel", "part.npy")}, "a file of dataset"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", ckFile}, "an input of this command"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", out, "--logits", out}, "both name"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", "/nonexistent-dir/p.npy"}, "does not exist"},
		{[]string{"plan", dir, "--mem", "16MiB", "--out", filepath.Join(dir, "dataset.json")}, "a file of dataset"},
		{[]string{"plan", dir, "--mem", "16MiB", "--plot", filepath.Join(dir, "profile", "default", "profile.json")}, "a file of dataset"},
		{[]string{"train", dir, "--epochs", "1", "--checkpoint", filepath.Join(t.TempDir(), "c2"), "--metrics", filepath.Join(dir, "indptr.npy")}, "a file of dataset"},
		{[]string{"train", dir, "--epochs", "1", "--resume", ck, "--checkpoint", filepath.Join(t.TempDir(), "c3"), "--plot", ckFile}, "an input of this command"},
		{[]string{"rr", dir, "--plot", filepath.Join(dir, "indices.npy")}, "a file of dataset"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", nodesFile, "--nodes", nodesFile}, "the --nodes file, an input of this command"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", out, "--logits", nodesFile, "--nodes", nodesFile}, "the --nodes file"},
		{[]string{"train", dir, "--epochs", "1", "--plan", planFile, "--checkpoint", filepath.Join(t.TempDir(), "c4"), "--metrics", planFile}, "the --plan file"},
		{[]string{"train", dir, "--epochs", "1", "--plan", planFile, "--checkpoint", filepath.Join(t.TempDir(), "c5"), "--plot", planFile}, "the --plan file"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", filepath.Join(other, "labels.npy")}, "a file of dataset " + other},
		// Through links: a symlink to another dataset's file, a symlinked
		// directory on the way, and (for --metrics, which appends) a hard
		// link.
		{[]string{"train", dir, "--epochs", "1", "--checkpoint", filepath.Join(t.TempDir(), "c6"), "--metrics", symToOther}, "a file of dataset"},
		{[]string{"infer", dir, "--checkpoint", ck, "--out", filepath.Join(linkDir, "default", "plan.json")}, "a file of dataset"},
		{[]string{"train", dir, "--epochs", "1", "--checkpoint", filepath.Join(t.TempDir(), "c7"), "--metrics", hardToOther}, "hard links"},
		// The plan train writes beside its checkpoint.
		{[]string{"train", dir, "--epochs", "1", "--mem", "64MiB", "--checkpoint", filepath.Join(other, "profile", "default")}, "a file of dataset " + other},
		{[]string{"rr", dir, "--plot", filepath.Join(other, "dataset.json")}, "a file of dataset " + other},
		{[]string{"export", "graphbolt", dir, dir, "--force"}, "is the input directory"},
		{[]string{"export", "distdgl", dir, dir, "--partition", "fennel", "--force"}, "is the input directory"},
		{[]string{"export", "graphbolt", dir, filepath.Join(dir, "partitions", "fennel"), "--force"}, "lies inside"},
		{[]string{"export", "graphbolt", dir, filepath.Dir(dir), "--force"}, "contains"},
		{[]string{"relabel", dir, dir, "--force"}, "is the input directory"},
		{[]string{"relabel", dir, filepath.Join(dir, "pm"), "--force"}, "lies inside"},
		{[]string{"import", "ogb", dir, dir, "--force"}, "is the source"},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
		if overwrite := c.want != "both name" && c.want != "does not exist"; overwrite && !errors.Is(err, outpath.ErrInput) {
			t.Errorf("%v: %v is not outpath.ErrInput", c.args, err)
		}
	}
	after := treeSums(t, dir)
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared in the dataset", p)
		}
	}
	for p, s := range treeSums(t, other) {
		if otherBefore[p] != s {
			t.Errorf("%s changed", p)
		}
	}
	for p, s := range treeSums(t, ck) {
		if ckBefore[p] != s {
			t.Errorf("%s changed", p)
		}
	}
	if _, _, err := run(t, "validate", dir); err != nil {
		t.Fatal(err)
	}
	// plan.json beside the profile stays plan's to rewrite.
	if _, _, err := run(t, "plan", dir, "--mem", "16MiB", "--out", filepath.Join(dir, "profile", "default", "plan.json")); err != nil {
		t.Errorf("plan --out its default place: %v", err)
	}
}

// TestPerSecond: gen's and partition's rates read "N unit" with one
// space, also under 1,000 (gen of 100 nodes printed "235.6  edges/s").
func TestPerSecond(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{235.6, "235.6"}, {0, "0"}, {11700, "11.7 k"}, {1.94e6, "1.9 M"},
	} {
		if got := perSecond(tc.x); got != tc.want {
			t.Errorf("perSecond(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}
