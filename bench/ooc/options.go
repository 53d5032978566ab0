package ooc

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
)

// Sentinel errors. Every error the package returns for these conditions
// wraps one of them (test with errors.Is).
var (
	// ErrOptions: an Options field is out of range.
	ErrOptions = errors.New("ooc: invalid options")
	// ErrNoCgroup: no writable memory cgroup controller (not root, no
	// controller mounted, or a v2 hierarchy that cannot delegate memory).
	ErrNoCgroup = cgroup.ErrNoCgroup
	// ErrChild: a child ssdgnn process failed.
	ErrChild = errors.New("ooc: child process failed")
	// ErrPlanTooBig: the plan's cache tables do not fit under the memory
	// limit; training is refused before it starts.
	ErrPlanTooBig = errors.New("ooc: plan does not fit the memory limit")
)

// Defaults of Options. A zero field selects its default.
const (
	DefaultDataSize     = 6 << 30 // features + graph bytes on disk
	DefaultMemLimit     = 2 << 30 // the cgroup's memory limit
	DefaultFeatDim      = 128
	DefaultAvgDegree    = 20.0
	DefaultTrainFrac    = 0.01 // ogbn-papers100M trains on 1.1% of its nodes
	DefaultEpochs       = 2
	DefaultLayers       = 3
	DefaultHidden       = 32
	DefaultBatchSize    = 1000
	DefaultFanouts      = "10,10,10"
	DefaultTrainPerPart = partition.TrainNodesPerPart // rounded down, uncapped: earlier runs' datasets keep their parts (prepare)
	// DefaultLR and DefaultDropout let the 3-layer SAGE learn the
	// generated graph (features: class signal ±1 under noise about 8.5 per
	// dimension) within two epochs: with the trainer's defaults (0.01,
	// 0.5) it ends at chance. Measured in docs/ooc.md ("Learnable
	// benchmark").
	DefaultLR      = 0.05
	DefaultDropout = 0.1
	// DefaultTargetFactor sets the accuracy target of time-to-target:
	// DefaultTargetFactor × chance (1/classes).
	DefaultTargetFactor = 3.0
	DefaultNeighborFrac = 0.25
	DefaultSeed         = 1
	// PartitionName and ProfileName name the reused partitioning and
	// profile under the dataset directory.
	PartitionName = "ooc"
	ProfileName   = "ooc"
)

