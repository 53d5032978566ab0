package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

// bench capped passes the child's output and exit status through, prints
// its one-line summary on stderr, and writes the JSON report; where no
// cgroup can be made (not root, no controller) it refuses unless
// --allow-uncapped.
func TestBenchCapped(t *testing.T) {
	bin := ssdgnnBinary(t)
	report := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(bin, "bench", "capped", "--limit", "256MiB", "--allow-uncapped", "--report", report,
		"--", "/bin/sh", "-c", "cat; echo to-stderr >&2; exit 3")
	cmd.Stdin = strings.NewReader("from-stdin\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("want exit 3, got %v; stderr %s", err, stderr.String())
	}
	if stdout.String() != "from-stdin\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "to-stderr\n") || !strings.Contains(stderr.String(), "capped: ") ||
		!strings.Contains(stderr.String(), "exit 3") {
		t.Fatalf("stderr %q", stderr.String())
	}
	var r struct {
		ExitCode int             `json:"exit_code"`
		Argv     []string        `json:"argv"`
		Cgroup   json.RawMessage `json:"cgroup"`
		Limit    int64           `json:"cgroup_limit_bytes"`
	}
	b, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(b, &r) != nil || r.ExitCode != 3 || len(r.Argv) != 3 {
		t.Fatalf("report %s: %v %+v", b, err, r)
	}
	capped := !strings.Contains(stderr.String(), "running uncapped")
	if capped != (r.Limit == 256<<20 && len(r.Cgroup) > 0) {
		t.Fatalf("capped %v but report says limit %d cgroup %s", capped, r.Limit, r.Cgroup)
	}
	if !capped {
		// Without a cgroup and without --allow-uncapped it refuses.
		out, err := exec.Command(bin, "bench", "capped", "--limit", "256MiB", "--", "/bin/true").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "cgroup") {
			t.Fatalf("refusal: %v %s", err, out)
		}
	}
	for _, args := range [][]string{
		{"bench", "capped", "--", "/bin/true"},                         // no --limit
		{"bench", "capped", "--limit", "1GiB"},                         // no command
		{"bench", "capped", "--limit", "1GiB", "--", "/nonexistent/x"}, // cannot start
		{"bench", "capped", "--limit", "1GiB", "--report", "/nonexistent/r.json", "--", "/bin/true"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err == nil {
			t.Fatalf("%v: accepted: %s", args, out)
		}
	}
}

// TestBenchCappedReportRefused: a --report that names a directory, a
// file of a dataset or the command itself is refused before the command
// runs, naming --report, and leaves that file as it was. Before, only the
// report's directory was checked: --report d/dataset.json ran the command
// and then replaced the manifest, and --report DIR failed after the run.
func TestBenchCappedReportRefused(t *testing.T) {
	bin := ssdgnnBinary(t)
	dir := genSmall(t)
	tmp := t.TempDir()
	self := filepath.Join(tmp, "cmd.sh")
	if err := os.WriteFile(self, []byte("#!/bin/sh\ntouch \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, report, want string }{
		{"directory", tmp, "is a directory"},
		{"manifest", filepath.Join(dir, storage.ManifestName), "a file of dataset"},
		{"features", filepath.Join(dir, storage.FileFeatures), "a file of dataset"},
		{"command", self, "COMMAND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.report)
			marker := filepath.Join(tmp, tc.name+".ran")
			out, err := exec.Command(bin, "bench", "capped", "--limit", "256MiB", "--allow-uncapped", "--report", tc.report,
				"--", self, marker).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--report") || !strings.Contains(string(out), tc.want) {
				t.Fatalf("want a refusal naming --report and %q, got %v: %s", tc.want, err, out)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the command ran before the refusal: %s", out)
			}
			if after, _ := os.ReadFile(tc.report); string(after) != string(before) {
				t.Fatalf("%s changed", tc.report)
			}
		})
	}
}

