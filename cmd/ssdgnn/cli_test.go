package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run executes the CLI in-process and returns stdout, stderr and the
// error as main prints it (option fields named as the flags).
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"--quiet"}, args...))
	ran, err := root.ExecuteC()
	if err != nil {
		err = flagNamed(ran, err)
	}
	return out.String(), errb.String(), err
}

// TestGenEmptySplits: an explicit 0 for a split's fraction is an empty
// split. The flags defaulted to 0 and synth reads three zeros as "the
// defaults", so --valid-frac 0 --test-frac 0 gave 5 % and 5 %.
func TestGenEmptySplits(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		train, valid, test bool // non-empty
	}{
		{nil, true, true, true},
		{[]string{"--valid-frac", "0", "--test-frac", "0"}, true, false, false},
		{[]string{"--train-frac", "0"}, false, true, true},
		{[]string{"--test-frac", "0"}, true, true, false},
	} {
		dir := filepath.Join(t.TempDir(), "g")
		if _, _, err := run(t, append([]string{"gen", dir, "--nodes", "2000", "--feat-dim", "4", "--classes", "2"}, tc.args...)...); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		out, _, err := run(t, "info", dir, "--json")
		if err != nil {
			t.Fatal(err)
		}
		n := struct {
			Train int64 `json:"num_train"`
			Valid int64 `json:"num_valid"`
			Test  int64 `json:"num_test"`
		}{-1, -1, -1}
		if err := json.Unmarshal([]byte(out), &n); err != nil || n.Train < 0 || n.Valid < 0 || n.Test < 0 {
			t.Fatalf("info --json: %v\n%s", err, out)
		}
		if (n.Train > 0) != tc.train || (n.Valid > 0) != tc.valid || (n.Test > 0) != tc.test {
			t.Errorf("gen %v: train %d, valid %d, test %d; want non-empty %v/%v/%v", tc.args, n.Train, n.Valid, n.Test, tc.train, tc.valid, tc.test)
		}
	}
}

func TestGenInfoValidate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "info", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	for _, k := range []string{"num_nodes", "num_edges", "feat_dim", "feat_dtype", "num_classes", "num_train", "num_valid", "num_test", "bytes_on_disk"} {
		if _, ok := info[k]; !ok {
			t.Errorf("info --json lacks %q", k)
		}
	}
	if info["num_nodes"].(float64) != 2000 || info["feat_dim"].(float64) != 8 {
		t.Errorf("info: %v", info)
	}
	if _, _, err := run(t, "validate", dir); err != nil {
		t.Fatalf("validate clean dataset: %v", err)
	}
	// Re-running gen without --force must refuse and keep the dataset.
	if _, _, err := run(t, "gen", dir, "--nodes", "100"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("gen over existing dataset: %v", err)
	}
	// Corrupt one index: validate must fail and name the file.
	f, err := os.OpenFile(filepath.Join(dir, "indices.npy"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xff, 0xff, 0x7f}, 128)
	f.Close()
	_, stderr, err := run(t, "validate", dir)
	if !errors.Is(err, errProblems) || !strings.Contains(stderr, "indices.npy: indices[0]") {
		t.Fatalf("validate corrupt dataset: err %v, stderr %q", err, stderr)
	}
	// Too damaged to open (a file of the wrong size): --json still
	// prints a report naming the problem, and the exit is non-zero.
	if err := os.Truncate(filepath.Join(dir, "labels.npy"), 100); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, "validate", dir, "--json")
	var rep struct {
		NumProblems int64    `json:"num_problems"`
		Problems    []string `json:"problems"`
	}
	if !errors.Is(err, errProblems) || json.Unmarshal([]byte(out), &rep) != nil || rep.NumProblems != 1 || !strings.Contains(rep.Problems[0], "labels.npy") {
		t.Fatalf("validate --json on an unopenable dataset: err %v, out %q", err, out)
	}
}

func TestInfoRejectsNonDataset(t *testing.T) {
	_, _, err := run(t, "info", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a dataset") {
		t.Fatalf("got %v", err)
	}
}

func TestImportCora(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "cora")
	dir := filepath.Join(t.TempDir(), "cora")
	if _, _, err := run(t, "import", "ogb", src, dir); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "info", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	type counts struct {
		N  int64 `json:"num_nodes"`
		E  int64 `json:"num_edges"`
		D  int64 `json:"feat_dim"`
		C  int64 `json:"num_classes"`
		Tr int64 `json:"num_train"`
		Va int64 `json:"num_valid"`
		Te int64 `json:"num_test"`
	}
	var info counts
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	want := counts{2708, 10556, 1433, 7, 140, 500, 1000}
	if info != want {
		t.Fatalf("cora: got %+v want %+v", info, want)
	}
}

