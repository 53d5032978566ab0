package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/train"
)

func TestTrainInfer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	plot := filepath.Join(t.TempDir(), "p.png")
	out, _, err := run(t, "train", dir, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
		"--workers", "2", "--checkpoint", ck, "--metrics", metrics, "--plot", plot, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Epochs []struct {
			Loss     float64 `json:"loss"`
			TestAcc  float64 `json:"test_acc"`
			Storage  []any   `json:"storage"`
			Overlap  float64 `json:"overlap"`
			Evaluted bool    `json:"evaluated"`
		} `json:"epochs"`
		Checkpoint string `json:"checkpoint"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("train --json: %v\n%s", err, out)
	}
	if len(rep.Epochs) != 2 || rep.Checkpoint == "" {
		t.Fatalf("report: %s", out)
	}
	if b, err := os.ReadFile(metrics); err != nil || strings.Count(string(b), "\n") != 2 {
		t.Errorf("metrics file: %v %q", err, b)
	}
	// Resumed, the run appends its epoch to the same file (--help says
	// "append"); it truncated it before.
	if _, _, err := run(t, "train", dir, "--epochs", "3", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
		"--workers", "2", "--checkpoint", ck, "--resume", ck, "--metrics", metrics); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(metrics); err != nil || strings.Count(string(b), "\n") != 3 {
		t.Errorf("metrics file after resuming: %v %q", err, b)
	}
	// Metrics that cannot be written (a full disk: /dev/full) are said
	// once, at the first epoch, training goes on and reports, and the
	// command fails after.
	if _, err := os.Stat("/dev/full"); err == nil {
		out, stderr, err := run(t, "train", dir, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
			"--checkpoint", filepath.Join(t.TempDir(), "ckf"), "--metrics", "/dev/full")
		if err == nil || !strings.Contains(err.Error(), "--metrics /dev/full") || strings.Count(stderr, "no space left") != 1 ||
			!strings.Contains(stderr, "training goes on") || !strings.Contains(out, "final valid") {
			t.Errorf("metrics on a full disk: err %v\nstderr %q\nout %q", err, stderr, out)
		}
	}
	// Resumed with no epoch left to train: said so.
	if _, stderr, err := run(t, "train", dir, "--epochs", "3", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
		"--checkpoint", ck, "--resume", ck); err != nil || !strings.Contains(stderr, "already holds 3 epochs (--epochs 3): nothing to train") {
		t.Errorf("resume with nothing left: %v, stderr %q", err, stderr)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
	// The table form.
	out, _, err = run(t, "train", dir, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--checkpoint", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"epoch", "loss", "Sa", "Co", "hist hit", "final valid"} {
		if !strings.Contains(out, k) {
			t.Errorf("table lacks %q:\n%s", k, out)
		}
	}
	preds := filepath.Join(t.TempDir(), "preds.npy")
	logits := filepath.Join(t.TempDir(), "logits.npy")
	out, _, err = run(t, "infer", dir, "--checkpoint", ck, "--out", preds, "--logits", logits, "--nodes", "valid")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "predictions written") || !strings.Contains(out, "layerwise inference") {
		t.Errorf("infer output %q", out)
	}
	if out, _, err := run(t, "infer", dir, "--checkpoint", ck, "--out", preds, "--mode", "sampled", "--nodes", "valid", "--json"); err != nil || !strings.Contains(out, `"mode": "sampled"`) {
		t.Errorf("infer --mode sampled --json: %v\n%s", err, out)
	}
	// Fanouts of another depth than the checkpoint's model name the flag
	// (they read "train: invalid options: 1 fanouts for 2 layers").
	if _, _, err := run(t, "infer", dir, "--checkpoint", ck, "--out", preds, "--mode", "sampled", "--fanouts", "5,5,5"); err == nil ||
		!strings.Contains(err.Error(), "--fanouts has 3 entries, want one per layer (the checkpoint's model has") {
		t.Errorf("infer --fanouts of three layers: %v", err)
	}
	// A checkpoint of another dataset of the same shapes predicts, with a
	// warning naming both.
	twin := filepath.Join(t.TempDir(), "twin")
	if _, _, err := run(t, "gen", twin, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "4", "--name", "twin"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, "infer", twin, "--checkpoint", ck, "--out", preds); err != nil || !strings.Contains(stderr, `was trained on dataset "synth-2000"; `+twin+` is "twin"`) {
		t.Errorf("infer with another dataset's checkpoint: %v, stderr %q", err, stderr)
	}
	// The same name and shapes, other contents (generated with another
	// seed): the dataset.json checksums differ, and infer says so; the
	// dataset itself and a relabelled copy of it are not warned about.
	same := filepath.Join(t.TempDir(), "same")
	if _, _, err := run(t, "gen", same, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "4"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, "infer", same, "--checkpoint", ck, "--out", preds); err != nil || !strings.Contains(stderr, `trained on a dataset named "synth-2000" with other contents`) {
		t.Errorf("infer with the checkpoint of a regenerated dataset: %v, stderr %q", err, stderr)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "8"); err != nil {
		t.Fatal(err)
	}
	rl := filepath.Join(t.TempDir(), "rl")
	if _, _, err := run(t, "relabel", dir, rl); err != nil {
		t.Fatal(err)
	}
	rlrl := filepath.Join(t.TempDir(), "rlrl") // a copy of the copy: the original's checksum travels
	if _, _, err := run(t, "relabel", rl, rlrl); err != nil {
		t.Fatal(err)
	}
	for _, on := range []string{dir, rl, rlrl} {
		if _, stderr, err := run(t, "infer", on, "--checkpoint", ck, "--out", preds); err != nil || strings.Contains(stderr, "warning") {
			t.Errorf("infer on %s with its own checkpoint: %v, stderr %q", on, err, stderr)
		}
	}
	// --nodes that is neither a split nor a file, and a file with an id
	// out of range, are named.
	ids := filepath.Join(t.TempDir(), "ids.npy")
	writeIDs(t, ids, []int64{3, 1, 1 << 40})
	for _, c := range []struct{ nodes, want string }{
		{"5,6", `--nodes "5,6": not test, valid or all, and no such file`},
		{ids, ids + ": element 2: node 1099511627776 out of range"},
	} {
		if _, _, err := run(t, "infer", dir, "--checkpoint", ck, "--out", preds, "--nodes", c.nodes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("infer --nodes %s: %v, want %q", c.nodes, err, c.want)
		}
	}
	// Training to a target accuracy stops when it is reached.
	out, _, err = run(t, "train", dir, "--epochs", "20", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--until-valid", "0.3", "--eval", "sampled")
	if err != nil || !strings.Contains(out, "reached after") {
		t.Errorf("train --until-valid: %v\n%s", err, out)
	}
	for _, c := range []struct {
		path string
		dt   npy.DType
		dims int
	}{{preds, npy.Int32, 1}, {logits, npy.Float32, 2}} {
		f, err := os.Open(c.path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := npy.ReadHeader(f)
		f.Close()
		if err != nil || h.DType != c.dt || len(h.Shape) != c.dims || h.Shape[0] == 0 {
			t.Errorf("%s: %+v %v", c.path, h, err)
		}
	}
	if _, _, err := run(t, "train", dir, "--selection", "partition", "--partition", "nope", "--epochs", "1"); err == nil || !strings.Contains(err.Error(), "ssdgnn partition") {
		t.Errorf("missing partitioning: %v", err)
	}
}

// TestTrainMem: gen → partition → train --mem profiles, plans and keeps the
// caches within --mem; --plan reuses the plan; a --mem below the caches'
// tables fails before the first epoch.
func TestTrainMem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "8"); err != nil {
		t.Fatal(err)
	}
	const mem = 32 << 20
	ck := t.TempDir()
	common := []string{"train", dir, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--workers", "2",
		"--selection", "partition", "--parts-per-batch", "2", "--checkpoint", ck}
	type report struct {
		Epochs []struct {
			Loss     float64 `json:"loss"`
			Measured struct {
				FeatRows float64 `json:"feat_rows"`
			} `json:"measured"`
		} `json:"epochs"`
		Memory struct {
			Total int64 `json:"total_bytes"`
			Limit int64 `json:"limit_bytes"`
			Feat  int64 `json:"feature_bytes"`
		} `json:"memory"`
		Plan *struct {
			Profile string `json:"profile"`
			Feature struct {
				Entries int64 `json:"entries"`
			} `json:"feature"`
		} `json:"plan"`
		Comparison *struct {
			Rows []struct {
				Quantity string `json:"quantity"`
			} `json:"rows"`
		} `json:"plan_comparison"`
	}
	out, stderr, err := run(t, append(common, "--mem", "32MiB", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("train --json: %v\n%s", err, out)
	}
	if rep.Plan == nil || rep.Comparison == nil || len(rep.Comparison.Rows) == 0 || len(rep.Epochs) != 2 {
		t.Fatalf("report without plan or comparison: %s", out)
	}
	if rep.Memory.Total > mem || rep.Memory.Limit != mem || rep.Memory.Total == 0 {
		t.Errorf("caches %+v, --mem %d", rep.Memory, mem)
	}
	// The plan goes to the checkpoint directory, the profile into the
	// dataset.
	planPath := filepath.Join(ck, "plan.json")
	if _, err := os.Stat(planPath); err != nil || !strings.Contains(stderr, "profiled and written") {
		t.Fatalf("plan not written: %v; stderr %q", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "profile", "train", "profile.json")); err != nil {
		t.Fatalf("profile not saved: %v", err)
	}
	for _, k := range []string{"memory budget --mem 32 MiB", "runtime reserve", "model and optimiser", "working set", "caches"} {
		if !strings.Contains(stderr, k) {
			t.Errorf("budget arithmetic lacks %q:\n%s", k, stderr)
		}
	}
	if rep.Plan.Feature.Entries > 0 && rep.Epochs[0].Measured.FeatRows == 0 {
		t.Errorf("planned %d feature rows, none hit", rep.Plan.Feature.Entries)
	}
	// --plan uses the written plan (no profiling) and the table shows the comparison.
	out, stderr, err = run(t, append(common, "--plan", planPath)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "(read") {
		t.Errorf("--plan did not read the plan: %q", stderr)
	}
	for _, k := range []string{"caches: feature", "of --mem 32 MiB", "macro-batch neighbour caches", "predicted/epoch", "feature-cache hits"} {
		if !strings.Contains(out, k) {
			t.Errorf("table lacks %q:\n%s", k, out)
		}
	}
	// A bare --mem again plans from the saved profile (same β, same
	// caches) and repeats the losses; --reprofile profiles again.
	out, stderr, err = run(t, append(common, "--mem", "32MiB", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var again report
	if err := json.Unmarshal([]byte(out), &again); err != nil {
		t.Fatalf("train --json: %v\n%s", err, out)
	}
	if !strings.Contains(stderr, "written from the saved profile") {
		t.Errorf("second --mem run did not reuse the profile: %q", stderr)
	}
	if len(again.Epochs) != len(rep.Epochs) || again.Epochs[1].Loss != rep.Epochs[1].Loss {
		t.Errorf("same seed, reused profile: losses %+v and %+v", rep.Epochs, again.Epochs)
	}
	if _, stderr, err = run(t, append(common, "--mem", "32MiB", "--reprofile", "--epochs", "1")...); err != nil || !strings.Contains(stderr, "profiled and written") {
		t.Errorf("--reprofile: %v; stderr %q", err, stderr)
	}
	// An explicit cache size overrides the plan; a neighbour cache takes
	// at most every list, so 1 GiB of one on this small graph fits.
	if _, _, err := run(t, append(common, "--mem", "32MiB", "--plan", planPath, "--neighbor-cache", "1GiB")...); err != nil {
		t.Errorf("--neighbor-cache 1GiB on a graph whose lists take less: %v", err)
	}
	// Too small: fails before the first epoch (no metrics line).
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	_, _, err = run(t, append(common, "--mem", "4KiB", "--metrics", metrics)...)
	if err == nil || !strings.Contains(err.Error(), "budget too small") || !strings.Contains(err.Error(), "below the minimum of") {
		t.Fatalf("--mem 4KiB: %v", err)
	}
	if b, _ := os.ReadFile(metrics); len(b) != 0 {
		t.Errorf("epochs ran before the budget error: %q", b)
	}
}

// TestTrainSpill: --spill with its flags trains, reports the spill options
// and the reuse depth, leaves no spill file in --spill-dir, and without
// history matches the unspilled run exactly.
func TestTrainSpill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	spillDir := filepath.Join(t.TempDir(), "spill")
	common := []string{"train", dir, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--workers", "2",
		"--checkpoint", t.TempDir(), "--no-hist"}
	type report struct {
		Epochs []struct {
			Loss     float64 `json:"loss"`
			TrainAcc float64 `json:"train_acc"`
			TestAcc  float64 `json:"test_acc"`
		} `json:"epochs"`
		Options struct {
			Spill      bool `json:"spill"`
			SpillChunk int  `json:"spill_chunk"`
			SpillAhead int  `json:"spill_ahead"`
		} `json:"options"`
	}
	var reps [2]report
	for i, extra := range [][]string{nil, {"--spill", "--spill-chunk", "3", "--spill-ahead", "2", "--spill-dir", spillDir}} {
		out, _, err := run(t, append(append(common, extra...), "--json")...)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatalf("train --json: %v\n%s", err, out)
		}
	}
	if o := reps[1].Options; !o.Spill || o.SpillChunk != 3 || o.SpillAhead != 2 {
		t.Errorf("spill options in the report: %+v", o)
	}
	if len(reps[0].Epochs) != 2 || len(reps[1].Epochs) != 2 {
		t.Fatalf("epochs: %d and %d", len(reps[0].Epochs), len(reps[1].Epochs))
	}
	for i := range reps[0].Epochs {
		if reps[0].Epochs[i] != reps[1].Epochs[i] {
			t.Errorf("epoch %d: unspilled %+v, spilled %+v", i, reps[0].Epochs[i], reps[1].Epochs[i])
		}
	}
	ents, err := os.ReadDir(spillDir)
	if err != nil {
		t.Fatalf("--spill-dir not used: %v", err)
	}
	for _, e := range ents {
		t.Errorf("left in --spill-dir: %s", e.Name())
	}
	// The table form with history names the reuse depth: 4·(1+1)+4+2.
	out, _, err := run(t, "train", dir, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
		"--checkpoint", t.TempDir(), "--spill", "--spill-chunk", "4", "--spill-dir", spillDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "spill: chunks of 4 batches, 1 ahead; reuse depth 14") {
		t.Errorf("table lacks the spill line:\n%s", out)
	}
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--spill", "--spill-chunk", "-1"); err == nil || !strings.Contains(err.Error(), "--spill-chunk -1: want a positive value") {
		t.Errorf("--spill-chunk -1: %v", err)
	}
}

// TestTrainZeroCopy: --zero-copy on reads feature-cache hits through the
// backend's host gather and trains exactly like --zero-copy off; the JSON
// report counts the rows and says why the path is off; a bad value fails.
func TestTrainZeroCopy(t *testing.T) {
	dir := genSmall(t)
	type report struct {
		Epochs []struct {
			Loss     float64 `json:"loss"`
			ValidAcc float64 `json:"valid_acc"`
			ZC       int64   `json:"input_rows_zero_copy"`
			Up       int64   `json:"input_rows_uploaded"`
			Input    int64   `json:"input_nodes"`
		} `json:"epochs"`
		ZeroCopy struct {
			Enabled bool   `json:"enabled"`
			Reason  string `json:"reason"`
		} `json:"zero_copy"`
	}
	reps := map[string]report{}
	for _, mode := range []string{"on", "off"} {
		out, _, err := run(t, "train", dir, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
			"--workers", "2", "--feat-cache", "12000", "--feat-policy", "degree", "--zero-copy", mode, "--checkpoint", t.TempDir(), "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Epochs) != 2 {
			t.Fatalf("train --zero-copy %s --json: %v\n%s", mode, err, out)
		}
		reps[mode] = r
	}
	on, off := reps["on"], reps["off"]
	if !on.ZeroCopy.Enabled || off.ZeroCopy.Enabled || off.ZeroCopy.Reason == "" {
		t.Errorf("zero_copy: on %+v, off %+v", on.ZeroCopy, off.ZeroCopy)
	}
	for i := range on.Epochs {
		a, b := on.Epochs[i], off.Epochs[i]
		if a.Loss != b.Loss || a.ValidAcc != b.ValidAcc {
			t.Errorf("epoch %d: on loss %v valid %v, off loss %v valid %v", i, a.Loss, a.ValidAcc, b.Loss, b.ValidAcc)
		}
		if a.ZC <= 0 || a.ZC+a.Up != a.Input || b.ZC != 0 || b.Up != b.Input {
			t.Errorf("epoch %d rows: on %+v, off %+v", i, a, b)
		}
	}
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--zero-copy", "maybe"); err == nil || !strings.Contains(err.Error(), "zero-copy") {
		t.Errorf("--zero-copy maybe: %v", err)
	}
}

// TestTrainFeatRead: buffered and O_DIRECT feature reads at any I/O depth,
// and every way of reading neighbour lists, train bit-identically (they
// only change how misses reach memory).
func TestTrainFeatRead(t *testing.T) {
	dir := genSmall(t)
	type report struct {
		Epochs []struct {
			Loss     float64 `json:"loss"`
			ValidAcc float64 `json:"valid_acc"`
		} `json:"epochs"`
	}
	var first *report
	for _, flags := range [][]string{{"--feat-read", "buffered"}, {"--feat-read", "direct", "--io-depth", "1"}, {"--feat-read", "direct", "--io-depth", "32"},
		{"--source", "batch"}, {"--source", "direct"}, {"--source", "mmap"}} {
		args := append([]string{"train", dir, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
			"--workers", "2", "--feat-cache", "12000", "--feat-policy", "degree", "--checkpoint", t.TempDir(), "--json"}, flags...)
		out, _, err := run(t, args...)
		if err != nil {
			if strings.Contains(err.Error(), "O_DIRECT not supported") {
				t.Skipf("%v: %v", flags, err)
			}
			t.Fatalf("%v: %v", flags, err)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Epochs) != 1 {
			t.Fatalf("%v: %v\n%s", flags, err, out)
		}
		if first == nil {
			first = &r
		} else if r.Epochs[0] != first.Epochs[0] {
			t.Errorf("%v: epoch %+v, buffered %+v", flags, r.Epochs[0], first.Epochs[0])
		}
	}
	for _, bad := range [][]string{{"--feat-read", "mmap"}, {"--io-depth", "-1"}, {"--source", "ring"}} {
		if _, _, err := run(t, append([]string{"train", dir, "--epochs", "1"}, bad...)...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// genSmall generates the 1000-node, 8-dim graph the train option tests
// share and returns its directory.
func genSmall(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "1000", "--feat-dim", "8", "--classes", "3", "--seed", "5"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTrainRejectsMeaninglessValues: an explicit 0 where 0 only meant
// "the default", and a dropout outside [0, 1), are errors naming the flag.
func TestTrainRejectsMeaninglessValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "500", "--feat-dim", "8", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--epochs", "0", "--epochs 0: want a positive value"},
		{"--hidden", "0", "--hidden 0"},
		{"--batch-size", "0", "--batch-size 0"},
		{"--in-flight", "0", "--in-flight 0"},
		{"--staleness", "0", "--staleness 0"},
		{"--dropout", "-0.1", "--dropout -0.1: want a probability"},
		{"--dropout", "1", "--dropout 1: want a probability"},
	} {
		_, _, err := run(t, "train", dir, tc.flag, tc.value, "--checkpoint", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("train %s %s: %v, want an error containing %q", tc.flag, tc.value, err, tc.want)
		}
	}
}

// TestNotTrainable: a dataset without training nodes, or without
// features, is refused by train, profile and rr before any output, naming
// what is missing (before: train "succeeded" with a loss of 0, or failed
// after printing the epoch table's header).
func TestNotTrainable(t *testing.T) {
	noTrain := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", noTrain, "--nodes", "500", "--feat-dim", "4", "--classes", "2", "--train-frac", "0", "--valid-frac", "0.2", "--test-frac", "0.2"); err != nil {
		t.Fatal(err)
	}
	edges := filepath.Join(t.TempDir(), "e.txt")
	labels := filepath.Join(t.TempDir(), "l.txt")
	if err := os.WriteFile(edges, []byte("0 1\n1 2\n2 3\n3 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(labels, []byte("0\n1\n0\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noFeat := filepath.Join(t.TempDir(), "nf")
	if _, _, err := run(t, "import", "edgelist", edges, noFeat, "--labels", labels); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", noTrain, "--epochs", "1"}, "has no training nodes"},
		{[]string{"profile", noTrain}, "has no training nodes"},
		{[]string{"rr", noTrain}, "has no training nodes"},
		{[]string{"train", noFeat, "--epochs", "1"}, "has no features"},
	} {
		out, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if out != "" {
			t.Errorf("%v printed before refusing: %q", c.args, out)
		}
	}
}

// TestInterruptedBeforeAnEpoch: a training stopped before its first epoch
// ends says that no epoch completed (it printed "final valid 0.00%").
func TestInterruptedBeforeAnEpoch(t *testing.T) {
	dir := genSmall(t)
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"--quiet", "train", dir, "--epochs", "2", "--hidden", "8", "--fanouts", "3,3", "--checkpoint", filepath.Join(t.TempDir(), "ck")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := root.ExecuteContext(ctx)
	if err != nil || strings.Contains(out.String(), "final valid 0.00%") || !strings.Contains(out.String(), "no epoch completed (--epochs 2)") {
		t.Errorf("interrupted before an epoch: %v\n%s", err, out.String())
	}
}

// TestTrainWarnsDamagedProfile: a saved profile that is damaged (not one
// of other batches) is named on stderr without -v when train --mem
// profiles again; before, only an Info line under -v said so (sweep 26,
// P15).
func TestTrainWarnsDamagedProfile(t *testing.T) {
	dir := genSmall(t)
	if _, _, err := run(t, "profile", dir, "--fanouts", "4,4", "--batch-size", "64"); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "profile", "default", "profile.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, b[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, "train", dir, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4",
		"--mem", "32MiB", "--checkpoint", t.TempDir())
	if err != nil || !strings.Contains(stderr, "saved profile is damaged") || !strings.Contains(stderr, mp) {
		t.Errorf("train over a damaged profile: %v, stderr %q", err, stderr)
	}
}

// TestMetricsFIFO: --metrics naming a FIFO writes one JSON line per epoch
// to its reader, and without a reader fails at once: open(2) waited
// forever, deaf to Ctrl-C and SIGTERM, and with a reader every line
// failed ("seek: illegal seek").
func TestMetricsFIFO(t *testing.T) {
	dir := genSmall(t)
	fifo := filepath.Join(t.TempDir(), "m.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	args := []string{"train", dir, "--epochs", "2", "--hidden", "8", "--fanouts", "3,3", "--metrics", fifo, "--checkpoint", filepath.Join(t.TempDir(), "ck")}
	done := make(chan error, 1)
	go func() { _, _, err := run(t, args...); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no process reads") {
			t.Errorf("no reader: %v, want an error saying the FIFO has no reader", err)
		}
	case <-time.After(30 * time.Second):
		// Unblock the open so the goroutine ends, then fail.
		if f, err := os.OpenFile(fifo, os.O_RDONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("train --metrics FIFO without a reader still blocks after 30 s")
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := run(t, args...); err != nil {
		t.Fatalf("with a reader: %v", err)
	}
	// Two lines fit the pipe's buffer; train has closed its end.
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines through the FIFO, want 2: %q", len(lines), lines)
	}
	for i, l := range lines {
		var e struct{ Epoch int }
		if err := json.Unmarshal(l, &e); err != nil || e.Epoch != i {
			t.Errorf("line %d: %q (%v)", i, l, err)
		}
	}
}

// TestTrainPlanWithoutMem: --plan without --mem (and no cgroup limit) has
// a budget, the plan's: the first line no longer says "no memory budget;
// feature and neighbour caches off", and under --no-hist the plan's
// history cache, which is not built, is said to be off.
func TestTrainPlanWithoutMem(t *testing.T) {
	if _, ok := cgroup.SelfMemoryLimit(); ok {
		t.Skip("a memory cgroup limit is a budget")
	}
	dir := genSmall(t)
	ck := t.TempDir()
	common := []string{"train", dir, "--epochs", "1", "--hidden", "8", "--fanouts", "3,3"}
	if _, _, err := run(t, append(common, "--mem", "256MiB", "--checkpoint", ck)...); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, append(common, "--plan", filepath.Join(ck, "plan.json"), "--no-hist", "--checkpoint", t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "caches off") || !strings.Contains(stderr, train.NoMemWithPlan) || !strings.Contains(stderr, "history off (--no-hist)") {
		t.Errorf("stderr %q: want the plan's budget named and its history off", stderr)
	}
}

// TestResumeCheckedFirst: a corrupt, or another model's, checkpoint given
// with --resume is refused before train prints anything about the run;
// its "selection:" line came first (review C4).
func TestResumeCheckedFirst(t *testing.T) {
	dir := genSmall(t)
	if _, _, err := run(t, "partition", dir, "--parts", "4"); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	common := []string{"train", dir, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--workers", "2"}
	if _, stderr, err := run(t, append(common, "--checkpoint", ck)...); err != nil || !strings.Contains(stderr, "selection:") {
		t.Fatalf("train: %v, stderr %q (want its selection line)", err, stderr)
	}
	file := filepath.Join(ck, train.CheckpointFile)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.ssdc")
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want error
	}{
		{"corrupt", append(common, "--epochs", "2", "--checkpoint", t.TempDir(), "--resume", bad), train.ErrCheckpoint},
		{"another model", append(common, "--epochs", "2", "--hidden", "16", "--checkpoint", t.TempDir(), "--resume", file), train.ErrMismatch},
	} {
		_, stderr, err := run(t, c.args...)
		if !errors.Is(err, c.want) || stderr != "" {
			t.Errorf("%s: %v (want %v), stderr %q (want nothing before the refusal)", c.name, err, c.want, stderr)
		}
	}
}

// TestUntilValidCheckedFirst: --until-valid on a dataset without labelled
// validation nodes is refused before train prints anything about the run,
// as a bad --resume is (review C4); its budget note and "selection:" line
// came first.
func TestUntilValidCheckedFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "500", "--feat-dim", "8", "--classes", "3", "--seed", "5",
		"--train-frac", "0.5", "--valid-frac", "0", "--test-frac", "0.2"); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, "train", dir, "--until-valid", "0.5", "--epochs", "1")
	if !errors.Is(err, train.ErrInvalidOptions) || !strings.Contains(err.Error(), "no labelled validation node") || stderr != "" {
		t.Errorf("%v (want the refusal), stderr %q (want nothing before it)", err, stderr)
	}
}

// TestTrainCleansCheckpointTemps: the temporary files of a checkpoint or
// plan write that a killed train left in the checkpoint directory are
// removed by the next train there; other files' are kept. kill -9 during
// a checkpoint write left checkpoint.ssdc.tmp-N (as large as the
// checkpoint) that no later run removed.
func TestTrainCleansCheckpointTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "1000", "--feat-dim", "4", "--classes", "2"); err != nil {
		t.Fatal(err)
	}
	ck := t.TempDir()
	files := []struct {
		name string
		gone bool
	}{
		{"checkpoint.ssdc.tmp-4173227292", true},
		{"plan.json.tmp-17", true},
		{"preds.npy.tmp-9", false},
		{"notes.txt", false},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(ck, f.name), []byte("left"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--hidden", "4", "--fanouts", "3,3", "--checkpoint", ck); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(ck, f.name))
		if gone := errors.Is(err, os.ErrNotExist); gone != f.gone {
			t.Errorf("%s: removed %v, want %v", f.name, gone, f.gone)
		}
	}
}

// TestInferDefaultCheckpoint: infer without --checkpoint reads the one a
// bare train wrote (DIR/checkpoints), and says, naming --checkpoint, when
// there is none. --checkpoint was required: a bare train then a bare
// infer failed.
func TestInferDefaultCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "1000", "--feat-dim", "4", "--classes", "2"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p.npy")
	if _, _, err := run(t, "infer", dir, "--out", out); err == nil || !strings.Contains(err.Error(), "--checkpoint") || !strings.Contains(err.Error(), filepath.Join(dir, train.DefaultCheckpointDir)) {
		t.Errorf("infer with no checkpoint anywhere: %v, want an error naming --checkpoint and the default directory", err)
	}
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--hidden", "4", "--fanouts", "3,3"); err != nil {
		t.Fatal(err)
	}
	bare, _, err := run(t, "infer", dir, "--out", out, "--json")
	if err != nil {
		t.Fatalf("infer after a bare train: %v", err)
	}
	named, _, err := run(t, "infer", dir, "--out", out, "--json", "--checkpoint", filepath.Join(dir, train.DefaultCheckpointDir))
	if err != nil {
		t.Fatal(err)
	}
	var a, b train.InferReport
	if err := errors.Join(json.Unmarshal([]byte(bare), &a), json.Unmarshal([]byte(named), &b)); err != nil {
		t.Fatal(err)
	}
	if a.Correct != b.Correct || a.Nodes != b.Nodes || a.CheckpointEpochs != 1 {
		t.Errorf("bare infer %+v, with --checkpoint %+v", a, b)
	}
}
