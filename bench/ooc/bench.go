package ooc

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/child"
	"github.com/ssdgnn/ssdgnn/storage"
)

// harness is one Run.
type harness struct {
	o   Options
	log *slog.Logger
	loc *cgroup.Location // nil: uncapped
	// capNote says why runs are uncapped (empty when capped).
	capNote string
	logDir  string
	seq     int
}

// Run prepares the dataset, runs every configuration (and the requested
// robustness checks) and writes report.md, report.json and the charts to
// o.OutDir. The returned report is complete even when configurations
// failed (their Error says why); err is for the harness itself failing.
func Run(ctx context.Context, o *Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	h := &harness{o: o.withDefaults()}
	h.log = h.o.Logger
	h.logDir = filepath.Join(h.o.OutDir, "logs")
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Timestamp: h.o.Now().UTC().Format(time.RFC3339), MemLimit: h.o.MemLimit, CacheBudget: h.o.CacheBudget,
		Epochs: h.o.Epochs, Layers: h.o.Layers, Hidden: h.o.Hidden, BatchSize: h.o.BatchSize, Fanouts: h.o.Fanouts}
	rep.Compute = fmt.Sprintf("GraphSAGE, %d layers, hidden width %d (reduced so that sampling and gathering dominate as they do next to a GPU), pure-Go CPU backend; evaluation only after the last epoch and excluded from epoch times", h.o.Layers, h.o.Hidden)
	h.setupCgroups()
	if h.loc == nil && h.o.RequireCgroup {
		return nil, fmt.Errorf("%w (RequireCgroup): %s", ErrNoCgroup, h.capNote)
	}
	rep.Capped, rep.CapNote = h.loc != nil, h.capNote
	if h.loc != nil {
		rep.CgroupVersion = int(h.loc.Version)
		rep.CgroupParent = h.loc.Dir
	}
	ds, err := h.prepare(ctx)
	if err != nil {
		return nil, err
	}
	rep.Dataset = ds
	rep.CacheBudget = ds.CacheBudget
	if err := h.checkConfigsFit(ds); err != nil {
		return nil, err
	}
	rep.Machine = describeMachine(h.o.Dir, rep.CgroupVersion)
	if !h.o.NoDiskCheck {
		rep.Disk = &DiskCheck{Before: h.probeDisk(ctx, "before")}
	}
	for _, name := range h.o.Configs {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep.Configs = append(rep.Configs, h.runConfig(ctx, name, ds))
	}
	if ctx.Err() != nil {
		// Interrupted during the last configuration: its child was asked
		// to stop, so its result is not one, and a report written now
		// would present the run as complete (as after an interrupt
		// during an earlier configuration, nothing is written).
		return nil, ctx.Err()
	}
	if rep.Disk != nil {
		rep.Disk.After = h.probeDisk(ctx, "after")
		for i := range rep.Configs {
			rep.Configs[i].GatherLimitNowSec = rep.Disk.limitNow(&rep.Configs[i])
		}
	}
	rep.CachesDropped = len(rep.Configs) > 0
	for _, c := range rep.Configs {
		if c.CacheDrop != "dropped" {
			rep.CachesDropped = false
			rep.DropNote = c.CacheDrop
		}
	}
	if h.o.CheckResume {
		rep.Resume = h.checkResume(ctx, ds)
	}
	if h.o.CheckSmallLimit {
		rep.SmallLimit = h.checkSmallLimit(ctx, ds)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // interrupted during the robustness checks
	}
	rep.Targets = evaluateTargets(rep)
	if err := rep.WriteFiles(h.o.OutDir); err != nil {
		return rep, err
	}
	return rep, nil
}

func (h *harness) setupCgroups() {
	if h.o.Uncapped {
		h.capNote = "uncapped: --uncapped was given"
		return
	}
	loc, err := cgroup.Parent(h.o.CgroupRoot, h.o.ProcCgroup, h.log)
	if err == nil {
		// Probe: make and remove one, so a refusal shows up now.
		var cg *cgroup.Cgroup
		if cg, err = cgroup.Create(loc, "probe", h.o.MemLimit); err == nil {
			err = cg.Remove()
		}
	}
	if err != nil {
		h.capNote = "uncapped: " + err.Error()
		h.log.Warn("running uncapped", "err", err)
		return
	}
	h.loc = &loc
}

