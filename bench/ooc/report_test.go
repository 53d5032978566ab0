package ooc

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func cannedChild(t *testing.T, file string) *TrainReport {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseTrainReport(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cannedReport is a report as Run would build it from canned child output.
func cannedReport(t *testing.T) *Report {
	base, ours := cannedChild(t, "child-baseline.json"), cannedChild(t, "child-ssdgnn.json")
	ds := &Dataset{Dir: "/data/ooc", NumNodes: 10_000_000, NumEdges: 190_000_000, NumTrain: 100_000, FeatDim: 128,
		BytesOnDisk: 6 << 30, Parts: 2000, Plan: &Plan{Alpha: 0.4,
			Feature:  CacheSplit{BudgetBytes: 400 << 20, TableBytes: 40_000_000},
			History:  CacheSplit{BudgetBytes: 400 << 20, TableBytes: 40_000_000},
			Neighbor: CacheSplit{BudgetBytes: 224 << 20, TableBytes: 10_000_000}},
		Device: &storage.DeviceProfile{Version: storage.DeviceProfileVersion, ReadMode: "direct", RowBytes: 512, RandomDepth: 16,
			RandomReadsPerSec: 55000, SeqDepth: 1, SeqReadBytes: 1 << 20, SeqBytesPerSec: 690 << 20}}
	r := &Report{Timestamp: "2025-01-02T03:04:05Z", MemLimit: 2 << 30, CacheBudget: 1 << 30, Epochs: 2, Layers: 3, Hidden: 32,
		BatchSize: 1000, Fanouts: "10,10,10", Compute: "GraphSAGE, 3 layers, hidden width 32", Capped: true, CgroupVersion: 1,
		CgroupParent: "/sys/fs/cgroup/memory/x", CachesDropped: true, Dataset: ds,
		Machine: Machine{CPU: "Test CPU", Cores: 2, RAMBytes: 24 << 30, Kernel: "Linux 6.1 x86_64", Disk: "/dev/vda (ext4 on /, 252 GiB, non-rotational)", Cgroup: "v1 memory controller", Go: "go1.26"}}
	scale := map[string]float64{"mmap-baseline": 1, "dual-cache": 0.7, "ssdgnn": 1, "ssdgnn-no-partition": 1.4, "ssdgnn-no-hist": 1.2, "ssdgnn-pm": 0.8}
	for i, name := range ConfigNames {
		src := base
		if i >= 2 {
			src = ours
		}
		c := ConfigResult{Name: name, Description: "desc of " + name, Capped: true, CacheDrop: "dropped",
			Epochs: append([]Epoch(nil), src.Epochs...), FinalValid: src.FinalValid, FinalTest: src.FinalTest,
			Child: &ChildResult{ExitCode: 0, WallSec: 70, ReadBytes: 7 << 30, InblockBytes: 7 << 30, MaxRSSBytes: 900 << 20,
				Cgroup: &cgroup.Stats{PeakBytes: 2<<30 - 4096, LimitHits: 1234, OOMKills: 0}}}
		for j := range c.Epochs {
			c.Epochs[j].WallSec *= scale[name]
			c.Epochs[j].IOReadBytes = int64(float64(c.Epochs[j].IOReadBytes) * scale[name])
		}
		c.summarize(ds.NumTrain, ds.Device)
		r.Configs = append(r.Configs, c)
	}
	// The disk probed during the run: its random reads at half
	// device.json's rate before, three quarters after.
	dev := *ds.Device
	before, after := dev, dev
	before.RandomReadsPerSec, after.RandomReadsPerSec = 27500, 41250
	before.MeasuredAt = time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC)
	after.MeasuredAt = time.Date(2025, 1, 2, 4, 5, 0, 0, time.UTC)
	r.Disk = &DiskCheck{Before: &before, After: &after}
	for i := range r.Configs {
		r.Configs[i].GatherLimitNowSec = r.Disk.limitNow(&r.Configs[i])
	}
	// one failure, to show how it reads
	r.Configs[4].Child = &ChildResult{ExitCode: -1, Signal: "killed", Cgroup: &cgroup.Stats{PeakBytes: 2 << 30, LimitHits: 99, OOMKills: 1}}
	r.Configs[4].Error = "exit -1 killed (OOM-killed)"
	r.Resume = &ResumeCheck{Epochs: 3, KilledAfterLines: 1, KilledSignal: "killed", ResumedOK: true, ResumedValid: 0.561, ReferenceValid: 0.560, AbsDiff: 0.001, Tolerance: 0.01, Pass: true}
	r.SmallLimit = &SmallLimitCheck{Limit: 45_000_000, HarnessRefused: true, HarnessMessage: "ooc: plan does not fit", PlanExit: 1, PlanMessage: "ssdgnn: planner: budget too small", Pass: true}
	r.Targets = evaluateTargets(r)
	return r
}

func TestReportGolden(t *testing.T) {
	r := cannedReport(t)
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("report.md differs from %s (run go test -update to accept):\n%s", golden, buf.String())
	}
}

