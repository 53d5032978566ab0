package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
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
	if !strings.Contains(out, "predictions written") {
		t.Errorf("infer output %q", out)
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