// Options configures Run. A nil *Options means the defaults.
type Options struct {
	// Bin is the ssdgnn binary the children run (required).
	Bin string
	// Dir is the dataset directory; it is generated there unless a dataset
	// with the same size parameters is present (required).
	Dir string
	// OutDir receives report.md, report.json and the charts (required).
	OutDir string
	// DataSize is the target features+graph size on disk in bytes; the
	// node count follows from it.
	DataSize int64
	// MemLimit is the memory cgroup limit of every child, page cache
	// included.
	MemLimit int64
	// CacheBudget is the memory handed to the caches (plan --mem, and the
	// dual-cache split). Default: CacheFrac·MemLimit when CacheFrac is
	// set, else what a bare `ssdgnn train --mem MemLimit` with the ssdgnn
	// configuration's flags gives its caches on each dataset
	// (train.CacheShare from the benchmark's profile), so that the plan
	// is the product's default.
	CacheBudget int64
	// CacheFrac, when set and CacheBudget is 0, makes the budget that
	// fraction of MemLimit.
	CacheFrac float64
	// NeighborFrac is the dual-cache configuration's neighbour-cache share
	// of CacheBudget (the rest goes to the feature cache).
	NeighborFrac float64
	FeatDim      int
	AvgDegree    float64
	TrainFrac    float64
	// TrainPerPart sets the partition count: k = train nodes / TrainPerPart.
	TrainPerPart int
	Epochs       int
	Layers       int
	Hidden       int
	BatchSize    int
	Fanouts      string
	Seed         int64
	// LR and Dropout are the training children's --lr and --dropout.
	LR      float64
	Dropout float64
	// TargetFactor sets the valid accuracy whose time-to-target the
	// report gives: TargetFactor / classes (chance is 1/classes).
	TargetFactor float64
	// Configs selects configurations by name (nil: all of ConfigNames).
	Configs []string
	// Uncapped runs without a cgroup even where one could be made.
	Uncapped bool
	// RequireCgroup makes the absence of a cgroup an error instead of an
	// uncapped run.
	RequireCgroup bool
	// NoDropCaches skips dropping the page cache between configurations.
	NoDropCaches bool
	// CheckResume runs robustness check (a): SIGKILL mid-training, then
	// --resume, compared with an uninterrupted run.
	CheckResume bool
	// CheckSmallLimit runs robustness check (b): a limit below the plan's
	// tables must be refused before training.
	CheckSmallLimit bool
	// NoDiskCheck skips probing the disk just before the first
	// configuration and just after the last (ssdgnn probe --dry-run;
	// device.json is not changed). The report prices the gather's limit
	// at those rates as well as at device.json's, because a shared disk's
	// random-read rate can move by half within the hour.
	NoDiskCheck bool
	// DiskCheckDuration is each phase of those probes (default 1s).
	DiskCheckDuration time.Duration
	// ResumeEpochs is the length of the runs of check (a) (default 3).
	ResumeEpochs int
	// ChildTimeout bounds each child (0: none).
	ChildTimeout time.Duration
	// InFlight is every training child's --in-flight, the batches whose
	// input features may be in memory at once (0: the trainer's default,
	// 2). 1 halves the working set, leaving the page cache more of a
	// tight limit, at the cost of gather/compute overlap.
	InFlight int
	// Eval is every training child's --eval: "" (the trainer's default,
	// exact layer-wise), "layerwise" or "sampled".
	Eval string
	// Device is every training child's --device: "" or "cpu" (the
	// trainer's default) or "cuda" (Bin must then be the CUDA build,
	// bin/ssdgnn-cuda, and the machine must have a GPU).
	Device string
	// CgroupRoot is the cgroup filesystem mount (default /sys/fs/cgroup);
	// ProcCgroup the file naming our cgroup (default /proc/self/cgroup).
	CgroupRoot string
	ProcCgroup string
	Logger     *slog.Logger
	// Now stamps the report (default time.Now).
	Now func() time.Time
}

// ConfigNames lists the configurations in report order.
var ConfigNames = []string{"mmap-baseline", "dual-cache", "ssdgnn", "ssdgnn-no-partition", "ssdgnn-no-hist", "ssdgnn-rowwise", "ssdgnn-uring", "ssdgnn-nbr-mmap", "ssdgnn-nostream", "ssdgnn-pm"}