// probeDisk measures the disk under the dataset as it is now (ssdgnn
// probe --dry-run: device.json is left as it is), or logs why it could
// not and returns nil.
func (h *harness) probeDisk(ctx context.Context, when string) *storage.DeviceProfile {
	out, err := h.setup(ctx, "disk-"+when, "probe", h.o.Dir, "--dry-run", "--duration", h.o.DiskCheckDuration.String(), "-q", "--json")
	var dev *storage.DeviceProfile
	if err == nil {
		dev, err = storage.ParseDeviceProfile(out, "ssdgnn probe --json output")
	}
	if err != nil {
		h.log.Warn("disk check: probe failed", "when", when, "err", err)
		return nil
	}
	return dev
}

// setup runs an unmeasured, uncapped ssdgnn command and returns its stdout.
func (h *harness) setup(ctx context.Context, name string, args ...string) ([]byte, error) {
	h.seq++
	base := filepath.Join(h.logDir, fmt.Sprintf("%02d-%s", h.seq, name))
	res, err := child.Run(ctx, child.Spec{Name: name, Argv: append([]string{h.o.Bin}, args...),
		StdoutPath: base + ".stdout", StderrPath: base + ".stderr"})
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("%w: ssdgnn %s: exit %d %s: %s", ErrChild, strings.Join(args, " "), res.ExitCode, res.Signal, res.StderrTail)
	}
	return os.ReadFile(base + ".stdout")
}

// configArgs returns the train flags of a configuration. Every
// configuration, the baselines included, trains under the same budget
// rule: --mem is the cgroup's limit and the dataset's plan (--plan, so no
// configuration profiles) gives the working-set estimate; batches that do
// not fit what the budget leaves are cut into micro-batches. The
// configurations differ only in their selection, caches and reads.
func (h *harness) configArgs(name string, ds *Dataset) (desc string, args []string) {
	if partitionMajor(name) {
		ds = ds.PM
	}
	desc, args = h.configFlags(name, ds)
	if args == nil {
		return desc, nil
	}
	budget := []string{"--mem", strconv.FormatInt(h.o.MemLimit, 10)}
	if ds.PlanFile != "" {
		budget = append(budget, "--plan", ds.PlanFile)
	}
	return desc, append(budget, args...)
}