func TestImportBadInput(t *testing.T) {
	dir := t.TempDir()
	edges := filepath.Join(dir, "e.txt")
	os.WriteFile(edges, []byte("0 1\n1 x\n"), 0o644)
	out := filepath.Join(dir, "out")
	_, _, err := run(t, "import", "edgelist", edges, out)
	if err == nil || !strings.Contains(err.Error(), "e.txt: line 2, column 2") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one line naming file, line and column", err)
	}
	if _, _, err := run(t, "info", out); err == nil {
		t.Fatal("a failed import left a dataset behind")
	}
}

func TestPartitionCora(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cora")
	if _, _, err := run(t, "import", "ogb", filepath.Join("..", "..", "testdata", "cora"), dir); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"fennel", "fennel-exact", "random"} {
		out, _, err := run(t, "partition", dir, "--parts", "100", "--method", method, "--json")
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var st struct {
			K       int     `json:"k"`
			EdgeCut float64 `json:"edge_cut"`
			Nodes   int64   `json:"num_nodes"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		if st.K != 100 || st.Nodes != 2708 || st.EdgeCut <= 0 || st.EdgeCut > 1 {
			t.Fatalf("%s: %+v", method, st)
		}
		if method != "random" && st.EdgeCut > 0.8 {
			t.Errorf("%s: edge cut %.3f is no better than random", method, st.EdgeCut)
		}
	}
	// Same name again without --force is refused.
	if _, _, err := run(t, "partition", dir, "--parts", "100", "--method", "random"); err == nil {
		t.Fatal("overwrote a partitioning without --force")
	}
}

func TestRR(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "5000", "--feat-dim", "8", "--classes", "4"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "rr", dir); err == nil || !strings.Contains(err.Error(), "ssdgnn partition") {
		t.Fatalf("rr without a partitioning: %v", err)
	}
	// The dataset's only partitioning stands in for the default name;
	// one asked for by name does not.
	if _, _, err := run(t, "partition", dir, "--parts", "50", "--first-level", "50", "--name", "mine"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "rr", dir, "--partition", "fennel"); err == nil || !strings.Contains(err.Error(), `no partitioning "fennel"`) {
		t.Fatalf("rr --partition fennel with only \"mine\": %v", err)
	}
	png := filepath.Join(t.TempDir(), "rr.png")
	out, stderr, err := run(t, "rr", dir, "--fanouts", "5,5", "--batch-size", "50", "--parts-per-batch", "5", "--json", "--plot", png)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, `partitioning "mine", the dataset's only one`) {
		t.Errorf("rr's note on the partitioning it read: %q", stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rr_random", "rr_partition", "rr_partition_hist"} {
		v, ok := res[k].(float64)
		if !ok || v < 1 {
			t.Errorf("%s = %v, want a ratio >= 1", k, res[k])
		}
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot: %v", err)
	}
}

// TestUnknownSubcommand: a group command (bench, export, import) given a
// word that names none of its subcommands fails and lists them; bare, it
// prints its help and fails naming what is missing. Cobra alone printed
// the help and exited 0 for "ssdgnn bench oc" and "ssdgnn import".
func TestUnknownSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for success
	}{
		{[]string{"bench", "oc"}, `unknown command "oc" for "ssdgnn bench" (want one of: capped, ooc)`},
		{[]string{"export", "data/cora"}, `unknown command "data/cora" for "ssdgnn export"`},
		{[]string{"import", "csv", "x", "y"}, `unknown command "csv" for "ssdgnn import"`},
		{[]string{"completion", "foo"}, `unknown command "foo" for "ssdgnn completion"`},
		{[]string{"bench"}, "bench: missing subcommand (want one of: capped, ooc)"},
		{[]string{"export"}, "export: missing FORMAT (want one of: distdgl, graphbolt)"},
		{[]string{"import"}, "import: missing FORMAT (want one of: edgelist, graphbolt, npy, ogb)"},
	} {
		out, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if strings.Contains(tc.want, "missing") && !strings.Contains(out, "Available Commands") {
			t.Errorf("%v: no help printed:\n%s", tc.args, out)
		}
	}
}

// TestMissingArguments: a command short of its positional arguments names
// the missing ones from its usage line, and one given too many names the
// first extra (cobra said "accepts 2 arg(s), received 1").
func TestMissingArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train"}, "train: missing DIR (usage: ssdgnn train DIR [flags])"},
		{[]string{"relabel", "w"}, "relabel: missing OUT (usage: ssdgnn relabel DIR OUT [flags])"},
		{[]string{"import", "ogb", "a"}, "import ogb: missing OUT"},
		{[]string{"export", "graphbolt"}, "export graphbolt: missing DIR OUT"},
		{[]string{"bench", "capped", "--limit", "1GiB"}, "bench capped: missing COMMAND"},
		{[]string{"relabel", "a", "b", "c"}, `relabel: unexpected argument "c"`},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
