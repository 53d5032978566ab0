package ooc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
	"go.uber.org/goleak"
)

var binFlag = flag.String("bin", "", "ssdgnn binary for the end-to-end test (default: build ./cmd/ssdgnn)")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ssdgnnBin(t *testing.T) string {
	t.Helper()
	if *binFlag != "" {
		return *binFlag
	}
	bin := filepath.Join(t.TempDir(), "ssdgnn")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/ssdgnn/ssdgnn/cmd/ssdgnn").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/ssdgnn: %v\n%s", err, out)
	}
	return bin
}

// TestEndToEnd runs the whole harness on a tiny graph: every
// configuration for one epoch, both robustness checks, inside real memory
// cgroups when the machine allows (root and a memory controller), uncapped
// otherwise. It asserts that everything ran and was reported, never how
// fast.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := ssdgnnBin(t)
	tmp := t.TempDir()
	o := &Options{
		Bin: bin, Dir: filepath.Join(tmp, "data"), OutDir: filepath.Join(tmp, "out"),
		DataSize: int64(60000 * BytesPerNode(32, 10)), FeatDim: 32, AvgDegree: 10, TrainFrac: 0.2,
		MemLimit: 384 << 20, CacheBudget: 8 << 20, Epochs: 1, Hidden: 16, BatchSize: 500,
		CheckResume: true, ResumeEpochs: 3, CheckSmallLimit: true,
		// Dropping the machine-wide page cache would disturb everything
		// else running here; the harness's own runs do it.
		NoDropCaches:      true,
		DiskCheckDuration: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	_, cgErr := cgroup.Locate("/sys/fs/cgroup", "/proc/self/cgroup")
	canCap := cgErr == nil && os.Geteuid() == 0
	if !canCap {
		t.Logf("no cgroup (%v, euid %d): running uncapped", cgErr, os.Geteuid())
		o.Uncapped = true
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Capped != canCap {
		t.Fatalf("capped %v, want %v (%s)", rep.Capped, canCap, rep.CapNote)
	}
	for _, c := range rep.Configs {
		if !c.OK() {
			t.Errorf("%s failed: %s", c.Name, c.Error)
			continue
		}
		if len(c.Epochs) != 1 || c.EpochSec <= 0 || c.RR <= 0 || c.Child.ReadBytes < 0 {
			t.Errorf("%s: incomplete result %+v", c.Name, c)
		}
		if canCap && (c.Child.Cgroup == nil || c.Child.Cgroup.PeakBytes <= 0 || c.Child.Cgroup.PeakBytes > o.MemLimit) {
			t.Errorf("%s: cgroup stats %+v", c.Name, c.Child.Cgroup)
		}
		if c.OOMKilled() {
			t.Errorf("%s OOM-killed", c.Name)
		}
	}
	if len(rep.Configs) != len(ConfigNames) {
		t.Fatalf("%d configurations reported", len(rep.Configs))
	}
	if rc := rep.Resume; rc == nil || rc.Error != "" || !rc.ResumedOK || rc.KilledSignal == "" {
		t.Errorf("resume check: %+v", rc)
	} else {
		t.Logf("resume: valid %.4f vs %.4f uninterrupted (tolerance %.4f)", rc.ResumedValid, rc.ReferenceValid, rc.Tolerance)
	}
	if sc := rep.SmallLimit; sc == nil || !sc.Pass {
		t.Errorf("small-limit check: %+v", sc)
	}
	for _, f := range []string{"report.md", "report.json", "stages.png", "bytes.png", "plan.json"} {
		if st, err := os.Stat(filepath.Join(o.OutDir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.OutDir, "report.md"))
	if testing.Verbose() {
		t.Logf("report.md:\n%s", md)
	}
	if !canCap && !strings.Contains(string(md), "UNCAPPED") {
		t.Error("uncapped run not marked in report.md")
	}
	if canCap {
		// Only this process's: other test packages (train's cgroup
		// test) may hold their own at the same moment.
		loc, _ := cgroup.Locate("/sys/fs/cgroup", "/proc/self/cgroup")
		ents, _ := os.ReadDir(loc.Dir)
		mine := fmt.Sprintf("%s%d-", cgroup.Prefix, os.Getpid())
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), mine) {
				t.Errorf("cgroup %s left behind", e.Name())
			}
		}
	}
	// The disk was probed before and after the configurations, and each
	// configuration's gather limit priced at those rates too.
	if d := rep.Disk; d == nil || d.Before == nil || d.After == nil || d.Before.RandomReadsPerSec <= 0 {
		t.Errorf("disk check: %+v", d)
	} else {
		for _, c := range rep.Configs {
			if c.OK() && c.GatherReadsPerEpoch > 0 && (c.GatherLimitNowSec <= 0 || c.GatherLimitNowSec != d.limitNow(&c)) {
				t.Errorf("%s: gather limit now %v", c.Name, c.GatherLimitNowSec)
			}
		}
	}
	if pm := rep.Dataset.PM; pm == nil || pm.Plan == nil || pm.Device == nil {
		t.Errorf("partition-major dataset: %+v", pm)
	} else if _, err := os.Stat(filepath.Join(pm.Dir, "orig_ids.npy")); err != nil {
		t.Errorf("partition-major dataset not relabelled: %v", err)
	} else if got := relabelOrder(pm.Dir); got != partition.DefaultRelabelOrder {
		t.Errorf("partition-major dataset in order %q within parts, want relabel's default %q", got, partition.DefaultRelabelOrder)
	}
	// Both profiles priced their reads with the probed disk, not the
	// default costs: the disk is probed before either is profiled.
	for _, d := range []*Dataset{rep.Dataset, rep.Dataset.PM} {
		if d == nil {
			continue
		}
		path := filepath.Join(planner.ProfilePath(d.Dir, ProfileName), planner.FileProfileJSON)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		m, err := planner.ParseMeta(b, path)
		if err != nil {
			t.Error(err)
			continue
		}
		if m.Reads == nil || m.Reads.CostSource != storage.FileDevice {
			t.Errorf("%s: reads priced with %+v, want the costs of %s", path, m.Reads, storage.FileDevice)
		}
	}
	for _, c := range rep.Configs {
		if c.Name == "ssdgnn-pm" && (len(c.Args) < 2 || c.Args[1] != rep.Dataset.PM.Dir) {
			t.Errorf("ssdgnn-pm trained on %v", c.Args)
		}
	}
	if d := rep.Dataset; d.CacheBudget != o.CacheBudget || d.CacheBudgetFrom != "set" {
		t.Errorf("cache budget %d from %q, want the %d set", d.CacheBudget, d.CacheBudgetFrom, o.CacheBudget)
	}
	// A second run reuses the dataset, partition and profile, and the
	// partition-major copy. Its cache budget is left to the default:
	// what train --mem gives the caches, for each dataset; the children
	// then train with caches that fill their budget exactly, and would
	// refuse to start if the plan did not fit it.
	o.Configs, o.CheckResume, o.CheckSmallLimit = []string{"ssdgnn", "ssdgnn-pm"}, false, false
	o.OutDir, o.CacheBudget = filepath.Join(tmp, "out2"), 0
	// Before it, a profile of other batches written over the benchmark's
	// (as `train --profile-name ooc` with other flags does): the harness
	// profiles again rather than plan from it.
	// Its reads are priced as the harness's own are, so that only the
	// batches tell it apart.
	ro := o.withDefaults()
	if out, err := exec.Command(bin, "profile", o.Dir, "--selection", "random", "--name", ProfileName, "--fanouts", ro.Fanouts,
		"--batch-size", fmt.Sprint(ro.BatchSize), "--seed", fmt.Sprint(ro.Seed), "--feat-read", childFeatRead.String(), "-q").CombinedOutput(); err != nil {
		t.Fatalf("overwriting the profile: %v\n%s", err, out)
	}
	rep, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if why := profileBatchesDiffer(o.Dir, &ro, histcache.EpochStaleness(rep.Dataset.NumTrain, ro.BatchSize, train.PipelineDepth)); why != "" {
		t.Errorf("after a second run over an overwritten profile: %s", why)
	}
	if !rep.Dataset.Reused || rep.Dataset.PM == nil || !rep.Dataset.PM.Reused || len(rep.Configs) != 2 || !rep.Configs[0].OK() || !rep.Configs[1].OK() {
		t.Fatalf("second run: reused %v, configs %+v", rep.Dataset.Reused, rep.Configs)
	}
	for _, d := range []*Dataset{rep.Dataset, rep.Dataset.PM} {
		if d.CacheBudgetFrom != "train" || d.CacheBudget <= 8<<20 || d.CacheBudget >= o.MemLimit {
			t.Errorf("%s: cache budget %d from %q, want train's share of %d", d.Dir, d.CacheBudget, d.CacheBudgetFrom, o.MemLimit)
		}
	}
	if rep.CacheBudget != rep.Dataset.CacheBudget {
		t.Errorf("report's cache budget %d, the dataset's %d", rep.CacheBudget, rep.Dataset.CacheBudget)
	}
	// The children's own division gave the caches the same share.
	for name, d := range map[string]*Dataset{"ssdgnn": rep.Dataset, "ssdgnn-pm": rep.Dataset.PM} {
		logs, _ := filepath.Glob(filepath.Join(o.OutDir, "logs", "*-"+name+".stderr"))
		if len(logs) != 1 {
			t.Errorf("%s: stderr logs %v", name, logs)
			continue
		}
		b, _ := os.ReadFile(logs[0])
		want := fmt.Sprintf("caches            %10s  (", humanize.IBytes(uint64(d.CacheBudget))) // train's budget line
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: the child's budget lines lack %q:\n%s", name, want, b)
		}
	}
	// A reused dataset whose partitioning is gone (removed by hand, as
	// the marker cannot know) is partitioned again; before, the run
	// failed with "no partitioning \"ooc\" ...: run 'ssdgnn partition
	// DIR' first", which makes "fennel", not the partitioning it needs.
	if err := os.RemoveAll(filepath.Join(o.Dir, "partitions", PartitionName)); err != nil {
		t.Fatal(err)
	}
	o.Configs, o.OutDir = []string{"ssdgnn"}, filepath.Join(tmp, "out-repart")
	if rep, err = Run(context.Background(), o); err != nil {
		t.Fatalf("a run over a removed partitioning: %v", err)
	}
	if p, err := partition.Open(o.Dir, PartitionName); err != nil || p.K() != rep.Dataset.Parts || !rep.Configs[0].OK() {
		t.Errorf("after a run over a removed partitioning: %v, %+v", err, rep.Configs)
	} else {
		p.Close()
	}
	// A limit train cannot use is named as bench ooc's own flag, with the
	// flags that change it; before, the error quoted only train's --mem
	// (sweep 26, P10).
	o.Configs, o.OutDir, o.MemLimit = []string{"ssdgnn"}, filepath.Join(tmp, "out3"), 24<<20
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--mem-limit 24 MiB cannot train the ssdgnn configuration") {
		t.Errorf("--mem-limit 24 MiB: %v, want it named", err)
	}
	// Caches a child cannot hold beside its working set are refused
	// before any configuration runs, naming the configuration and a
	// --cache-budget that fits: dual-cache is given the whole cache
	// budget (the plan, for this small graph, far less). Before, only
	// the ssdgnn configuration's own share was checked, and never a
	// --cache-budget: the other children were started and refused their
	// --mem.
	o.Configs, o.OutDir, o.MemLimit, o.CacheBudget = []string{"mmap-baseline", "dual-cache", "ssdgnn"}, filepath.Join(tmp, "out4"), 384<<20, 340<<20
	_, err = Run(context.Background(), o)
	if err == nil || !errors.Is(err, train.ErrBudget) {
		t.Fatalf("--cache-budget 340 MiB under --mem-limit 384 MiB (48 MiB of runtime reserve alone): %v, want a refusal", err)
	}
	for _, want := range []string{"cannot train 1 of the configurations", "dual-cache (given 340 MiB", "give --cache-budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(o.OutDir, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a configuration ran before the refusal: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
