package cliflags

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// Train is `ssdgnn train`'s flags: the train.Options they set, and the
// values Options parses or the caller resolves with the dataset open.
type Train struct {
	// Options is what the flags set; Options() completes it.
	Options train.Options

	Fanouts, EvalFanouts string
	// Selection is the parsed --selection; sample.ModeAuto is left for
	// the caller (train.AutoSelection with Partition).
	Selection string
	Partition string
	// PartitionSet says --partition was given (Parse): auto selection
	// then never stands another partitioning in for it.
	PartitionSet                        bool
	HistPolicy, FeatPolicy              string
	Metrics, Plot, Device               string
	Source                              SourceFlag
	Reads                               ReadFlags
	PlanFile, ProfileName               string
	Reprofile, JSON                     bool
	Seed                                int64
	FeatCache, HistCache, NeighborCache ByteSize
	Mem, MemLimit                       ByteSize
}

// Register registers train's flags on f with their defaults.
func (t *Train) Register(f *pflag.FlagSet) {
	o := &t.Options
	f.StringVar(&o.Model, "model", train.DefaultModel, "model: sage, gcn or gat")
	f.IntVar(&o.Layers, "layers", train.DefaultLayers, "number of layers")
	f.IntVar(&o.Hidden, "hidden", train.DefaultHidden, "hidden width (per head for gat)")
	f.IntVar(&o.Heads, "heads", train.DefaultHeads, "attention heads (gat)")
	f.Float64Var(&o.Dropout, "dropout", train.DefaultDropout, "dropout probability on every layer's input")
	f.Float64Var(&o.LR, "lr", train.DefaultLR, "Adam learning rate")
	f.Float64Var(&o.WeightDecay, "weight-decay", train.DefaultWeightDecay, "L2 weight decay added to the gradient")
	f.IntVar(&o.Epochs, "epochs", train.DefaultEpochs, "epochs to train")
	f.IntVar(&o.BatchSize, "batch-size", train.DefaultBatchSize, BatchSizeUsage)
	f.StringVar(&t.Fanouts, "fanouts", DefaultFanouts, "neighbours sampled per layer, input layer first (-1: all)")
	f.StringVar(&t.EvalFanouts, "eval-fanouts", "", "fanouts of sampled inference on valid/test (default --fanouts; -1,-1 is exact)")
	f.IntVar(&o.EvalEvery, "eval-every", 1, "evaluate every N epochs (and after the last)")
	f.StringVar(&o.EvalMode, "eval", train.EvalLayerwise, "evaluation of valid/test: layerwise (exact, full neighbourhoods, one pass) or sampled (--eval-fanouts)")
	f.Var((*ByteSize)(&o.EvalMemBytes), "eval-mem", "bound on a layer-wise evaluation chunk (default: three quarters of the training working set)")
	f.Float64Var(&o.UntilValid, "until-valid", 0, "stop after the first evaluation whose valid accuracy reaches this fraction (e.g. 0.5)")
	f.StringVar(&t.Selection, "selection", "auto", "batch construction: auto (partition when DIR has --partition, or without --partition its only partitioning; else random), random or partition")
	f.StringVar(&t.Partition, "partition", string(partition.Fennel), "partitioning name under DIR/partitions (partition selection)")
	f.IntVar(&o.PartsPerBatch, "parts-per-batch", 0, "partitions per macro batch (0: --batch-size / the partitioning's mean training nodes per partition)")
	f.Int64Var(&t.Seed, "seed", 1, "random seed (same seed, same result)")
	f.IntVar(&o.Workers, "workers", 0, "sampler goroutines (0: one per core; with --mem, fewer where the budget needs the room, and then results can depend on the core count: give it for runs reproducible across machines)")
	f.StringVar(&t.Device, "device", "cpu", "compute backend: cpu, or cuda (bin/ssdgnn-cuda, built with make build-cuda)")
	t.Source.Register(f)
	f.BoolVar(&o.NoFeatureBlock, "no-feature-block", false, "on a partition-major dataset ('ssdgnn relabel'), do not load each macro batch's feature rows with sequential reads")
	t.Reads.Register(f)
	f.IntVar(&o.FeatIODepth, "io-depth", 0, fmt.Sprintf("feature reads in flight per batch (0: %d, or with --mem as many as keep their read slots within a 64th of it, %d to %d)", featurecache.DefaultIODepth, storage.DefaultScatterDepth, featurecache.DefaultIODepth))
	f.BoolVar(&o.NormalizeFeatures, "normalize-features", false, "scale every feature row to unit L1 norm")
	f.StringVar(&o.ZeroCopy, "zero-copy", train.ZeroCopyAuto, "feature-cache hits read by the backend straight from host memory: auto (on for GPU backends), on or off")
	f.StringVar(&o.StreamInput, "stream-input", train.StreamInputAuto, "aggregate the input layer on the host as its rows are read, so a batch holds its destinations, not its input rows: auto (when --mem would otherwise cut batches into micro-batches), on or off (SAGE and GCN)")
	f.IntVar(&o.ScanBatches, "scan-batches", 0, "with the streamed input layer, batches in flight whose input rows one scan reads, each shared row once (default: all in flight, at most the reuse depth; 1: each batch alone)")
	f.BoolVar(&o.NoHist, "no-hist", false, "disable historical embeddings")
	f.Int64Var(&o.Staleness, "staleness", 0, "iterations a historical embedding stays usable (default: one epoch of batches past the reuse depth, at most 100; with --plan, what its profile assumed; 1: never reused)")
	f.StringVar(&t.HistPolicy, "hist-policy", "staleness", "history admission: staleness or grad (FreshGNN)")
	f.Float64Var(&o.PGrad, "pgrad", histcache.DefaultPGrad, "fraction admitted by --hist-policy grad")
	f.Var(&t.HistCache, "hist-cache", "history cache size (overrides the plan; default: 20% of nodes; 0: none)")
	f.Var(&t.FeatCache, "feat-cache", "feature cache size (overrides the plan; default none)")
	f.StringVar(&t.FeatPolicy, "feat-policy", "auto", "feature cache policy: auto (profiled with --mem/--plan, else degree), degree, profiled or dynamic")
	f.Var(&t.NeighborCache, "neighbor-cache", "global neighbour cache size (overrides the plan; 0: none)")
	f.Var(&t.Mem, "mem", "memory budget of the whole process (e.g. 2GiB; default: the memory cgroup's limit, if any): divided into runtime reserve, model and fixed state, in-flight batches (cut into micro-batches when they do not fit) and the planned caches")
	f.Var(&t.MemLimit, "mem-limit", "deprecated alias of --mem")
	f.IntVar(&o.InFlight, "in-flight", 0, "batches whose input features may be in memory at once (default 2; with --mem, 1 when two would cut batches into more micro-batches; 1: no gather/compute overlap)")
	f.BoolVar(&o.Spill, "spill", false, "decouple the sample stage: sample batches ahead into a spill file and read them back (OUTRE §4.1)")
	f.IntVar(&o.SpillChunk, "spill-chunk", train.DefaultSpillChunk, "batches per spill chunk (--spill)")
	f.IntVar(&o.SpillAhead, "spill-ahead", train.DefaultSpillAhead, "written chunks that may wait unread (--spill; with history, at least the chunks of the reuse depth)")
	f.StringVar(&o.SpillDir, "spill-dir", "", "directory of the spill file (--spill; default DIR/spill)")
	f.StringVar(&t.PlanFile, "plan", "", "size the caches from this plan.json (from 'ssdgnn plan') instead of profiling")
	f.StringVar(&t.ProfileName, "profile-name", "", "name of the profile --mem plans from under DIR/profile (reused when it matches this training, else profiled and written; default: "+train.DefaultProfileName+", or the one `ssdgnn profile` saved when it matches and "+train.DefaultProfileName+" does not)")
	f.BoolVar(&t.Reprofile, "reprofile", false, "with --mem and no --plan: run the profiling epoch even when the saved profile matches (new timings, so a new beta)")
	f.StringVar(&o.CheckpointDir, "checkpoint", "", "checkpoint directory (default DIR/checkpoints)")
	f.IntVar(&o.CheckpointEvery, "checkpoint-every", 0, "write a checkpoint every N epochs (0: at the end and on interrupt, and by --checkpoint-interval)")
	f.DurationVar(&o.CheckpointInterval, "checkpoint-interval", train.DefaultCheckpointInterval, "also write a checkpoint after an epoch when this long has passed since the last one, so a run killed outright (kill -9, an OOM kill) loses at most about that and an epoch (0: never by time)")
	f.StringVar(&o.Resume, "resume", "", "continue from this checkpoint (file or directory)")
	f.BoolVar(&t.JSON, "json", false, "print the final report as JSON instead of the table")
	f.StringVar(&t.Metrics, "metrics", "", "append one JSON line per epoch to this file (or FIFO, read already)")
	f.StringVar(&t.Plot, "plot", "", "plot loss and accuracy against time to this PNG")
}