func TestTargets(t *testing.T) {
	r := cannedReport(t)
	got := map[string]string{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg.Met
	}
	for name, want := range map[string]string{
		"ssdgnn reads >= 3x fewer storage bytes per epoch than mmap-baseline":                           "yes", // 2.9e9 vs 6.5e8
		"ssdgnn per-epoch time >= 2x lower than mmap-baseline":                                          "yes",
		"no configuration OOM-killed":                                                                   "no",
		"ssdgnn completes under the memory limit":                                                       "yes",
		"partition batches help (OUTRE Table 7): ssdgnn-no-partition slower and reads more than ssdgnn": "yes",
		"history helps (OUTRE Table 9): ssdgnn-no-hist slower and reads more than ssdgnn":               "n/a",
		// 30.0 s against 8.5 s (3.53x) and, after the first epoch, 29.5
		// against 8.0 s (3.69x); the partition-major copy at 0.8 of
		// ssdgnn's times: 4.41x and 4.61x.
		"ssdgnn per-epoch time >= 4x lower than mmap-baseline, mean over all epochs":      "no",
		"ssdgnn per-epoch time >= 4x lower than mmap-baseline, epochs after the first":    "no",
		"ssdgnn-pm per-epoch time >= 4x lower than mmap-baseline, mean over all epochs":   "yes",
		"ssdgnn-pm per-epoch time >= 4x lower than mmap-baseline, epochs after the first": "yes",
	} {
		if got[name] != want {
			t.Errorf("%s: met %q, want %q", name, got[name], want)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	r := cannedReport(t)
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.json", "stages.png", "bytes.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// Written atomically: nothing else, no temporary file, is left.
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("report directory holds %d entries, want 4", len(ents))
	}
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Configs) != len(ConfigNames) || back.Configs[2].IOReadPerEpoch != r.Configs[2].IOReadPerEpoch {
		t.Fatalf("report.json round trip lost data")
	}
}

func TestParseMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		n          int
		bad        bool
	}{
		{"empty", "", 0, false},
		{"two", `{"epoch":0,"wall_s":1}` + "\n" + `{"epoch":1,"wall_s":2}` + "\n", 2, false},
		{"torn last line", `{"epoch":0}` + "\n" + `{"epoch":1,"wa`, 1, false},
		{"bad middle", `{"epoch":0}` + "\nnot json\n" + `{"epoch":1}` + "\n", 1, true},
		{"blank lines", "\n\n" + `{"epoch":3}` + "\n\n", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := ParseMetrics([]byte(tc.text))
			if (err != nil) != tc.bad || len(ep) != tc.n {
				t.Fatalf("got %d epochs, err %v; want %d, bad=%v", len(ep), err, tc.n, tc.bad)
			}
		})
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(`{"epoch":0,"stages":{"sample_s":1}}` + "\n"))
	f.Add([]byte("\n{\"epo"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseMetrics(b)
	})
}

func TestCheckPlanFits(t *testing.T) {
	p := &Plan{Feature: CacheSplit{BudgetBytes: 100, TableBytes: 40}, History: CacheSplit{BudgetBytes: 50, TableBytes: 40}, Neighbor: CacheSplit{BudgetBytes: 10, TableBytes: 5}}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{0, true}, {160, true}, {1000, true}, {159, false}, {42, false}} {
		err := CheckPlanFits(p, tc.limit)
		if (err == nil) != tc.ok {
			t.Errorf("limit %d: %v", tc.limit, err)
		}
	}
}