func (h *harness) configFlags(name string, ds *Dataset) (desc string, args []string) {
	o := &h.o
	p := ds.Plan
	size := func(n int64) string { return strconv.FormatInt(n, 10) }
	planned := []string{"--feat-cache", size(p.Feature.BudgetBytes), "--neighbor-cache", size(p.Neighbor.BudgetBytes)}
	hist := []string{"--hist-cache", size(p.History.BudgetBytes)}
	part := []string{"--selection", "partition", "--partition", PartitionName}
	// Feature misses: the baseline reads them as the page-cache peer does
	// (buffered, a 4 KiB page per row, BaselineIODepth reads in flight);
	// every other configuration with O_DIRECT (only the row's aligned
	// blocks, no page cache) and the trainer's default I/O depth.
	direct := []string{"--feat-read", childFeatRead.String()}
	planned = append(planned, direct...)
	// The peers read every missed row with its own pread, as ssdgnn did
	// before read plans (docs/ooc.md, "Gather in big pieces");
	// ssdgnn-rowwise is ssdgnn read that way.
	rowwise := []string{"--coalesce-gap", "0", "--io", "pread"}
	// Neighbour lists through the mapping, one page fault at a time, as
	// the peers and ssdgnn before batched neighbour reads sampled.
	nbrMmap := []string{"--source", "mmap"}
	// The input matrix gathered whole, micro-batch by micro-batch, as the
	// peers and ssdgnn before the streamed input layer gathered it.
	unstreamed := []string{"--stream-input", "off"}
	switch name {
	case "mmap-baseline":
		return fmt.Sprintf("random batches, no caches: features and graph through the page cache (OUTRE's PyG+mmap), %d feature reads in flight", BaselineIODepth),
			[]string{"--selection", "random", "--no-hist", "--feat-cache", "0", "--neighbor-cache", "0", "--feat-read", "buffered", "--io-depth", strconv.Itoa(BaselineIODepth), "--coalesce-gap", "0", "--io", "pread", "--source", "mmap", "--stream-input", "off"}
	case "dual-cache":
		nb := int64(o.NeighborFrac * float64(ds.CacheBudget))
		return fmt.Sprintf("random batches, neighbour cache %.0f%% + feature cache %.0f%% of the cache budget by hand (Ginex-style), O_DIRECT feature reads, no history", 100*o.NeighborFrac, 100*(1-o.NeighborFrac)),
			append(append(append(append([]string{"--selection", "random", "--no-hist", "--neighbor-cache", size(nb), "--feat-cache", size(ds.CacheBudget - nb)}, direct...), rowwise...), nbrMmap...), unstreamed...)
	case "ssdgnn":
		return "partition batches, planned cache sizes (plan.json), history cache, O_DIRECT feature reads merged by the measured gap (device.json), neighbour lists read per hop in merged reads, io_uring where allowed, input layer streamed, each scan reading the rows of the batches in flight together (shared scans; where the budget allows two whole batches, else streamed where it would cut batches)",
			append(append(part, planned...), hist...)
	case "ssdgnn-nostream":
		return "ssdgnn with the input matrix gathered whole (--stream-input off): ssdgnn without the streamed input layer, so the budget cuts more micro-batches",
			append(append(append(part, planned...), hist...), unstreamed...)
	case "ssdgnn-nbr-mmap":
		return "ssdgnn with neighbour lists through the mapping (--source mmap), one page fault at a time: ssdgnn without batched neighbour reads",
			append(append(append(part, planned...), hist...), nbrMmap...)
	case "ssdgnn-uring":
		return "ssdgnn with one read per missed row (--coalesce-gap 0) submitted through io_uring where allowed, neighbour lists through the mapping: the submission alone",
			append(append(append(append(append(part, planned...), hist...), "--coalesce-gap", "0"), nbrMmap...), unstreamed...)
	case "ssdgnn-pm":
		return "ssdgnn on the dataset relabelled partition-major (ssdgnn relabel): each macro batch's own parts loaded by sequential reads (dynamic feature block), misses merged, io_uring",
			append(append(part, planned...), hist...)
	case "ssdgnn-rowwise":
		return "ssdgnn with one pread per missed row (--coalesce-gap 0 --io pread) and neighbour lists through the mapping, as before read plans",
			append(append(append(append(append(part, planned...), hist...), rowwise...), nbrMmap...), unstreamed...)
	case "ssdgnn-no-partition":
		return "ablation: random batches, planned cache sizes, history cache, O_DIRECT feature reads",
			append(append([]string{"--selection", "random"}, planned...), hist...)
	case "ssdgnn-no-hist":
		return "ablation: partition batches, planned cache sizes, --no-hist, O_DIRECT feature reads",
			append(append(part, planned...), "--no-hist")
	}
	return "", nil
}

// BaselineIODepth is mmap-baseline's --io-depth: the core count of the
// development machine (2), the depth every configuration had before
// --io-depth existed. PyG's x[idx] on a np.memmap faults pages in from one
// thread, so this is, if anything, generous to the peer.
const BaselineIODepth = 2

// childFeatRead is how every configuration but mmap-baseline reads
// feature misses, and so how the benchmark's profile prices them.
const childFeatRead = storage.ReadDirect

func usesPlan(name string) bool { return strings.HasPrefix(name, "ssdgnn") }