// Parse completes t.Options from the flags parsed into f for training
// dataset dir, and returns it. It checks every value the flags alone can
// check. It leaves sample.ModeAuto, storage.ReadAuto and the source's
// "auto" to the caller, and sets no progress, logger, backend,
// partitions or callbacks.
func (t *Train) Parse(f *pflag.FlagSet, dir string) (*train.Options, error) {
	o := &t.Options
	// 0 means nothing for these: refuse it rather than take the default
	// silently (--epochs 0 used to train 100 epochs).
	if err := RequirePositive(f, "epochs", "hidden", "heads", "layers", "batch-size", "in-flight", "staleness",
		"eval-every", "spill-chunk", "spill-ahead", "scan-batches", "mem", "mem-limit", "eval-mem", "pgrad"); err != nil {
		return nil, err
	}
	switch {
	case o.CheckpointInterval < 0:
		return nil, fmt.Errorf("--checkpoint-interval %v: want 0 (never by time) or a positive duration", o.CheckpointInterval)
	case o.CheckpointInterval == 0:
		o.CheckpointInterval = -1 // train's zero is the default
	}
	var err error
	if o.Fanouts, err = ParseInts("fanouts", t.Fanouts); err != nil {
		return nil, err
	}
	if t.EvalFanouts != "" {
		if o.EvalFanouts, err = ParseInts("eval-fanouts", t.EvalFanouts); err != nil {
			return nil, err
		}
	}
	if len(o.Fanouts) != o.Layers && f.Changed("layers") && !f.Changed("fanouts") {
		o.Fanouts = make([]int, o.Layers)
		for i := range o.Fanouts {
			o.Fanouts[i] = 10
		}
	}
	if o.Selection, err = sample.ParseMode(t.Selection); err != nil {
		return nil, err
	}
	t.PartitionSet = f.Changed("partition")
	if o.HistPolicy, err = histcache.ParsePolicy(t.HistPolicy); err != nil {
		return nil, err
	}
	if o.FeatPolicy, err = featurecache.ParsePolicy(t.FeatPolicy); err != nil {
		return nil, err
	}
	if err := t.Source.Check(); err != nil {
		return nil, err
	}
	ro, err := t.Reads.Options()
	if err != nil {
		return nil, err
	}
	o.FeatRead, o.FeatIO, o.FeatCoalesceGap, o.FeatMaxReadAmp = ro.Mode, ro.IO, ro.CoalesceGap, ro.MaxReadAmplification
	if !(o.Dropout >= 0) || o.Dropout >= 1 { // NaN too
		return nil, fmt.Errorf("--dropout %v: want a probability in [0, 1)", o.Dropout)
	}
	if o.Dropout == 0 {
		o.Dropout = -1 // an explicit 0 means no dropout
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		return nil, fmt.Errorf("--lr %v: want a finite learning rate above 0", o.LR)
	}
	if !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0) {
		return nil, fmt.Errorf("--weight-decay %v: want a finite value of at least 0 (0: none)", o.WeightDecay)
	}
	if o.WeightDecay == 0 {
		o.WeightDecay = -1
	}
	o.Seed = uint64(t.Seed)
	// An explicit size overrides the plan's; an explicit 0 means none.
	explicit := func(name string, b ByteSize) int64 {
		if f.Changed(name) && b == 0 {
			return -1
		}
		return int64(b)
	}
	o.FeatCacheBytes, o.HistCacheBytes, o.NeighborCacheBytes = explicit("feat-cache", t.FeatCache), explicit("hist-cache", t.HistCache), explicit("neighbor-cache", t.NeighborCache)
	if err := conflicts(f, o); err != nil {
		return nil, err
	}
	if t.PlanFile != "" { // before the budget is known: --plan alone makes them meaningless
		if err := t.NoProfile(f, 0); err != nil {
			return nil, err
		}
	}
	if o.CheckpointDir == "" {
		o.CheckpointDir = filepath.Join(dir, train.DefaultCheckpointDir)
	}
	return o, nil
}

