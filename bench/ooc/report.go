package ooc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/ssdgnn/ssdgnn/storage"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/plotfile"
)

// Report is the outcome of Run; report.json is its JSON encoding.
type Report struct {
	Timestamp   string  `json:"timestamp"`
	Machine     Machine `json:"machine"`
	MemLimit    int64   `json:"mem_limit"`
	CacheBudget int64   `json:"cache_budget"`
	Epochs      int     `json:"epochs"`
	Layers      int     `json:"layers"`
	Hidden      int     `json:"hidden"`
	BatchSize   int     `json:"batch_size"`
	Fanouts     string  `json:"fanouts"`
	// Compute says exactly how compute was reduced.
	Compute       string         `json:"compute"`
	Capped        bool           `json:"capped"`
	CapNote       string         `json:"cap_note,omitempty"`
	CgroupVersion int            `json:"cgroup_version,omitempty"`
	CgroupParent  string         `json:"cgroup_parent,omitempty"`
	CachesDropped bool           `json:"caches_dropped"`
	DropNote      string         `json:"drop_note,omitempty"`
	Dataset       *Dataset       `json:"dataset"`
	Configs       []ConfigResult `json:"configs"`
	Targets       []Target       `json:"targets"`
	// Disk is the disk probed just before the first configuration and
	// just after the last (nil with Options.NoDiskCheck).
	Disk       *DiskCheck       `json:"disk_check,omitempty"`
	Resume     *ResumeCheck     `json:"resume_check,omitempty"`
	SmallLimit *SmallLimitCheck `json:"small_limit_check,omitempty"`
}

// Target is one of the goals the benchmark reports on (never asserts).
type Target struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Met is "yes", "no" or "n/a" (a configuration it needs is missing).
	Met string `json:"met"`
}