// TestMemAboveCgroupRefused: under a memory cgroup, an explicit --mem
// above its limit is refused before any work (the kernel would kill the
// process first), for train and infer.
func TestMemAboveCgroupRefused(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "128MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	// A command that is not there is named as such, not as a failure of
	// the cgroup's procs file (the trampoline's $0).
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "128MiB", "--", "/nonexistent/cmd").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "/nonexistent/cmd: command not found") || strings.Contains(string(out), "cgroup.procs") {
		t.Errorf("missing command: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "3", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	// Each command's refusal reads as its own (infer's said "train: ...").
	for _, args := range [][]string{
		{"train", dir, "--epochs", "1", "--mem", "1GiB", "--checkpoint", filepath.Join(t.TempDir(), "ck")},
		{"infer", dir, "--checkpoint", filepath.Join(t.TempDir(), "none"), "--out", filepath.Join(t.TempDir(), "p.npy"), "--mem", "1GiB"},
	} {
		out, err := exec.Command(bin, append([]string{"bench", "capped", "--limit", "128MiB", "--", bin}, args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ssdgnn: "+args[0]+": memory budget too small: --mem 1.0 GiB exceeds the limit of the memory cgroup") {
			t.Errorf("%s --mem 1GiB under a 128 MiB cgroup: %v\n%s", args[0], err, out)
		}
	}
	// Without --mem the streaming commands fit their default to the
	// limit (relabel's 256 MiB default was OOM-killed under 128 MiB).
	if _, _, err := run(t, "partition", dir, "--parts", "4"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"gen", filepath.Join(t.TempDir(), "g2"), "--nodes", "2000"},
		{"relabel", dir, filepath.Join(t.TempDir(), "pm")},
	} {
		out, err := exec.Command(bin, append([]string{"bench", "capped", "--limit", "128MiB", "--", bin}, args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--mem 128 MiB: the memory cgroup's limit") {
			t.Errorf("%s under a 128 MiB cgroup without --mem: %v\n%s", args[0], err, out)
		}
	}
}

// TestPartitionRefusesSmallCgroup: partition has no --mem; under a memory
// cgroup whose limit is below partition.MinMemory it refuses before any
// work, naming the least limit, and leaves no partitioning (a 1M-node
// graph was OOM-killed in 64 MiB); at that least it runs.
func TestPartitionRefusesSmallCgroup(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "128MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "20000", "--feat-dim", "8", "--classes", "3", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	need := partition.MinMemory(d, &partition.Options{Parts: 20})
	d.Close()
	limit := func(b int64) string { return strconv.FormatInt(b>>20, 10) + "MiB" }
	out, err := exec.Command(bin, "bench", "capped", "--limit", limit(need-8<<20), "--", bin, "partition", dir, "--parts", "20", "--name", "small").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "memory limit too small") || !strings.Contains(string(out), "raise the limit to at least") {
		t.Errorf("partition under %s, below its least of %s: %v\n%s", limit(need-8<<20), limit(need), err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, partition.DirName, "small")); !os.IsNotExist(err) {
		t.Errorf("a refused partition left %s: %v", filepath.Join(dir, partition.DirName, "small"), err)
	}
	if out, err := exec.Command(bin, "bench", "capped", "--limit", limit(need+1<<20), "--", bin, "partition", dir, "--parts", "20", "--name", "fits").CombinedOutput(); err != nil {
		t.Errorf("partition under its least limit: %v\n%s", err, out)
	}
}

// TestInferReadModesUnderCgroup: infer chooses how it reads for its own
// process as train's auto flags do (the checkpoint holds neither choice):
// under a memory cgroup, which charges the page cache, feature rows are
// read with O_DIRECT. Before, infer always read through the page cache: a
// 1M-node graph in a 64 MiB cgroup read 40 GiB from the disk for 13 GiB of
// rows, and took 2.2 times as long.
func TestInferReadModesUnderCgroup(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "256MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	dir := filepath.Join(t.TempDir(), "g")
	ck := filepath.Join(t.TempDir(), "ck")
	if _, _, err := run(t, "gen", dir, "--nodes", "2000", "--feat-dim", "8", "--classes", "3", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--checkpoint", ck); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "capped", "--limit", "256MiB", "--", bin, "infer", dir, "--checkpoint", ck,
		"--out", filepath.Join(t.TempDir(), "p.npy"), "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("infer under a 256 MiB cgroup: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "infer: feature reads: O_DIRECT") || !strings.Contains(string(out), "infer: neighbour reads:") {
		t.Errorf("infer under a memory cgroup does not say it reads feature rows with O_DIRECT:\n%s", out)
	}
}

// TestProfileUnderSmallCgroup: under a memory cgroup too small for a
// profiling epoch, profile refuses before it starts, naming the limit and
// the least it needs, as train does; before, the OOM killer ended it part
// way with no message (sweep 26, P8: 50,000 nodes under 48 MiB).
func TestProfileUnderSmallCgroup(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "128MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "50000", "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "50"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "capped", "--limit", "48MiB", "--", bin, "profile", dir, "-q").CombinedOutput()
	// The refusal is profile's own, not train's (review R7).
	if err == nil || !strings.Contains(string(out), "ssdgnn: profile: memory budget too small: ") || !strings.Contains(string(out), "below the") || !strings.Contains(string(out), "a profiling epoch of") ||
		strings.Contains(string(out), "OOM-killed") {
		t.Errorf("profile under 48 MiB: %v, want a refusal naming the least limit\n%s", err, out)
	}
}

// TestRRUnderSmallCgroup: rr under a memory cgroup too small for its
// samplers refuses before sampling, naming the least limit; before, the
// OOM killer ended it (sweep 26, P8: 500,000 nodes, random parts, 48 MiB).
func TestRRUnderSmallCgroup(t *testing.T) {
	bin := ssdgnnBinary(t)
	if out, err := exec.Command(bin, "bench", "capped", "--limit", "128MiB", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("no memory cgroup here: %s", out)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "500000", "--feat-dim", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "partition", dir, "--parts", "500", "--method", "random"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "capped", "--limit", "48MiB", "--", bin, "rr", dir, "-q").CombinedOutput()
	// The refusal is rr's own, not train's (review R7).
	if err == nil || !strings.Contains(string(out), "ssdgnn: rr: memory budget too small: ") || !strings.Contains(string(out), "below the") || !strings.Contains(string(out), "sampling of") ||
		strings.Contains(string(out), "OOM-killed") {
		t.Errorf("rr under 48 MiB: %v, want a refusal naming the least limit\n%s", err, out)
	}
}