// trainArgs are the flags every configuration shares.
func (h *harness) trainArgs(dir string, epochs int, metrics, ckpt string) []string {
	o := &h.o
	// -v: the trainer logs every finished batch at debug level, which
	// says how far a child that timed out got (batchProgress).
	args := []string{"train", dir, "--model", "sage", "--layers", strconv.Itoa(o.Layers), "--hidden", strconv.Itoa(o.Hidden),
		"--epochs", strconv.Itoa(epochs), "--eval-every", "1", "--batch-size", strconv.Itoa(o.BatchSize),
		"--lr", strconv.FormatFloat(o.LR, 'g', -1, 64), "--dropout", strconv.FormatFloat(o.Dropout, 'g', -1, 64),
		"--fanouts", o.Fanouts, "--seed", strconv.FormatInt(o.Seed, 10), "--json", "-q", "-v", "--metrics", metrics, "--checkpoint", ckpt}
	if o.InFlight > 0 {
		args = append(args, "--in-flight", strconv.Itoa(o.InFlight))
	}
	if o.Eval != "" {
		args = append(args, "--eval", o.Eval)
	}
	if o.Device != "" && o.Device != "cpu" {
		args = append(args, "--device", o.Device)
	}
	return args
}

// batchProgress returns how far a training child got, from the last
// "batch done" debug line in its stderr tail (for example "epoch 0,
// batch 6 of 14 after 195 s"), or "" when there is none.
func batchProgress(stderrTail string) string {
	lines := strings.Split(stderrTail, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if !strings.Contains(l, `msg="batch done"`) {
			continue
		}
		field := func(k string) string {
			j := strings.Index(l, " "+k+"=")
			if j < 0 {
				return "?"
			}
			v := l[j+len(k)+2:]
			if e := strings.IndexByte(v, ' '); e >= 0 {
				v = v[:e]
			}
			return v
		}
		secs := field("epoch_s")
		if f, err := strconv.ParseFloat(secs, 64); err == nil {
			secs = strconv.FormatFloat(f, 'f', 0, 64)
		}
		return fmt.Sprintf("epoch %s, batch %s of %s after %s s", field("epoch"), field("batch"), field("of"), secs)
	}
	return ""
}

// capped runs one measured child in a fresh cgroup of limit bytes
// (uncapped when the harness has none), dropping the page cache first.
func (h *harness) capped(ctx context.Context, name string, argv []string, limit int64, watch func() bool) (res *ChildResult, drop string, err error) {
	drop = "dropped"
	if h.o.NoDropCaches {
		drop = "not dropped: --no-drop-caches"
	} else if derr := cgroup.DropPageCache(); derr != nil {
		drop = "not dropped: " + derr.Error()
	}
	h.seq++
	base := filepath.Join(h.logDir, fmt.Sprintf("%02d-%s", h.seq, name))
	spec := child.Spec{Name: name, Argv: argv, StdoutPath: base + ".stdout", StderrPath: base + ".stderr", Watch: watch, Timeout: h.o.ChildTimeout}
	if h.loc != nil {
		res, err = child.Capped(ctx, *h.loc, fmt.Sprintf("%d-%s", h.seq, name), limit, spec)
	} else {
		res, err = child.Run(ctx, spec)
	}
	return res, drop, err
}