func TestBatchProgress(t *testing.T) {
	for _, tc := range []struct{ name, tail, want string }{
		{"none", "some error\n", ""},
		{"empty", "", ""},
		{"last of several", `time=2026-11-22T03:09:00.239Z level=DEBUG msg="batch done" epoch=0 batch=1 of=14 input_rows=657678 epoch_s=31.14
time=2026-11-22T03:09:29.164Z level=DEBUG msg="batch done" epoch=0 batch=2 of=14 input_rows=667439 epoch_s=60.06
time=2026-11-22T03:09:30.000Z level=DEBUG msg="something else" x=1
`, "epoch 0, batch 2 of 14 after 60 s"},
		{"cut field", `level=DEBUG msg="batch done" epoch=3 batch=7`, "epoch 3, batch 7 of ? after ? s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := batchProgress(tc.tail); got != tc.want {
				t.Errorf("batchProgress = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSummarizeFirstAndLater checks that the first epoch and the mean of
// the epochs after it are kept apart from the mean over all epochs.
func TestSummarizeFirstAndLater(t *testing.T) {
	ep := func(wall float64, read int64, hist float64) Epoch {
		return Epoch{WallSec: wall, IOReadBytes: read, HistHit: hist}
	}
	for _, tc := range []struct {
		name                 string
		epochs               []Epoch
		mean, first, later   float64
		laterN               int
		laterRead, laterHist float64
		firstRead            float64
	}{
		{"one epoch", []Epoch{ep(20, 100, 0.01)}, 20, 20, 0, 0, 0, 0, 100},
		{"two epochs", []Epoch{ep(24, 220, 0.01), ep(18, 140, 0.4)}, 21, 24, 18, 1, 140, 0.4, 220},
		{"three epochs", []Epoch{ep(24, 220, 0.01), ep(18, 140, 0.4), ep(20, 160, 0.5)}, 62.0 / 3, 24, 19, 2, 150, 0.45, 220},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ConfigResult{Epochs: tc.epochs}
			c.summarize(0, nil)
			near := func(what string, got, want float64) {
				t.Helper()
				if d := got - want; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			near("EpochSec", c.EpochSec, tc.mean)
			near("FirstEpochSec", c.FirstEpochSec, tc.first)
			near("FirstIORead", c.FirstIORead, tc.firstRead)
			near("LaterEpochSec", c.LaterEpochSec, tc.later)
			near("LaterIOReadPerEpoch", c.LaterIOReadPerEpoch, tc.laterRead)
			near("LaterHistHit", c.LaterHistHit, tc.laterHist)
			if c.LaterEpochs != tc.laterN {
				t.Errorf("LaterEpochs = %d, want %d", c.LaterEpochs, tc.laterN)
			}
		})
	}
}

// TestGatherLimitAtGatherDepth checks that the device limit prices reads
// at the gather's depth where the device profile has it, and at the
// probe's first depth where it does not.
func TestGatherLimitAtGatherDepth(t *testing.T) {
	var e Epoch
	if err := json.Unmarshal([]byte(`{"wall_s": 3, "stages": {"gather_s": 2},
		"storage": [{"stage": "gather", "read_calls": 1000, "bytes_read": 1073741824}]}`), &e); err != nil {
		t.Fatal(err)
	}
	dev := storage.DeviceProfile{Version: storage.DeviceProfileVersion, ReadMode: "direct", RowBytes: 512, RandomDepth: 16, RandomReadsPerSec: 50_000, SeqDepth: 1, SeqReadBytes: 1 << 20,
		SeqBytesPerSec: 1 << 30}
	for _, tc := range []struct {
		name      string
		gatherRPS float64
		want      float64
	}{
		{"gather depth measured", 100_000, 1000.0/100_000 + 1},
		{"profile before the gather rate", 0, 1000.0/50_000 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dev
			if tc.gatherRPS > 0 {
				d.GatherDepth, d.GatherReadsPerSec = 64, tc.gatherRPS
			}
			c := ConfigResult{Epochs: []Epoch{e}}
			c.summarize(0, &d)
			if diff := c.GatherLimitSec - tc.want; diff > 1e-12 || diff < -1e-12 {
				t.Fatalf("GatherLimitSec = %v, want %v", c.GatherLimitSec, tc.want)
			}
		})
	}
}

// TestDiskCheckLimitNow: the limit at the run's own probes is the mean
// of the limits under each, and absent unless both probes are there.
func TestDiskCheckLimitNow(t *testing.T) {
	dev := func(reads, seq float64) *storage.DeviceProfile {
		return &storage.DeviceProfile{Version: storage.DeviceProfileVersion, ReadMode: "direct", RowBytes: 512, RandomDepth: 16,
			RandomReadsPerSec: reads, SeqDepth: 1, SeqReadBytes: 1 << 20, SeqBytesPerSec: seq}
	}
	c := &ConfigResult{GatherReadsPerEpoch: 1000, GatherBytesReadPerEpoch: 1e9}
	for _, tc := range []struct {
		name string
		d    *DiskCheck
		want float64
	}{
		{"both", &DiskCheck{Before: dev(1000, 1e9), After: dev(500, 5e8)}, (1 + 1 + 2 + 2) / 2.0},
		{"no after", &DiskCheck{Before: dev(1000, 1e9)}, 0},
		{"no before", &DiskCheck{After: dev(1000, 1e9)}, 0},
		{"no check", nil, 0},
	} {
		if got := tc.d.limitNow(c); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: limit now %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReportRefusedConfig: a configuration whose child was refused before
// its first epoch has nothing measured: its rows read dashes, not 0.00 s
// and 0.0 %, the accuracy target names it as failed instead of counting
// its 0 % as the lowest accuracy, and a max RSS no higher than the
// runner's own peak (which ru_maxrss includes) reads "at most". Before,
// a run of ten configurations under 110 MiB, seven refused, read "lowest
// 0.0% (dual-cache), 0.0x chance" and "max RSS 162 MiB" in every row.
func TestReportRefusedConfig(t *testing.T) {
	r := cannedReport(t)
	r.Dataset.Classes = 16
	c := &r.Configs[1] // dual-cache, as runConfig leaves a child refused before its first epoch
	*c = ConfigResult{Name: c.Name, Description: c.Description, Capped: true, CacheDrop: "dropped",
		Error: "exit 1 : ssdgnn: train: memory budget too small",
		Child: &ChildResult{ExitCode: 1, WallSec: 0.7, MaxRSSBytes: 162 << 20, RunnerPeakBytes: 162 << 20,
			Cgroup: &cgroup.Stats{PeakBytes: 100 << 20}}}
	c.summarize(r.Dataset.NumTrain, r.Dataset.Device)
	c.GatherLimitNowSec = r.Disk.limitNow(c)
	r.Targets = evaluateTargets(r)
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	var rows []string
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| dual-cache |") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("want 3 dual-cache rows (per epoch, gather, whole child), got %q", rows)
	}
	if !strings.HasPrefix(rows[0], "| dual-cache |"+strings.Repeat(" - |", 14)) || strings.Contains(rows[0], "0.00") {
		t.Errorf("per-epoch row of a refused child: %s", rows[0])
	}
	if rows[1] != "| dual-cache |"+strings.Repeat(" - |", 9) {
		t.Errorf("gather row of a refused child: %s", rows[1])
	}
	if !strings.Contains(rows[2], "| at most 162 MiB |") {
		t.Errorf("whole-child row, max RSS at the runner's peak: %s", rows[2])
	}
	// The charts' axis marks its zero bars as unmeasured.
	if n := r.names(); n[1] != "dual-cache (no epoch)" || n[2] != "ssdgnn" {
		t.Errorf("chart names %q", n)
	}
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.Name, "every configuration ends at") {
			if tg.Met != "no" || !strings.Contains(tg.Value, "failed: dual-cache") || strings.Contains(tg.Value, "(dual-cache)") {
				t.Errorf("accuracy target with a refused configuration: %+v", tg)
			}
		}
	}
}