// RandomBatches refuses --partition and --parts-per-batch when batches are
// random: selection is sample.ModeRandom, given (--selection random) or
// resolved from auto on a dataset without a partitioning. Train and
// profile call it when they parse their flags and again once auto is
// resolved, so both situations are refused in one wording.
func RandomBatches(f *pflag.FlagSet, selection sample.Mode) error {
	return Inapplicable(f, selection == sample.ModeRandom,
		"with random batches (--selection random, or auto on a dataset without a partitioning)", "partition", "parts-per-batch")
}

// NoProfile refuses --reprofile and --profile-name when train reads and
// takes no profile: with --plan (the plan sizes the caches) or without a
// budget (mem, --mem as train.DefaultMem resolved it, is 0: nothing is
// planned). Parse calls it for --plan, train again once --mem is
// resolved; one wording for both.
func (t *Train) NoProfile(f *pflag.FlagSet, mem int64) error {
	return Inapplicable(f, t.PlanFile != "" || mem == 0,
		"with --plan or without --mem (no profile is read or taken: a plan sizes the caches itself, and no budget plans nothing)", "reprofile", "profile-name")
}

// conflicts refuses flags that other flags make meaningless for train.
func conflicts(f *pflag.FlagSet, o *train.Options) error {
	return errors.Join(
		Inapplicable(f, o.NoHist, "with --no-hist", "hist-cache", "hist-policy", "pgrad", "staleness"),
		Inapplicable(f, o.Model != train.ModelGAT, "with --model "+o.Model, "heads"),
		Inapplicable(f, o.EvalMode != train.EvalSampled, "with --eval "+cmp.Or(o.EvalMode, train.EvalLayerwise)+" (exact, full neighbourhoods)", "eval-fanouts"),
		RandomBatches(f, o.Selection),
		Inapplicable(f, !o.Spill, "without --spill", "spill-chunk", "spill-ahead", "spill-dir"),
		// These were taken and ignored (a hostile sweep, 2026-11-27).
		Inapplicable(f, !o.NoHist && o.HistPolicy != histcache.PolicyGrad, "with --hist-policy "+o.HistPolicy.String()+" (it is grad's admitted fraction)", "pgrad"),
		Inapplicable(f, !o.NoHist && o.Layers == 1, "with --layers 1 (no hidden layer, so no historical embeddings)", "hist-cache", "hist-policy", "staleness"),
		Inapplicable(f, o.EvalMode == train.EvalSampled, "with --eval sampled (it bounds layer-wise chunks)", "eval-mem"),
		Inapplicable(f, o.StreamInput == train.StreamInputOff, "with --stream-input off", "scan-batches"),
	)
}

// ParseTrain parses the argument list of `ssdgnn train` (what follows
// "train": DIR and flags, the global flags included) exactly as the
// command does, and returns the flags with Options completed by Parse,
// and DIR.
func ParseTrain(args []string) (*Train, string, error) {
	f := pflag.NewFlagSet("train", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	t := new(Train)
	t.Register(f)
	var quiet, verbose bool
	RegisterGlobal(f, &quiet, &verbose)
	if err := f.Parse(args); err != nil {
		return nil, "", fmt.Errorf("train %q: %w", args, err)
	}
	if f.NArg() != 1 {
		return nil, "", fmt.Errorf("train %q: want one DIR argument, got %d", args, f.NArg())
	}
	dir := f.Arg(0)
	if _, err := t.Parse(f, dir); err != nil {
		return nil, "", err
	}
	return t, dir, nil
}