func (h *harness) runConfig(ctx context.Context, name string, ds *Dataset) ConfigResult {
	desc, extra := h.configArgs(name, ds)
	cr := ConfigResult{Name: name, Description: desc, Capped: h.loc != nil}
	work := filepath.Join(h.o.OutDir, "runs", name)
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		cr.Error = err.Error()
		return cr
	}
	metrics := filepath.Join(work, "metrics.jsonl")
	dir, plan := ds.Dir, ds.Plan
	if partitionMajor(name) {
		if ds.PM == nil {
			cr.Error = "no partition-major dataset was prepared"
			return cr
		}
		dir, plan = ds.PM.Dir, ds.PM.Plan
	}
	args := append(h.trainArgs(dir, h.o.Epochs, metrics, filepath.Join(work, "checkpoints")), extra...)
	cr.Args = args
	if usesPlan(name) {
		if err := CheckPlanFits(plan, h.o.MemLimit); err != nil {
			cr.Error = err.Error()
			return cr
		}
	}
	h.log.Info("running", "config", name)
	res, drop, err := h.capped(ctx, name, append([]string{h.o.Bin}, args...), h.o.MemLimit, nil)
	cr.CacheDrop, cr.Child = drop, res
	if err != nil {
		cr.Error = err.Error()
		return cr
	}
	if b, err := os.ReadFile(res.Stdout); err == nil && res.OK() {
		if tr, err := ParseTrainReport(b); err == nil {
			cr.Epochs, cr.FinalValid, cr.FinalTest = tr.Epochs, tr.FinalValid, tr.FinalTest
			if tr.Interrupted {
				// Stopped by a signal (train checkpoints and exits 0):
				// not the run asked for.
				cr.Error = fmt.Sprintf("interrupted after %d of %d epochs (checkpoint %s)", len(tr.Epochs), h.o.Epochs, tr.Checkpoint)
			}
		} else {
			cr.Error = err.Error()
		}
	}
	if cr.Epochs == nil {
		cr.Epochs, _ = readMetrics(metrics) // whatever finished before a failure
	}
	if !res.OK() && cr.Error == "" {
		cr.Error = fmt.Sprintf("exit %d %s", res.ExitCode, res.Signal)
		if res.OOMKilled() {
			cr.Error += " (OOM-killed)"
		}
		if res.KilledByUs {
			cr.Error += fmt.Sprintf(" (timed out after %s)", h.o.ChildTimeout)
		}
		if p := batchProgress(res.StderrTail); p != "" {
			cr.Error += "; last finished: " + p
		} else if res.StderrTail != "" {
			cr.Error += ": " + lastLine(res.StderrTail)
		}
	}
	cr.summarize(ds.NumTrain, ds.Device)
	cr.toTarget(ds.target(h.o.TargetFactor))
	return cr
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ResumeCheck is robustness check (a).
type ResumeCheck struct {
	Epochs int `json:"epochs"`
	// KilledAfterLines: metrics lines seen when SIGKILL was sent.
	KilledAfterLines int     `json:"killed_after_epochs"`
	KilledSignal     string  `json:"killed_signal"`
	ResumedOK        bool    `json:"resumed_ok"`
	ResumedValid     float64 `json:"resumed_valid_acc"`
	ReferenceValid   float64 `json:"reference_valid_acc"`
	AbsDiff          float64 `json:"abs_diff"`
	// Tolerance: the binomial standard error of the accuracy on the
	// validation set, times 3.
	Tolerance float64 `json:"tolerance"`
	Pass      bool    `json:"pass"`
	Error     string  `json:"error,omitempty"`
}

func (h *harness) checkResume(ctx context.Context, ds *Dataset) *ResumeCheck {
	o := &h.o
	rc := &ResumeCheck{Epochs: o.ResumeEpochs}
	_, extra := h.configArgs("ssdgnn", ds)
	work := filepath.Join(o.OutDir, "runs", "resume")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		rc.Error = err.Error()
		return rc
	}
	run := func(tag string, watch func() bool, more ...string) (*ChildResult, string, error) {
		metrics := filepath.Join(work, tag+".jsonl")
		args := append(append(h.trainArgs(o.Dir, o.ResumeEpochs, metrics, filepath.Join(work, tag+"-ckpt")), extra...), "--checkpoint-every", "1")
		// Evaluate only at the end in all three runs.
		args = append(args, more...)
		res, _, err := h.capped(ctx, "resume-"+tag, append([]string{o.Bin}, args...), o.MemLimit, watch)
		return res, metrics, err
	}
	ref, _, err := run("reference", nil)
	if err != nil || !ref.OK() {
		rc.Error = fmt.Sprintf("reference run failed: %v %s", err, childErr(ref))
		return rc
	}
	refRep, err := readTrainReport(ref.Stdout)
	if err != nil {
		rc.Error = err.Error()
		return rc
	}
	rc.ReferenceValid = refRep.FinalValid
	ckptDir := filepath.Join(work, "killed-ckpt")
	killedMetrics := filepath.Join(work, "killed.jsonl")
	lines := 0
	watch := func() bool {
		ep, _ := readMetrics(killedMetrics)
		lines = len(ep)
		if lines < 1 {
			return false
		}
		_, err := os.Stat(filepath.Join(ckptDir, "checkpoint.ssdc"))
		return err == nil
	}
	killed, _, err := run("killed", watch)
	if err != nil {
		rc.Error = err.Error()
		return rc
	}
	rc.KilledAfterLines, rc.KilledSignal = lines, killed.Signal
	if !killed.KilledByUs {
		rc.Error = fmt.Sprintf("the run ended (exit %d) before it could be killed: use more epochs or a larger graph", killed.ExitCode)
		return rc
	}
	res, _, err := run("resumed", nil, "--resume", ckptDir)
	// run("resumed") writes its own checkpoints to resumed-ckpt.
	if err != nil || !res.OK() {
		rc.Error = fmt.Sprintf("resume failed: %v %s", err, childErr(res))
		return rc
	}
	rep, err := readTrainReport(res.Stdout)
	if err != nil {
		rc.Error = err.Error()
		return rc
	}
	rc.ResumedOK = true
	rc.ResumedValid = rep.FinalValid
	rc.AbsDiff = abs(rc.ResumedValid - rc.ReferenceValid)
	nv := float64(max(1, ds.NumTrain/2)) // the generator's valid split is TrainFrac/2
	pq := rc.ReferenceValid * (1 - rc.ReferenceValid)
	rc.Tolerance = max(0.01, 3*sqrt(pq/nv))
	rc.Pass = rc.AbsDiff <= rc.Tolerance
	return rc
}