// partitionMajor says configuration name trains on the dataset relabelled
// partition-major ('ssdgnn relabel'), which prepare makes only when one
// is selected.
func partitionMajor(name string) bool { return name == "ssdgnn-pm" }

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if r.DataSize == 0 {
		r.DataSize = DefaultDataSize
	}
	if r.DiskCheckDuration == 0 {
		r.DiskCheckDuration = time.Second
	}
	if r.MemLimit == 0 {
		r.MemLimit = DefaultMemLimit
	}
	if r.CacheBudget == 0 && r.CacheFrac > 0 {
		r.CacheBudget = int64(r.CacheFrac * float64(r.MemLimit))
	}
	if r.NeighborFrac == 0 {
		r.NeighborFrac = DefaultNeighborFrac
	}
	def(&r.FeatDim, DefaultFeatDim)
	if r.LR == 0 {
		r.LR = DefaultLR
	}
	if r.Dropout == 0 {
		r.Dropout = DefaultDropout
	}
	if r.TargetFactor == 0 {
		r.TargetFactor = DefaultTargetFactor
	}
	if r.AvgDegree == 0 {
		r.AvgDegree = DefaultAvgDegree
	}
	if r.TrainFrac == 0 {
		r.TrainFrac = DefaultTrainFrac
	}
	def(&r.TrainPerPart, DefaultTrainPerPart)
	def(&r.Epochs, DefaultEpochs)
	def(&r.Layers, DefaultLayers)
	def(&r.Hidden, DefaultHidden)
	def(&r.BatchSize, DefaultBatchSize)
	def(&r.ResumeEpochs, 3)
	if r.Fanouts == "" {
		r.Fanouts = DefaultFanouts
	}
	if r.Seed == 0 {
		r.Seed = DefaultSeed
	}
	if r.Configs == nil {
		r.Configs = ConfigNames
	}
	if r.CgroupRoot == "" {
		r.CgroupRoot = "/sys/fs/cgroup"
	}
	if r.ProcCgroup == "" {
		r.ProcCgroup = "/proc/self/cgroup"
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// Validate reports the first invalid field, wrapping ErrOptions. Zero
// fields are valid (they select defaults).
func (o *Options) Validate() error {
	if o == nil {
		return opterr.Errorf(ErrOptions, "%s, %s and OutDir are required", opterr.Field("Bin"), opterr.Field("Dir"))
	}
	r := o.withDefaults()
	bad := func(format string, a ...any) error {
		return opterr.Errorf(ErrOptions, format, a...)
	}
	switch {
	case r.Bin == "" || r.Dir == "" || r.OutDir == "":
		return bad("%s, %s and OutDir are required", opterr.Field("Bin"), opterr.Field("Dir"))
	case outpath.Within(r.Dir, r.OutDir) || outpath.Within(filepath.Clean(r.Dir)+"-pm", r.OutDir):
		// The report, logs, plans and checkpoints would land among the
		// dataset's files (--out D --dir D ran, writing D/logs, D/runs
		// and D/plan.json), and a later `gen --force` of the dataset
		// would take them with it.
		return bad("%s %s is, or lies inside, the dataset directory %s %s (or its partition-major copy): name another directory",
			opterr.Field("OutDir"), r.OutDir, opterr.Field("Dir"), r.Dir)
	case r.DataSize < 0 || r.MemLimit < 0 || r.CacheBudget < 0:
		return bad("negative size (data %d, mem limit %d, cache budget %d)", r.DataSize, r.MemLimit, r.CacheBudget)
	case r.CacheBudget >= r.MemLimit:
		return bad("%s %s must be below %s %s", opterr.Field("CacheBudget"), bytefmt.Up(r.CacheBudget), opterr.Field("MemLimit"), bytefmt.Down(r.MemLimit))
	case !(r.NeighborFrac > 0 && r.NeighborFrac < 1):
		return bad("%s %g, want a share in (0,1)", opterr.Field("NeighborFrac"), r.NeighborFrac)
	case !(r.CacheFrac >= 0 && r.CacheFrac < 1):
		return bad("%s %g, want a share in [0,1)", opterr.Field("CacheFrac"), r.CacheFrac)
	case !(r.TrainFrac > 0 && r.TrainFrac < 0.9):
		return bad("%s %g must be in (0,0.9)", opterr.Field("TrainFrac"), r.TrainFrac)
	case !(r.AvgDegree >= 0) || math.IsInf(r.AvgDegree, 0):
		return bad("%s %g, want a finite degree", opterr.Field("AvgDegree"), r.AvgDegree)
	case r.FeatDim < 0 || r.TrainPerPart < 0 || r.Epochs < 0 || r.Layers < 0 || r.Hidden < 0 || r.BatchSize < 0 || r.ResumeEpochs < 0:
		return bad("negative count")
	case r.ResumeEpochs < 2 && r.CheckResume:
		return bad("%s %d: the resume check needs at least 2", opterr.Field("ResumeEpochs"), r.ResumeEpochs)
	case !(r.LR >= 0) || math.IsInf(r.LR, 0) || !(r.Dropout >= 0 && r.Dropout < 1) || !(r.TargetFactor >= 0) || math.IsInf(r.TargetFactor, 0):
		return bad("LR %g, %s %g (want [0,1)), TargetFactor %g", r.LR, opterr.Field("Dropout"), r.Dropout, r.TargetFactor)
	case r.ChildTimeout < 0:
		return bad("negative %s", opterr.Field("ChildTimeout"))
	case r.DiskCheckDuration < 0:
		return bad("negative DiskCheckDuration")
	case r.InFlight < 0:
		return bad("negative %s", opterr.Field("InFlight"))
	case r.Eval != "" && r.Eval != "layerwise" && r.Eval != "sampled":
		return bad("%s %q, want layerwise or sampled", opterr.Field("Eval"), r.Eval)
	case r.Device != "" && r.Device != "cpu" && r.Device != "cuda":
		return bad("%s %q, want cpu or cuda", opterr.Field("Device"), r.Device)
	}
	for i, c := range r.Configs {
		if !knownConfig(c) {
			return bad("unknown configuration %q (want one of %v)", c, ConfigNames)
		}
		if slices.Contains(r.Configs[:i], c) {
			// Its second run would remove the first's directory
			// (runs/NAME) and the report would hold two rows of it.
			return bad("configuration %q given twice", c)
		}
	}
	if _, err := NodesFor(r.DataSize, r.FeatDim, r.AvgDegree); err != nil {
		return err
	}
	return r.validateChildren()
}

// validateChildren parses and checks every configuration's training
// flags as the child's `ssdgnn train` will (cliflags.ParseTrain, then
// train.Options.Validate), so that a bad --fanouts, an --in-flight out of
// range or fanouts for another layer count are refused before the dataset
// is generated, partitioned and profiled, not in the first child after
// that. r has its defaults.
func (r *Options) validateChildren() error {
	h := &harness{o: *r}
	ds := &Dataset{Dir: r.Dir, PlanFile: "plan.json", Plan: new(Plan)}
	names := r.Configs
	if len(names) == 0 {
		names = ConfigNames
	}
	for _, name := range names {
		_, flags := h.configFlags(name, ds)
		args := append(h.trainArgs(r.Dir, r.Epochs, "metrics.jsonl", "checkpoints")[1:], flags...)
		t, _, err := cliflags.ParseTrain(args)
		if err == nil {
			// The partitioning is the dataset's, not there yet: the
			// rest is checked without it.
			o := t.Options
			o.Selection = sample.ModeRandom
			err = o.Validate()
		}
		if err != nil {
			return fmt.Errorf("%w: configuration %s: its training flags: %w", ErrOptions, name, err)
		}
	}
	return nil
}

func knownConfig(c string) bool {
	for _, n := range ConfigNames {
		if n == c {
			return true
		}
	}
	return false
}

// BytesPerNode estimates the on-disk bytes per node of a generated dataset:
// a float32 feature row, an int64 indptr entry, int32 label, and the int32
// neighbour ids (the generator drops about 5% of its edges as duplicates and
// self loops).
func BytesPerNode(featDim int, avgDegree float64) float64 {
	return float64(4*featDim+8+4) + 4*avgDegree*0.95
}

// NodesFor returns the node count whose dataset is about dataSize bytes.
func NodesFor(dataSize int64, featDim int, avgDegree float64) (int64, error) {
	n := int64(float64(dataSize) / BytesPerNode(featDim, avgDegree))
	if n < 1000 {
		return 0, fmt.Errorf("%w: data size %d gives %d nodes, want at least 1000", ErrOptions, dataSize, n)
	}
	if n >= 1<<31 {
		return 0, fmt.Errorf("%w: data size %d gives %d nodes, more than the int32 ids allow", ErrOptions, dataSize, n)
	}
	return n, nil
}