func (r *Report) config(name string) *ConfigResult {
	for i := range r.Configs {
		if r.Configs[i].Name == name && r.Configs[i].OK() {
			return &r.Configs[i]
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ratio is a/b; NaN when both are zero (nothing measured), +Inf when only
// b is.
func ratio(a, b float64) float64 {
	switch {
	case a <= 0 && b <= 0:
		return math.NaN()
	case b <= 0:
		return math.Inf(1)
	}
	return a / b
}

// met says whether x >= want; "n/a" when x is NaN.
func met(x, want float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return yesNo(x >= want)
}

func evaluateTargets(r *Report) []Target {
	var ts []Target
	base, ours := r.config("mmap-baseline"), r.config("ssdgnn")
	na := func(name string) Target { return Target{Name: name, Value: "missing configuration", Met: "n/a"} }
	const t1, t2 = "ssdgnn reads >= 3x fewer storage bytes per epoch than mmap-baseline", "ssdgnn per-epoch time >= 2x lower than mmap-baseline"
	if base != nil && ours != nil {
		x := ratio(base.IOReadPerEpoch, ours.IOReadPerEpoch)
		ts = append(ts, Target{t1, fmt.Sprintf("%.2fx (%s vs %s)", x, ib(base.IOReadPerEpoch), ib(ours.IOReadPerEpoch)), met(x, 3)})
		y := ratio(base.EpochSec, ours.EpochSec)
		ts = append(ts, Target{t2, fmt.Sprintf("%.2fx (%.2fs vs %.2fs)", y, base.EpochSec, ours.EpochSec), met(y, 2)})
	} else {
		ts = append(ts, na(t1), na(t2))
	}
	// Issue #14's target, for ssdgnn and its partition-major copy: over
	// all epochs, and over the epochs after the first, whose history
	// cache has been filled (the first epoch reuses no embedding).
	for _, name := range []string{"ssdgnn", "ssdgnn-pm"} {
		c := r.config(name)
		if c == nil && name != "ssdgnn" {
			continue
		}
		all := name + " per-epoch time >= 4x lower than mmap-baseline, mean over all epochs"
		later := name + " per-epoch time >= 4x lower than mmap-baseline, epochs after the first"
		if base == nil || c == nil {
			ts = append(ts, na(all), na(later))
			continue
		}
		y := ratio(base.EpochSec, c.EpochSec)
		ts = append(ts, Target{all, fmt.Sprintf("%.2fx (%.2fs vs %.2fs over %s)", y, base.EpochSec, c.EpochSec, epochs(len(c.Epochs), "")), met(y, 4)})
		if base.LaterEpochs == 0 || c.LaterEpochs == 0 {
			ts = append(ts, Target{later, "one epoch only", "n/a"})
			continue
		}
		y = ratio(base.LaterEpochSec, c.LaterEpochSec)
		ts = append(ts, Target{later, fmt.Sprintf("%.2fx (%.2fs vs %.2fs over %s; first epoch %.2fs vs %.2fs)", y, base.LaterEpochSec, c.LaterEpochSec, epochs(c.LaterEpochs, "later "), base.FirstEpochSec, c.FirstEpochSec), met(y, 4)})
	}
	var oom []string
	for _, c := range r.Configs {
		if c.OOMKilled() {
			oom = append(oom, c.Name)
		}
	}
	v := "none"
	if len(oom) > 0 {
		v = strings.Join(oom, ", ")
	}
	if !r.Capped {
		v += " (uncapped run)"
	}
	ts = append(ts, Target{"no configuration OOM-killed", v, yesNo(len(oom) == 0)})
	const t4 = "ssdgnn completes under the memory limit"
	if ours != nil && ours.Child != nil && ours.Child.Cgroup != nil {
		cs := ours.Child.Cgroup
		ts = append(ts, Target{t4, fmt.Sprintf("peak %s of %s, limit hit %d times", ib(float64(cs.PeakBytes)), ib(float64(r.MemLimit)), cs.LimitHits), yesNo(!ours.OOMKilled())})
	} else if ours != nil {
		ts = append(ts, Target{t4, "uncapped run", "n/a"})
	} else {
		ts = append(ts, na(t4))
	}
	for _, ab := range []struct{ name, what string }{
		{"ssdgnn-no-partition", "partition batches help (OUTRE Table 7): ssdgnn-no-partition slower and reads more than ssdgnn"},
		{"ssdgnn-no-hist", "history helps (OUTRE Table 9): ssdgnn-no-hist slower and reads more than ssdgnn"},
	} {
		c := r.config(ab.name)
		if c == nil || ours == nil {
			ts = append(ts, na(ab.what))
			continue
		}
		x, y := ratio(c.EpochSec, ours.EpochSec), ratio(c.IOReadPerEpoch, ours.IOReadPerEpoch)
		m := yesNo(x > 1 && y > 1)
		if math.IsNaN(x) || math.IsNaN(y) {
			m = "n/a"
		}
		ts = append(ts, Target{ab.what, fmt.Sprintf("time %.2fx, bytes %.2fx of ssdgnn", x, y), m})
	}
	return append(ts, accuracyTargets(r, ours)...)
}

// accuracyTargets: the model learns (every configuration well above
// chance), history costs no accuracy, and exact evaluation is cheap next
// to an epoch.
func accuracyTargets(r *Report, ours *ConfigResult) []Target {
	var ts []Target
	chance := r.Dataset.Chance()
	t5 := fmt.Sprintf("every configuration ends at >= 3x chance valid accuracy (chance %s)", pct(chance))
	if chance > 0 && len(r.Configs) > 0 {
		// A configuration that failed ends at no accuracy: it is named,
		// not counted as 0 % (before, a refused dual-cache read "lowest
		// 0.0% (dual-cache), 0.0x chance").
		worst, name := math.Inf(1), ""
		var failed []string
		for _, c := range r.Configs {
			if !c.OK() {
				failed = append(failed, c.Name)
				continue
			}
			if c.FinalValid < worst {
				worst, name = c.FinalValid, c.Name
			}
		}
		var v string
		if name != "" {
			v = fmt.Sprintf("lowest %s (%s), %.1fx chance", pct(worst), name, worst/chance)
		}
		if len(failed) > 0 {
			v = strings.TrimPrefix(v+"; failed: "+strings.Join(failed, ", "), "; ")
		}
		ts = append(ts, Target{t5, v, yesNo(len(failed) == 0 && worst >= 3*chance)})
	} else {
		ts = append(ts, Target{t5, "class count unknown", "n/a"})
	}
	const t6 = "history on and off differ by <= 0.5 points of valid accuracy after the same epochs"
	if nh := r.config("ssdgnn-no-hist"); nh != nil && ours != nil {
		d := 100 * (ours.FinalValid - nh.FinalValid)
		ts = append(ts, Target{t6, fmt.Sprintf("%+.2f points (ssdgnn %s, ssdgnn-no-hist %s)", d, pct(ours.FinalValid), pct(nh.FinalValid)), yesNo(math.Abs(d) <= 0.5)})
	} else {
		ts = append(ts, Target{t6, "missing configuration", "n/a"})
	}
	const t7 = "exact evaluation of valid and test takes <= 1/3 of an ssdgnn training epoch"
	if ours != nil && ours.EpochSec > 0 && ours.EvalSec > 0 {
		x := ours.EvalSec / ours.EpochSec
		ts = append(ts, Target{t7, fmt.Sprintf("%.2fs vs %.2fs (%.2f)", ours.EvalSec, ours.EpochSec, x), yesNo(x <= 1.0/3)})
	} else {
		ts = append(ts, Target{t7, "missing configuration", "n/a"})
	}
	return ts
}

func ib(x float64) string {
	if x < 0 || math.IsNaN(x) {
		return "-"
	}
	return humanize.IBytes(uint64(x))
}

// epochs counts n epochs in words: "1 later epoch", "2 epochs".
func epochs(n int, kind string) string {
	if n == 1 {
		return "1 " + kind + "epoch"
	}
	return fmt.Sprintf("%d %sepochs", n, kind)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// WriteMarkdown writes report.md's content.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Out-of-core benchmark, %s\n\n", r.Timestamp)
	m := r.Machine
	p("## Machine\n\n| | |\n| --- | --- |\n")
	p("| CPU | %s |\n| cores | %d |\n| RAM | %s |\n| disk | %s |\n| kernel | %s |\n| cgroup | %s |\n| Go | %s |\n\n",
		m.CPU, m.Cores, ib(float64(m.RAMBytes)), m.Disk, m.Kernel, m.Cgroup, m.Go)
	p("## Setup\n\n")
	if d := r.Dataset; d != nil {
		reused := "generated"
		if d.Reused {
			reused = "reused"
		}
		p("- dataset `%s` (%s): %d nodes, %d edges, %d training nodes, %d-dim float32 features, %s on disk, %.1fx the memory limit\n",
			d.Dir, reused, d.NumNodes, d.NumEdges, d.NumTrain, d.FeatDim, ib(float64(d.BytesOnDisk)), float64(d.BytesOnDisk)/float64(r.MemLimit))
		p("- partitioning `%s`: FENNEL, %d parts (about %d training nodes each)\n", PartitionName, d.Parts, d.NumTrain/int64(max(1, d.Parts)))
		if pl := d.Plan; pl != nil {
			from := ""
			if d.CacheBudgetFrom == "train" {
				from = ", what a bare `train --mem` with ssdgnn's flags leaves the caches"
			}
			p("- plan for %s of caches%s (alpha %.2f): feature %s, history %s, neighbour %s (tables %s)\n", ib(float64(cmp.Or(d.CacheBudget, r.CacheBudget))), from, pl.Alpha,
				ib(float64(pl.Feature.BudgetBytes)), ib(float64(pl.History.BudgetBytes)), ib(float64(pl.Neighbor.BudgetBytes)), ib(float64(pl.TableBytes())))
		}
	}
	if r.Capped {
		p("- memory limit: %s per child, page cache included (cgroup v%d under `%s`)\n", ib(float64(r.MemLimit)), r.CgroupVersion, r.CgroupParent)
	} else {
		p("- **UNCAPPED**: no memory limit was enforced (%s); every result below is uncapped\n", r.CapNote)
	}
	if r.CachesDropped {
		freed := " and the child cgroup's cache freed after it (`memory.force_empty`)"
		if r.CgroupVersion == 2 {
			freed = "" // cgroup.ForceEmpty frees nothing on v2
		}
		p("- page cache dropped before every configuration (`sync; echo 3 > /proc/sys/vm/drop_caches`)%s\n", freed)
	} else {
		p("- **page cache NOT dropped** between configurations (%s): later configurations may read from a warm cache\n", r.DropNote)
	}
	p("- %d epochs, fanouts %s, batch size %d\n- compute: %s\n", r.Epochs, r.Fanouts, r.BatchSize, r.Compute)
	if d := r.Dataset; d != nil && d.Classes > 0 {
		p("- accuracy: %d classes, chance %s; evaluation after every epoch, exact (layer-wise, valid and test in one pass); time to target = training and evaluation time until valid first reached the target (3x chance unless configured)\n", d.Classes, pct(d.Chance()))
	}
	p("- bytes read = the child's `/proc/self/io` read_bytes delta over the training part of each epoch (from `--metrics`); \"process read\" is `/proc/<pid>/io` read_bytes of the whole child, read after it exited and before it was reaped (`waitid(WNOWAIT)`), setup and evaluation included\n\n")

	p("## Per-epoch time and bytes read (means over epochs)\n\n")
	p("| configuration | epoch s | Sa | Ga | Tr | Co | read/epoch | requested/epoch | RR | nbr hit | feat hit | hist hit | valid acc | eval s | to target | peak mem | limit hits | OOM | status |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	for i := range r.Configs {
		c := &r.Configs[i]
		peak, hits := "-", "-"
		if c.Child != nil && c.Child.Cgroup != nil {
			peak, hits = ib(float64(c.Child.Cgroup.PeakBytes)), fmt.Sprint(c.Child.Cgroup.LimitHits)
		}
		status := "ok"
		if !c.OK() {
			status = "FAILED: " + strings.ReplaceAll(c.Error, "|", "/")
		}
		if !c.Capped {
			status += " (uncapped)"
		}
		if len(c.Epochs) == 0 {
			// Nothing was measured: dashes, not zeros that read as
			// figures (a refused child's row read 0.00 s and 0.0 %).
			p("| %s |%s %s | %s | %s | %s |\n", c.Name, strings.Repeat(" - |", 14), peak, hits, yesNo(c.OOMKilled()), status)
			continue
		}
		toTarget := "not reached"
		if c.SecondsToTarget >= 0 && c.EpochsToTarget > 0 {
			toTarget = fmt.Sprintf("%.1fs (%d ep)", c.SecondsToTarget, c.EpochsToTarget)
		}
		p("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s | %.2f | %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s |\n",
			c.Name, c.EpochSec, c.SampleSec, c.GatherSec, c.TransferSec, c.ComputeSec, ib(c.IOReadPerEpoch), ib(c.RequestedPerEpoch), c.RR,
			pct(c.NeighborHit), pct(c.FeatureHit), pct(c.HistHit), pct(c.FinalValid), c.EvalSec, toTarget, peak, hits, yesNo(c.OOMKilled()), status)
	}
	p("\n## First epoch and later epochs\n\n")
	p("The first epoch starts with an empty history cache: no embedding can be reused before one has been computed, so it reads more than the epochs after it.\n\n")
	p("| configuration | epoch 1 s | read epoch 1 | hist hit epoch 1 | later epochs | later epoch s | read/later epoch | hist hit later |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range r.Configs {
		if len(c.Epochs) == 0 {
			continue
		}
		if c.LaterEpochs == 0 {
			p("| %s | %.2f | %s | %s | 0 | - | - | - |\n", c.Name, c.FirstEpochSec, ib(c.FirstIORead), pct(c.FirstHistHit))
			continue
		}
		p("| %s | %.2f | %s | %s | %d | %.2f | %s | %s |\n", c.Name, c.FirstEpochSec, ib(c.FirstIORead), pct(c.FirstHistHit),
			c.LaterEpochs, c.LaterEpochSec, ib(c.LaterIOReadPerEpoch), pct(c.LaterHistHit))
	}
	p("\n## Gather against the disk's limit\n\n")
	if dev := r.Dataset.deviceProfile(); dev != nil {
		perRead, depth := dev.LimitReadSec()
		p("The gather stage's own reads (storage accounting, a merged read counted once with all its bytes) per epoch, their rate over the Gather busy seconds, and the device time they need at the disk's measured costs (device.json, %s reads, %.0f random reads/s at depth %d, %s/s sequential): reads ÷ random reads/s + bytes ÷ sequential bandwidth. Ga / limit = 1 would be a gather bound by the disk alone.\n\n",
			dev.ReadMode, 1/perRead, depth, ib(dev.SeqBytesPerSec))
		if !dev.HasGatherRate() {
			p("The device profile has no random rate at the gather's depth (%d by default): the limit is priced at depth %d, where a read costs more than in the gather's deeper queue, so the limit is too high and Ga / limit too low. `ssdgnn probe` measures both.\n\n", storage.DefaultGatherDepth, depth)
		}
	} else {
		p("No device profile: the limit is not computed.\n\n")
	}
	if d := r.Disk; d != nil {
		p("The disk probed again during this run (`ssdgnn probe --dry-run`, device.json unchanged), because a shared disk's random-read rate can move by half within the hour: \"limit now\" prices the same reads at the mean of the two probes' limits.\n\n")
		p("| disk | measured | random reads/s (depth) | at the gather's depth | sequential |\n| --- | --- | ---: | ---: | ---: |\n")
		for _, row := range []struct {
			name string
			dev  *storage.DeviceProfile
		}{{"device.json (training's costs)", r.Dataset.deviceProfile()}, {"before the first configuration", d.Before}, {"after the last configuration", d.After}} {
			if row.dev == nil {
				p("| %s | - | - | - | - |\n", row.name)
				continue
			}
			at, gather := "-", "-"
			if !row.dev.MeasuredAt.IsZero() {
				at = row.dev.MeasuredAt.UTC().Format(time.RFC3339)
			}
			if row.dev.HasGatherRate() {
				gather = fmt.Sprintf("%.0f (%d)", row.dev.GatherReadsPerSec, row.dev.GatherDepth)
			}
			p("| %s | %s | %.0f (%d) | %s | %s/s |\n", row.name, at, row.dev.RandomReadsPerSec, row.dev.RandomDepth, gather, ib(row.dev.SeqBytesPerSec))
		}
		p("\n")
	}
	p("| configuration | Ga s | reads | bytes read | reads/s | MB/s | limit s | Ga / limit | limit now s | Ga / limit now |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, c := range r.Configs {
		if len(c.Epochs) == 0 {
			p("| %s |%s\n", c.Name, strings.Repeat(" - |", 9))
			continue
		}
		now := "-"
		if c.GatherLimitNowSec > 0 {
			now = fmt.Sprintf("%.2f", c.GatherLimitNowSec)
		}
		p("| %s | %.2f | %.0f | %s | %.0f | %.1f | %.2f | %s | %s | %s |\n", c.Name, c.GatherSec, c.GatherReadsPerEpoch, ib(c.GatherBytesReadPerEpoch),
			c.GatherReadsPerSec, c.GatherMBPerSec, c.GatherLimitSec, ratio(c.GatherSec, c.GatherLimitSec), now, ratio(c.GatherSec, c.GatherLimitNowSec))
	}
	p("\n## Whole child processes\n\n| configuration | wall s | process read | inblock×512 | max RSS | exit |\n| --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, c := range r.Configs {
		if c.Child == nil {
			p("| %s | - | - | - | - | not run |\n", c.Name)
			continue
		}
		ch := c.Child
		exit := fmt.Sprint(ch.ExitCode)
		if ch.Signal != "" {
			exit = ch.Signal
		}
		// At or below the runner's own peak, ru_maxrss is the runner's
		// memory the child shared until exec (child.Result.MaxRSSBytes):
		// the child's own peak is only bounded by it. Every row read the
		// harness's 162 MiB, in a 110 MiB cgroup, before this said so.
		rss := ib(float64(ch.MaxRSSBytes))
		if ch.MaxRSSBytes > 0 && ch.MaxRSSBytes <= ch.RunnerPeakBytes {
			rss = "at most " + rss
		}
		p("| %s | %.1f | %s | %s | %s | %s |\n", c.Name, ch.WallSec, ib(float64(ch.ReadBytes)), ib(float64(ch.InblockBytes)), rss, exit)
	}
	p("\n## Configurations\n\n")
	for _, c := range r.Configs {
		p("- `%s`: %s\n", c.Name, c.Description)
	}
	p("\n## Targets (reported, not asserted)\n\n| target | measured | met |\n| --- | --- | --- |\n")
	for _, t := range r.Targets {
		p("| %s | %s | %s |\n", t.Name, t.Value, t.Met)
	}
	if rc := r.Resume; rc != nil {
		p("\n## Robustness (a): SIGKILL, then --resume\n\n")
		if rc.Error != "" {
			p("Check failed to run: %s\n", rc.Error)
		} else {
			p("Sent SIGKILL after %d of %d epochs were reported (the child ended: %s); resumed from the last checkpoint. Final valid accuracy %s resumed vs %s uninterrupted (|diff| %.4f, tolerance %.4f): %s.\n",
				rc.KilledAfterLines, rc.Epochs, rc.KilledSignal, pct(rc.ResumedValid), pct(rc.ReferenceValid), rc.AbsDiff, rc.Tolerance, map[bool]string{true: "PASS", false: "FAIL"}[rc.Pass])
		}
	}
	if sc := r.SmallLimit; sc != nil {
		p("\n## Robustness (b): memory limit below the plan's tables (%s)\n\n", ib(float64(sc.Limit)))
		p("- harness before training: refused=%s: `%s`\n", yesNo(sc.HarnessRefused), sc.HarnessMessage)
		p("- `ssdgnn plan --mem %d` in a cgroup: exit %d, OOM-killed %s: `%s`\n- result: %s\n", sc.Limit, sc.PlanExit, yesNo(sc.OOMKilled), sc.PlanMessage, map[bool]string{true: "PASS", false: "FAIL"}[sc.Pass])
	}
	p("\nCharts: `stages.png` (stacked Sa/Ga/Tr/Co seconds per epoch), `bytes.png` (bytes read per epoch).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFiles writes report.md, report.json, stages.png and bytes.png into
// dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String())); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n')); err != nil {
		return err
	}
	if err := r.PlotStages(filepath.Join(dir, "stages.png")); err != nil {
		return err
	}
	return r.PlotBytes(filepath.Join(dir, "bytes.png"))
}

func (r *Report) names() []string {
	var n []string
	for _, c := range r.Configs {
		if len(c.Epochs) == 0 {
			// Its bars are zeros that were never measured: the axis says
			// so (the charts drew "0 GiB" under the bare name).
			n = append(n, c.Name+" (no epoch)")
			continue
		}
		n = append(n, c.Name)
	}
	return n
}

// PlotStages draws the mean stage seconds per epoch, stacked, per
// configuration, each bar's total written above it.
func (r *Report) PlotStages(path string) error {
	p := plot.New()
	p.Title.Text = "busy seconds per epoch by stage"
	p.Y.Label.Text = "seconds"
	p.Y.Tick.Marker = plotfile.NiceTicks{}
	w := vg.Points(30)
	var prev *plotter.BarChart
	totals := make([]float64, len(r.Configs))
	for i, st := range []struct {
		name string
		get  func(*ConfigResult) float64
	}{
		{"Sample", func(c *ConfigResult) float64 { return c.SampleSec }},
		{"Gather", func(c *ConfigResult) float64 { return c.GatherSec }},
		{"Transfer", func(c *ConfigResult) float64 { return c.TransferSec }},
		{"Compute", func(c *ConfigResult) float64 { return c.ComputeSec }},
	} {
		vals := make(plotter.Values, len(r.Configs))
		for j := range r.Configs {
			vals[j] = st.get(&r.Configs[j])
			totals[j] += vals[j]
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		if prev != nil {
			bc.StackOn(prev)
		}
		p.Add(bc)
		p.Legend.Add(st.name, bc)
		prev = bc
	}
	if err := plotfile.BarLabels(p, totals, func(v float64) string { return fmt.Sprintf("%.0f s", v) }); err != nil {
		return err
	}
	// The stages overlap (a pipeline), so the busy seconds add up to
	// more than the epoch's wall time, marked on each bar.
	walls := make(plotter.XYs, len(r.Configs))
	for j, c := range r.Configs {
		walls[j] = plotter.XY{X: float64(j), Y: c.EpochSec}
	}
	mark, err := plotter.NewScatter(walls)
	if err != nil {
		return err
	}
	mark.GlyphStyle = draw.GlyphStyle{Shape: dashGlyph{}, Radius: w/2 + vg.Points(4), Color: color.Black}
	p.Add(mark)
	thumb := *mark // the legend's dash fits the thumbnail
	thumb.GlyphStyle.Radius = vg.Points(5)
	p.Legend.Add("epoch wall", &thumb)
	p.Legend.Top = true
	p.NominalX(r.names()...)
	return plotfile.SavePNG(p, vg.Length(max(6, 1.6*float64(len(r.Configs))))*vg.Inch, 4.5*vg.Inch, path)
}

// PlotBytes draws the storage bytes read per epoch per configuration, in
// GiB from 1 GiB (the report's 77 GB read as "75000.00 MiB"), each bar's
// value written above it.
func (r *Report) PlotBytes(path string) error {
	p := plot.New()
	p.Title.Text = "storage bytes read per epoch"
	p.Y.Tick.Marker = plotfile.NiceTicks{}
	unit, div := "MiB", float64(1<<20)
	for _, c := range r.Configs {
		if c.IOReadPerEpoch >= 1<<30 {
			unit, div = "GiB", 1<<30
		}
	}
	p.Y.Label.Text = unit
	vals := make(plotter.Values, len(r.Configs))
	for j, c := range r.Configs {
		vals[j] = max(0, c.IOReadPerEpoch) / div
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return err
	}
	bc.Color = plotutil.Color(0)
	p.Add(bc)
	if err := plotfile.BarLabels(p, vals, func(v float64) string { return fmt.Sprintf("%.3g %s", v, unit) }); err != nil {
		return err
	}
	p.NominalX(r.names()...)
	return plotfile.SavePNG(p, vg.Length(max(6, 1.6*float64(len(r.Configs))))*vg.Inch, 4.5*vg.Inch, path)
}

// dashGlyph is a horizontal line as wide as twice the glyph's radius.
type dashGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (dashGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.StrokeLine2(draw.LineStyle{Color: sty.Color, Width: vg.Points(2)}, pt.X-sty.Radius, pt.Y, pt.X+sty.Radius, pt.Y)
}

// deviceProfile is the dataset's device profile, nil without one.
func (d *Dataset) deviceProfile() *storage.DeviceProfile {
	if d == nil {
		return nil
	}
	return d.Device
}