func childErr(r *ChildResult) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("exit %d %s: %s", r.ExitCode, r.Signal, lastLine(r.StderrTail))
}

func readTrainReport(path string) (*TrainReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTrainReport(b)
}

// SmallLimitCheck is robustness check (b).
type SmallLimitCheck struct {
	Limit int64 `json:"limit"`
	// HarnessRefused: CheckPlanFits refused the ssdgnn configuration
	// before starting it; HarnessMessage is its error.
	HarnessRefused bool   `json:"harness_refused"`
	HarnessMessage string `json:"harness_message"`
	// Plan: `ssdgnn plan --mem Limit`, run inside a cgroup of Limit bytes.
	PlanExit    int    `json:"plan_exit"`
	PlanMessage string `json:"plan_message"`
	OOMKilled   bool   `json:"oom_killed"`
	Pass        bool   `json:"pass"`
}

func (h *harness) checkSmallLimit(ctx context.Context, ds *Dataset) *SmallLimitCheck {
	// Half the two address tables every plan needs (4·N each), so `plan`
	// must refuse whatever share the neighbour cache would take: half of
	// all the plan's tables passed for those two once its neighbour
	// table grew (its offsets are 8 bytes a list).
	sc := &SmallLimitCheck{Limit: max(1, (ds.Plan.Feature.TableBytes+ds.Plan.History.TableBytes)/2)}
	if err := CheckPlanFits(ds.Plan, sc.Limit); err != nil {
		sc.HarnessRefused, sc.HarnessMessage = true, err.Error()
	}
	out := filepath.Join(h.o.OutDir, "runs", "small-limit-plan.json")
	argv := []string{h.o.Bin, "plan", h.o.Dir, "--profile", ProfileName, "--mem", strconv.FormatInt(sc.Limit, 10),
		"--hidden", strconv.Itoa(h.o.Hidden), "--out", out}
	// The planner itself needs memory for the profile (16 bytes a node and
	// its sort buffers); its cgroup gets the normal limit, so what is
	// tested is the message, not the OOM killer.
	res, _, err := h.capped(ctx, "small-limit-plan", argv, max(h.o.MemLimit, sc.Limit+256<<20), nil)
	if err != nil {
		sc.PlanMessage = err.Error()
		return sc
	}
	sc.PlanExit, sc.PlanMessage, sc.OOMKilled = res.ExitCode, lastLine(res.StderrTail), res.OOMKilled()
	sc.Pass = sc.HarnessRefused && res.ExitCode != 0 && !sc.OOMKilled && sc.PlanMessage != ""
	return sc
}

func abs(x float64) float64  { return math.Abs(x) }
func sqrt(x float64) float64 { return math.Sqrt(x) }
