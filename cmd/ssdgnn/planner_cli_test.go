package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/planner"
)

func TestProfilePlan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "3000", "--feat-dim", "16", "--classes", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "30"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "profile", dir, "--partition", "fennel", "--fanouts", "5,5", "--batch-size", "50",
		"--parts-per-batch", "5", "--presample-epochs", "2", "--neighbor-cache", "32KiB", "--seed", "4", "--name", "p1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(out), &meta); err != nil {
		t.Fatalf("profile --json: %v\n%s", err, out)
	}
	for _, k := range []string{"beta", "sample_seconds", "gather_seconds", "sampled_neighbors", "gathered_rows", "batches", "dataset_checksum"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("profile --json lacks %q", k)
		}
	}
	if out, _, err := run(t, "profile", dir, "--selection", "random", "--fanouts", "5,5", "--batch-size", "50", "--name", "p2"); err != nil ||
		!strings.Contains(out, "β (Eq. 3)") || !strings.Contains(out, "reads per epoch") {
		t.Fatalf("profile random: %v\n%s", err, out)
	}
	// The read model follows train's read flags: one read per row with
	// --coalesce-gap 0, fewer reads than rows with a gap.
	for _, tc := range []struct {
		gap    string
		perRow bool
	}{{"0", true}, {"8", false}} {
		out, _, err := run(t, "profile", dir, "--selection", "random", "--fanouts", "5,5", "--batch-size", "50", "--name", "p3",
			"--feat-read", "buffered", "--coalesce-gap", tc.gap, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var m planner.Meta
		if err := json.Unmarshal([]byte(out), &m); err != nil || m.Reads == nil {
			t.Fatalf("profile --coalesce-gap %s: %v\n%s", tc.gap, err, out)
		}
		if r := m.Reads; (r.Reads == r.Rows) != tc.perRow || r.Mode != "buffered" || r.Rows == 0 {
			t.Errorf("--coalesce-gap %s: %+v", tc.gap, r)
		}
	}
	if _, _, err := run(t, "profile", dir, "--selection", "random", "--name", "p4", "--max-read-amp", "0.5"); err == nil || !strings.Contains(err.Error(), "--max-read-amp") {
		t.Errorf("--max-read-amp 0.5: %v", err)
	}

	const mem = 256 << 10
	plan := filepath.Join(t.TempDir(), "plan.json")
	png := filepath.Join(t.TempDir(), "b.png")
	for _, extra := range [][]string{nil, {"--decoupled"}} {
		args := append([]string{"plan", dir, "--mem", "256KiB", "--profile", "p1", "--hidden", "16", "--out", plan, "--plot", png, "--json"}, extra...)
		out, _, err = run(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		var res planner.PlanResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("plan --json: %v\n%s", err, out)
		}
		if res.Memory.MemBytes != mem || res.Memory.GatherPhaseBytes > mem || res.Memory.SamplePhaseBytes > mem ||
			res.Feature.Bytes()+res.History.Bytes() > mem || res.Alpha < 0 || res.Alpha > 1 || len(res.Curve) != 101 {
			t.Fatalf("plan %v: %+v", extra, res)
		}
		saved, err := os.ReadFile(plan)
		if err != nil || !json.Valid(saved) {
			t.Fatalf("plan.json: %v", err)
		}
		if st, err := os.Stat(png); err != nil || st.Size() == 0 {
			t.Fatalf("plot: %v", err)
		}
	}
	if out, _, err := run(t, "plan", dir, "--mem", "1MiB", "--profile", "p2", "--decoupled"); err != nil || !strings.Contains(out, "why") {
		t.Fatalf("plan table: %v\n%s", err, out)
	}
	_, _, err = run(t, "plan", dir, "--mem", "1KiB", "--profile", "p1")
	if !errors.Is(err, planner.ErrBudget) || !strings.Contains(err.Error(), "budget too small") {
		t.Fatalf("tiny --mem: %v", err)
	}
	if _, _, err := run(t, "plan", dir, "--mem", "1MiB", "--profile", "nope"); !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("missing profile: %v", err)
	}
}

// TestPlanOnlyProfile: without --profile, plan reads the dataset's only
// profile when there is no "default" (train --mem saves its own as
// "train"), and says so; a --profile given and missing is not stood in
// for.
func TestPlanOnlyProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "3", "--seed", "2"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "profile", dir, "--name", "train", "--selection", "random", "--fanouts", "4,4", "--batch-size", "64"); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "plan", dir, "--mem", "8MiB")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, `profile "train", the dataset's only one`) || !strings.Contains(out, filepath.Join(dir, "profile", "train", "plan.json")) {
		t.Errorf("plan without --profile: stderr %q, out %q", stderr, out)
	}
	if _, _, err := run(t, "plan", dir, "--mem", "8MiB", "--profile", "default"); err == nil || !strings.Contains(err.Error(), "profile not found") {
		t.Errorf("plan --profile default, only train there: %v", err)
	}
}

// TestPlanWarnsReplacedPartitioning: plan from a profile whose
// partitioning has been replaced since (partition --force) warns that the
// profile counts other batches; before, it planned silently, while train
// would not reuse that profile (sweep 26, P14).
func TestPlanWarnsReplacedPartitioning(t *testing.T) {
	dir := genSmall(t)
	if _, _, err := run(t, "partition", dir, "--parts", "8", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "profile", dir, "--fanouts", "4,4", "--batch-size", "64"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, "plan", dir, "--mem", "8MiB"); err != nil || strings.Contains(stderr, "warning") {
		t.Fatalf("plan on the profiled partitioning: %v, stderr %q", err, stderr)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "8", "--seed", "2", "--force"); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, "plan", dir, "--mem", "8MiB")
	if err != nil || !strings.Contains(stderr, `was made on partitioning "fennel" as it was`) {
		t.Errorf("plan after partition --force: %v, stderr %q", err, stderr)
	}
}
