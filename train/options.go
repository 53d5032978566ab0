package train

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Errors returned by the package. Every error wraps one of them or an error
// of a package it builds on.
var (
	ErrInvalidOptions = errors.New("train: invalid options")
	// ErrCheckpoint is wrapped by *CheckpointError.
	ErrCheckpoint = errors.New("train: bad checkpoint")
	// ErrMismatch reports a checkpoint of a different model or dataset.
	ErrMismatch = errors.New("train: checkpoint does not match")
	// ErrPlanMismatch reports a plan (--plan) made for another dataset.
	ErrPlanMismatch = errors.New("train: plan does not match the dataset")
	// ErrBudget reports caches (tables included) that do not fit
	// Options.MemBytes; New returns it before building anything. The
	// refusals of the commands this package also serves (profile, rr,
	// infer) are *BudgetError, which names the command and matches
	// ErrBudget under errors.Is.
	ErrBudget = errors.New("train: memory budget too small")
	// ErrNonFinite reports a NaN or infinite loss: training stops before
	// the update that would spread it into the weights.
	ErrNonFinite = errors.New("train: non-finite loss")
	// ErrNotTrainable reports a dataset without what training needs
	// (Trainable).
	ErrNotTrainable = errors.New("train: dataset cannot be trained on")
	// ErrNodeList reports an infer --nodes list (Trainer.InferNodes)
	// that cannot be read or names a node the dataset does not have.
	ErrNodeList = errors.New("train: bad node list")
)

// BudgetError is ErrBudget as the refusal of command Cmd ("profile", "rr",
// "infer"): its message reads as that command's own ("rr: memory budget
// too small: ..."), not train's, and errors.Is(err, ErrBudget) holds, as
// it does for Err's own chain.
type BudgetError struct {
	Cmd string // the command refused
	Err error  // what does not fit, and how to fix it
}

func (e *BudgetError) Error() string { return e.Cmd + ": memory budget too small: " + e.Err.Error() }

// Unwrap is ErrBudget and Err.
func (e *BudgetError) Unwrap() []error { return []error{ErrBudget, e.Err} }

// budgetErrorf is a *BudgetError of cmd whose Err is fmt.Errorf(format,
// args...).
func budgetErrorf(cmd, format string, args ...any) error {
	return &BudgetError{Cmd: cmd, Err: fmt.Errorf(format, args...)}
}

// Trainable reports, as an error wrapping ErrNotTrainable, what d lacks
// for training: features, classes with labels, or training nodes. Without
// them a run "succeeded" with a loss of 0 (no training nodes) or failed
// only after its first output (no features).
func Trainable(d *storage.Dataset) error {
	if err := usable(d); err != nil {
		return err
	}
	if len(d.TrainIdx()) == 0 {
		return fmt.Errorf("%w: dataset %s has no training nodes (%s is empty)", ErrNotTrainable, d.Dir(), storage.FileTrain)
	}
	return nil
}

// usable is what a model needs of d to be built and to predict: features
// and classes (New; inference needs no training nodes).
func usable(d *storage.Dataset) error {
	switch {
	case d.FeatDim() == 0:
		return fmt.Errorf("%w: dataset %s has no features (import it with --feat)", ErrNotTrainable, d.Dir())
	case d.Manifest().NumClasses < 1 || d.Labels() == nil:
		return fmt.Errorf("%w: dataset %s has no labels (import it with --labels)", ErrNotTrainable, d.Dir())
	}
	return nil
}

// MaxInFlight bounds Options.InFlight: every batch in flight holds its
// input rows and tensors, and past a few nothing overlaps more (1000 asked
// for a working set of 29 GiB on a 15 MiB dataset).
const MaxInFlight = 16

// Defaults of Options.
const (
	DefaultModel       = ModelSAGE
	DefaultLayers      = 2
	DefaultHidden      = 128
	DefaultHeads       = 4
	DefaultDropout     = 0.5
	DefaultLR          = 0.01
	DefaultWeightDecay = 5e-4
	DefaultEpochs      = 100
	DefaultBatchSize   = 1000
	// PipelineDepth is D without Options.Spill: batch i's reuse set is
	// decided from the history cache as it stands after compute of batch
	// i−D (see the package doc and ReuseDepth).
	PipelineDepth = 2
	// DefaultSpillChunk and DefaultSpillAhead are the defaults of
	// Options.SpillChunk and Options.SpillAhead.
	DefaultSpillChunk = sample.DefaultSpillChunk
	DefaultSpillAhead = 1
	// DefaultCheckpointInterval is Options.CheckpointInterval's default.
	DefaultCheckpointInterval = 10 * time.Minute
)

// Options configures a Trainer. A nil *Options means the defaults; zero
// fields take their defaults.
type Options struct {
	// Model architecture: ModelSAGE (default), ModelGCN or ModelGAT.
	Model string `json:"model"`
	// Layers (default 2), Hidden (default 128; per head for GAT), Heads
	// (GAT only, default 4).
	Layers int `json:"layers"`
	Hidden int `json:"hidden"`
	Heads  int `json:"heads"`
	// Dropout probability on every layer's input while training. nil
	// pointer semantics are avoided: a negative value means 0, zero means
	// the default 0.5.
	Dropout float64 `json:"dropout"`
	// LR (default 0.01) and WeightDecay (L2 added to the gradient; default
	// 5e-4, negative means 0) for Adam.
	LR          float64 `json:"lr"`
	WeightDecay float64 `json:"weight_decay"`
	// Epochs (default 100) and BatchSize (default 1000) of training.
	Epochs    int `json:"epochs"`
	BatchSize int `json:"batch_size"`
	// Fanouts per layer, input layer first; -1 takes every neighbour.
	// Default: 10 per layer.
	Fanouts []int `json:"fanouts"`
	// EvalFanouts are the fanouts of sampled inference on the valid and
	// test nodes (default Fanouts).
	EvalFanouts []int `json:"eval_fanouts"`
	// EvalEvery evaluates every that many epochs and after the last
	// (default 1).
	EvalEvery int `json:"eval_every"`
	// Selection is the batch construction (default sample.ModeRandom);
	// ModePartition needs Partitions.
	Selection     sample.Mode       `json:"selection"`
	Partitions    sample.Partitions `json:"-"`
	PartsPerBatch int               `json:"parts_per_batch"`
	Seed          uint64            `json:"seed"`
	Workers       int               `json:"workers"` // sampling goroutines (default sample's)
	Source        sample.Source     `json:"-"`
	// NoHist disables historical embeddings. Staleness, HistPolicy and
	// PGrad configure the cache (histcache.Options). Staleness 0 is the
	// plan's profile's bound when Profile has one, else one epoch of
	// batches past the reuse depth (histcache.EpochStaleness:
	// ⌈|train|/BatchSize⌉ + ReuseDepth, at most 100), the profile's
	// default too;
	// HistCacheBytes is its budget (0: Plan's, else room for 20 % of the
	// nodes; negative: no history cache, as NoHist).
	NoHist         bool             `json:"no_hist"`
	Staleness      int64            `json:"staleness"`
	HistPolicy     histcache.Policy `json:"hist_policy"`
	PGrad          float64          `json:"pgrad"`
	HistCacheBytes int64            `json:"hist_cache_bytes"`
	// FeatCacheBytes and FeatPolicy configure the feature cache;
	// NeighborCacheBytes the global neighbour cache. 0 takes Plan's size
	// (none without a Plan); a negative size means none even with a Plan.
	// FeatPolicy featurecache.PolicyAuto is PolicyProfiled with Profile's
	// counts when Profile is set, PolicyDegree otherwise.
	FeatCacheBytes int64               `json:"feat_cache_bytes"`
	FeatPolicy     featurecache.Policy `json:"-"`
	// FeatRead is how feature-cache misses are read: storage.ReadBuffered
	// (the default; through the page cache, a whole 4 KiB page per row) or
	// storage.ReadDirect (O_DIRECT: only the row's aligned blocks, no page
	// cache). FeatIODepth bounds the reads in flight per batch
	// (featurecache.Options.IODepth; 0: GatherDepth(MemBytes)).
	FeatRead    storage.ReadMode `json:"-"`
	FeatIODepth int              `json:"feat_io_depth,omitempty"`
	// FeatCoalesceGap and FeatIO are featurecache.Options.CoalesceGap
	// (0: the dataset's device.json; featurecache.PerRowReads: one read
	// per row) and IO (auto: io_uring where the kernel allows it).
	FeatCoalesceGap int64 `json:"feat_coalesce_gap,omitempty"`
	// FeatMaxReadAmp is featurecache.Options.MaxReadAmplification: the
	// cap on bytes read ÷ bytes of the missed rows when merging (0:
	// featurecache.DefaultMaxReadAmplification; featurecache.UncappedReads:
	// none).
	FeatMaxReadAmp     float64          `json:"feat_max_read_amp,omitempty"`
	FeatIO             storage.IOEngine `json:"-"`
	NeighborCacheBytes int64            `json:"neighbor_cache_bytes"`

	// NoFeatureBlock turns off the dynamic feature block of a
	// partition-major dataset (see FeatureBlockBytes), for comparison.
	NoFeatureBlock bool `json:"no_feature_block,omitempty"`

	// NeighborCross, when set, builds the neighbour cache with
	// neighborcache.PolicyCross over these counts (as the planner models
	// it for a partitioning); otherwise by degree.
	NeighborCross []int32 `json:"-"`
	// MemBytes, when positive, bounds the caches' memory (feature rows and
	// address table, history embeddings and slot table, neighbour lists
	// and index): New fails with ErrBudget before building anything when
	// the configured sizes cannot fit, and after building when the built
	// caches do not.
	MemBytes int64 `json:"mem_bytes,omitempty"`
	// Plan (from planner.Plan, see PlanMemory) sizes every cache whose
	// byte option is 0. Profile, when set, supplies the feature cache's
	// counts (saved_IO_feat) and the history cache's candidate scores
	// (Profile.HistScores, the plan's ranking, planner.Profile.HistScore;
	// computed with β from Plan when the profile lacks them); without it
	// candidates are the nodes of largest degree. New hands Plan and
	// Profile to planner.BuildCaches, which sizes and builds the caches
	// and reads only Profile's Meta, Feat and history scores; New keeps
	// no reference to Profile afterwards; FixedState counts Feat and the
	// scores (8 bytes per node) as the caller's.
	Plan    *planner.PlanResult `json:"-"`
	Profile *planner.Profile    `json:"-"`
	// InFlight bounds the batches of an epoch whose input features are
	// alive at once (default DefaultInFlight = 2: one gathered while one is
	// computed; 1 turns the gather/compute overlap off). Left 0 under a
	// memory plan (PlanMemory) without Spill, it is chosen with the
	// budget: 2, or 1 when two in flight would cut batches into more
	// micro-batches than one (MemPlan.Apply sets it; see budgetFor).
	// Gather takes one
	// of InFlight recycled host buffers per batch and waits while all are
	// out; with a backend that adopts host memory (kernels/cpu) the buffer
	// is the batch's uploaded input and comes back when compute frees it,
	// otherwise right after upload. It also bounds the sampler's prefetch.
	// The memory check reserves InFlight × the estimated peak bytes of one
	// batch (see WorkingSet).
	InFlight int `json:"in_flight"`
	// MicroBatches, when above 1, cuts every batch into that many
	// micro-batches of consecutive targets and accumulates their
	// gradients before one optimiser step (see MaxMicroBatches). 0 splits
	// a batch only when its input rows exceed what MemBytes leaves the
	// working set (see PlanBudget).
	MicroBatches int `json:"micro_batches,omitempty"`
	// MaxBatchRows, when positive, is the most input rows a (micro-)batch
	// may have: batches with more are cut into the fewest micro-batches
	// that fit (PlanMemory sets it from MemBytes).
	MaxBatchRows int64 `json:"max_batch_rows,omitempty"`
	// MaxBatchDst, when positive, raises the input-layer destinations a
	// (micro-)batch may have above the estimate for MaxBatchRows
	// rows (MemPlan.Apply sets it from the room the plan's caches leave:
	// Budget.MaxBatchDst).
	MaxBatchDst int64 `json:"max_batch_dst,omitempty"`
	// dstFromFanouts estimates a (micro-)batch's input-layer destinations
	// as 2·rows/(1+fanout₀)+1 even with a profile of these batches (whose
	// measured ratio the estimate takes otherwise), so that training cuts
	// batches to that many. Only MemPlan.Apply sets it (from
	// Budget.DstFromFanouts: the least budget, computed before profiling,
	// assumes it); unexported, it is not saved with a checkpoint's
	// options, and a resumed run's plan decides it again.
	dstFromFanouts bool
	// Spill decouples the sample stage (OUTRE §4.1): each epoch's batches
	// are sampled ahead into a spill file (sample.Sampler.SpillEpoch) in
	// chunks of SpillChunk batches (default 16), at most SpillAhead written
	// chunks (default 1) waiting unread (with history, at least the chunks
	// of ReuseDepth + InFlight batches: Trainer.spillAhead), and the
	// pipeline reads them back.
	// SpillDir holds the file (default DATASET/spill); it is deleted at the
	// end of the epoch and on cancellation. With history on, the reuse
	// depth grows to ReuseDepth (see the package doc): reuse then only
	// helps when Staleness exceeds it.
	Spill      bool   `json:"spill,omitempty"`
	SpillChunk int    `json:"spill_chunk,omitempty"`
	SpillAhead int    `json:"spill_ahead,omitempty"`
	SpillDir   string `json:"-"`
	// NormalizeFeatures scales every gathered feature row to unit L1 norm
	// (the usual preprocessing of Cora's bag-of-words features).
	NormalizeFeatures bool `json:"normalize_features"`
	// Backend runs the model (default: a kernels/cpu backend owned by the
	// Trainer). A caller-supplied backend is not closed by the Trainer.
	Backend kernels.Backend `json:"-"`
	// ZeroCopy selects the zero-copy input path (OUTRE §5.1): the static
	// feature cache's array is registered with the backend once, and each
	// batch's cache hits are gathered by the backend straight from it
	// (kernels.HostGatherer; on CUDA through UVA) while only the misses are
	// gathered on the host and uploaded. ZeroCopyAuto ("" or "auto", the
	// default) uses it when it qualifies and the backend is not the CPU
	// backend; ZeroCopyOn whenever it qualifies; ZeroCopyOff never. It
	// qualifies with a backend implementing kernels.HostGatherer, float32
	// features, a static feature-cache policy with a non-zero budget and
	// no NormalizeFeatures; otherwise training falls back to the host path
	// and Report.ZeroCopy says why. Results are bit-identical either way.
	ZeroCopy string `json:"zero_copy,omitempty"`
	// StreamInput selects the streamed input layer (stream.go): gather
	// reads a batch's input rows in chunks sorted by id and folds each
	// chunk into the input layer's aggregate and its destinations' own
	// rows on the host, so the batch's input rows never exist at once and
	// a batch's working set is its destinations', not its sources'.
	// StreamInputAuto ("" or "auto", the default) streams when the memory
	// plan (PlanMemory) finds that whole batches would not fit unstreamed,
	// so that fewer micro-batches are cut and their rows are read with
	// fewer, larger reads; StreamInputOn whenever the model qualifies;
	// StreamInputOff never. It qualifies for SAGE and GCN (not GAT) on the
	// host input path (not with zero-copy). The result equals the
	// unstreamed one up to float summation order; it is deterministic.
	StreamInput string `json:"stream_input,omitempty"`
	// ScanBatches is, with the streamed input layer, the most batches (or
	// micro-batches) in flight whose input rows one scan reads: the
	// ascending union of their ids is read once, in chunks, and every row
	// is folded into each batch that needs it. Rows that several batches
	// share are read once, and a denser union of ids lets the read
	// planner merge more of them into long reads (docs/ooc.md, "Shared
	// scans"). Results are bit-identical to scanning each batch alone. 0
	// (the default) takes min(InFlight, the reuse depth D); 1 scans each
	// alone. It may not exceed D (batch i's history reuse is decided
	// after compute of batch i−D, so a scan waiting for more than D
	// batches would wait on itself) nor a given InFlight (each batch of a
	// scan holds its output buffer while the scan runs); an InFlight the
	// memory plan chose caps it. With the feature block
	// (partition-major datasets) a scan holds batches of one macro batch.
	ScanBatches int `json:"scan_batches,omitempty"`
	// CheckpointDir receives CheckpointFile every CheckpointEvery epochs
	// (0: only at the end and on interruption); empty disables checkpoints.
	CheckpointDir   string `json:"-"`
	CheckpointEvery int    `json:"-"`
	// CheckpointInterval also writes the checkpoint after an epoch when at
	// least this long has passed since the run started or last wrote one
	// (0: DefaultCheckpointInterval; negative: never by time), so that a
	// run killed outright (kill -9, an OOM kill, a power cut), which no
	// handler sees, loses at most about that long and an epoch.
	CheckpointInterval time.Duration `json:"-"`
	// Resume is a checkpoint file (or a directory holding CheckpointFile)
	// to continue from.
	Resume string `json:"-"`
	// Progress shows one bar per epoch; Logger receives Info lines.
	Progress progress.Reporter `json:"-"`
	Logger   *slog.Logger      `json:"-"`
	// OnEpoch, when set, is called after every epoch with its statistics.
	OnEpoch func(EpochStats) `json:"-"`

	// Evaluation and stopping (see eval.go, layerwise.go and until.go).
	//
	// EvalMode is how Run evaluates valid and test: EvalLayerwise (the
	// default; exact, one pass over the nodes both need) or EvalSampled
	// (sampled inference with EvalFanouts, one split after the other).
	// EvalMemBytes bounds a layer-wise chunk's working memory (0: three
	// quarters of the training working set, which is free while
	// evaluating, else DefaultEvalMemBytes; see evalChunkBytes). UntilValid, when positive, stops Run after the
	// first evaluation whose valid accuracy reaches it (a fraction in
	// (0,1]); the Report says whether and when.
	EvalMode     string  `json:"eval_mode,omitempty"`
	EvalMemBytes int64   `json:"eval_mem_bytes,omitempty"`
	UntilValid   float64 `json:"until_valid,omitempty"`
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	w := o.withDefaults()
	if w.FeatCoalesceGap < featurecache.PerRowReads {
		return fmt.Errorf("%w: FeatCoalesceGap %d, want >= %d", ErrInvalidOptions, w.FeatCoalesceGap, featurecache.PerRowReads)
	}
	if err := (&featurecache.Options{MaxReadAmplification: w.FeatMaxReadAmp}).Validate(); err != nil {
		return fmt.Errorf("%w: FeatMaxReadAmp: %w", ErrInvalidOptions, err)
	}
	if w.FeatIODepth < 0 || w.FeatIODepth > storage.MaxIODepth {
		return opterr.Errorf(ErrInvalidOptions, "%s %d: want 0 (the default) to %d", opterr.Field("FeatIODepth"), w.FeatIODepth, storage.MaxIODepth)
	}
	if err := (ModelConfig{Kind: w.Model, InDim: 1, Hidden: w.Hidden, Classes: 1, Layers: w.Layers, Heads: w.Heads, Dropout: float32(w.Dropout)}).validate(); err != nil {
		return err
	}
	if !(w.LR > 0) || math.IsInf(w.LR, 0) {
		return fmt.Errorf("%w: lr %v (want a finite value above 0)", ErrInvalidOptions, w.LR)
	}
	if math.IsNaN(w.WeightDecay) || math.IsInf(w.WeightDecay, 0) {
		return fmt.Errorf("%w: weight decay %v (want a finite value)", ErrInvalidOptions, w.WeightDecay)
	}
	if w.Epochs < 0 || w.BatchSize < 1 || w.EvalEvery < 1 || w.CheckpointEvery < 0 {
		return fmt.Errorf("%w: epochs %d, batch size %d, eval every %d, checkpoint every %d", ErrInvalidOptions, w.Epochs, w.BatchSize, w.EvalEvery, w.CheckpointEvery)
	}
	for _, fo := range []struct {
		name opterr.Field
		f    []int
	}{{"Fanouts", w.Fanouts}, {"EvalFanouts", w.EvalFanouts}} {
		if len(fo.f) != w.Layers {
			return opterr.Errorf(ErrInvalidOptions, "%s has %d entries, want one per layer (%s %d)", fo.name, len(fo.f), opterr.Field("Layers"), w.Layers)
		}
		for i, x := range fo.f {
			if x == 0 || x < -1 || x > sample.MaxFanout {
				return opterr.Errorf(ErrInvalidOptions, "%s entry %d is %d (want 1 to %d, or -1 for every neighbour)", fo.name, i, x, sample.MaxFanout)
			}
		}
	}
	if w.Selection == sample.ModeAuto {
		return fmt.Errorf("%w: selection auto must be resolved first (AutoSelection)", ErrInvalidOptions)
	}
	if w.Selection == sample.ModePartition && w.Partitions == nil {
		return fmt.Errorf("%w: partition selection needs Partitions", ErrInvalidOptions)
	}
	if w.MicroBatches < 0 || w.MicroBatches > MaxMicroBatches {
		return fmt.Errorf("%w: micro-batches %d (want 0..%d)", ErrInvalidOptions, w.MicroBatches, MaxMicroBatches)
	}
	if w.Workers < 0 || w.Workers > sample.MaxWorkers() {
		return opterr.Errorf(ErrInvalidOptions, "%s %d: sampling workers, want 0 (one per core) to %d (four per core)", opterr.Field("Workers"), w.Workers, sample.MaxWorkers())
	}
	if w.InFlight < 1 || w.InFlight > MaxInFlight {
		return opterr.Errorf(ErrInvalidOptions, "%s %d: batches in flight, want 1 to %d", opterr.Field("InFlight"), w.InFlight, MaxInFlight)
	}
	if d := ReuseDepth(&w); w.ScanBatches < 0 || w.ScanBatches > d || o.InFlight > 0 && w.ScanBatches > o.InFlight {
		return opterr.Errorf(ErrInvalidOptions, "%s %d: want 0 for the default, or 1 to the lesser of %s, %d, and the reuse depth, %d", opterr.Field("ScanBatches"), w.ScanBatches, opterr.Field("InFlight"), w.InFlight, d)
	}
	if w.SpillChunk < 1 || w.SpillAhead < 1 {
		return fmt.Errorf("%w: spill chunk %d, spill ahead %d (want >= 1)", ErrInvalidOptions, w.SpillChunk, w.SpillAhead)
	}
	switch w.ZeroCopy {
	case ZeroCopyAuto, ZeroCopyOn, ZeroCopyOff:
	default:
		return opterr.Errorf(ErrInvalidOptions, "%s %q: want auto, on or off", opterr.Field("ZeroCopy"), w.ZeroCopy)
	}
	switch w.StreamInput {
	case StreamInputAuto, StreamInputOff:
	case StreamInputOn:
		if ok, why := streamQualifies(&w); !ok {
			return opterr.Errorf(ErrInvalidOptions, "%s on: %s", opterr.Field("StreamInput"), why)
		}
	default:
		return opterr.Errorf(ErrInvalidOptions, "%s %q: want auto, on or off", opterr.Field("StreamInput"), w.StreamInput)
	}
	if w.Staleness < 0 || w.MemBytes < 0 {
		return fmt.Errorf("%w: staleness %d (want >= 1; 0: one epoch of batches), mem %d (want >= 0)", ErrInvalidOptions, w.Staleness, w.MemBytes)
	}
	if w.Profile != nil && int64(len(w.Profile.Feat)) != w.Profile.Meta.NumNodes {
		return fmt.Errorf("%w: profile arrays do not have %d entries", ErrInvalidOptions, w.Profile.Meta.NumNodes)
	}
	if err := w.validateEval(); err != nil {
		return err
	}
	hopts := histcache.Options{Staleness: w.Staleness, Policy: w.HistPolicy, PGrad: w.PGrad}
	if err := hopts.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Model == "" {
		r.Model = DefaultModel
	}
	if r.Layers == 0 {
		r.Layers = DefaultLayers
	}
	if r.Hidden == 0 {
		r.Hidden = DefaultHidden
	}
	if r.Heads == 0 {
		r.Heads = DefaultHeads
	}
	switch {
	case r.Dropout == 0:
		r.Dropout = DefaultDropout
	case r.Dropout < 0:
		r.Dropout = 0
	}
	if r.LR == 0 {
		r.LR = DefaultLR
	}
	switch {
	case r.WeightDecay == 0:
		r.WeightDecay = DefaultWeightDecay
	case r.WeightDecay < 0:
		r.WeightDecay = 0
	}
	if r.Epochs == 0 {
		r.Epochs = DefaultEpochs
	}
	if r.BatchSize == 0 {
		r.BatchSize = DefaultBatchSize
	}
	if r.Fanouts == nil {
		r.Fanouts = make([]int, r.Layers)
		for i := range r.Fanouts {
			r.Fanouts[i] = 10
		}
	}
	if r.EvalFanouts == nil {
		r.EvalFanouts = r.Fanouts
	}
	if r.EvalEvery == 0 {
		r.EvalEvery = 1
	}
	if r.CheckpointInterval == 0 {
		r.CheckpointInterval = DefaultCheckpointInterval
	}
	if r.Selection == "" {
		r.Selection = sample.ModeRandom
	}
	if r.InFlight == 0 {
		r.InFlight = DefaultInFlight
	}
	if r.SpillChunk == 0 {
		r.SpillChunk = DefaultSpillChunk
	}
	if r.SpillAhead == 0 {
		r.SpillAhead = DefaultSpillAhead
	}
	if r.ZeroCopy == "" {
		r.ZeroCopy = ZeroCopyAuto
	}
	if r.StreamInput == "" {
		r.StreamInput = StreamInputAuto
	}
	if r.EvalMode == "" {
		r.EvalMode = EvalLayerwise
	}
	if r.FeatIODepth == 0 && r.MemBytes > 0 {
		r.FeatIODepth = GatherDepth(r.MemBytes)
	}
	r.Progress = progress.Or(r.Progress)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// GatherDepth is the feature reads in flight a training with a budget of
// mem bytes (0: none) keeps by default: featurecache.DefaultIODepth
// without a budget; with one, as many as let the read slots (up to
// storage.DefaultMaxReadBytes each) take at most a 64th of it, between
// storage.DefaultScatterDepth and featurecache.DefaultIODepth. So 1 GiB
// reads at depth 64 (16 MiB of slots), 512 MiB at 32 and 256 MiB or less
// at 16 (4 MiB), as every budget did before the default depth rose.
func GatherDepth(mem int64) int {
	if mem <= 0 {
		return featurecache.DefaultIODepth
	}
	return int(min(max(mem/64/storage.DefaultMaxReadBytes, storage.DefaultScatterDepth), featurecache.DefaultIODepth))
}

// withDataset is withDefaults with the defaults that depend on d filled
// in: Staleness 0 becomes the bound profile p modelled (training from a
// plan: the plan's history predictions assumed it), else one epoch of
// batches of d's training nodes past ReuseDepth.
func (o *Options) withDataset(d *storage.Dataset, p *planner.Profile) Options {
	w := withFanoutsOf(o.withDefaults(), d)
	if w.Staleness == 0 {
		if p != nil && p.Meta.Staleness > 0 {
			w.Staleness = p.Meta.Staleness
		} else {
			w.Staleness = histcache.EpochStaleness(int64(len(d.TrainIdx())), w.BatchSize, int64(ReuseDepth(&w)))
		}
	}
	return w
}

// withFanoutsOf is o (with its defaults) with every fanout at least d's
// longest neighbour list read as -1: it samples the same (a list no longer
// than the fanout is taken whole, with no draw), and the estimates bound
// -1 by the graph, where a huge finite fanout made them divide by it (a
// hostile-user sweep measured 2^31−1 planned at 2.8 MiB of batches
// against -1's 23 MiB on a 5,000-node graph).
func withFanoutsOf(o Options, d *storage.Dataset) Options {
	o.Fanouts, o.EvalFanouts = sample.FanoutsFor(d, o.Fanouts), sample.FanoutsFor(d, o.EvalFanouts)
	return o
}

// scanBatches is the batches one streamed scan reads (Options.ScanBatches
// resolved). o has its defaults.
// InFlight chosen by the budget may be below a given ScanBatches: the
// scan then holds InFlight.
func scanBatches(o *Options) int {
	n := min(o.InFlight, ReuseDepth(o))
	if o.ScanBatches > 0 {
		n = min(n, o.ScanBatches)
	}
	return max(1, n)
}

// ReuseDepth is D, the distance between the batch whose compute precedes a
// reuse decision and the batch decided: batch i's reuse set is decided
// after compute of batch i−D. Without Spill it is PipelineDepth. With
// Spill it is SpillChunk·(SpillAhead+1) + 4 + min(InFlight, 3), the upper
// end of the range a writer paused at SpillAhead chunks allowed (see
// "Decoupled sample stage" in the package doc: with history the writer
// now keeps enough chunks announced, so any D of at least a chunk is
// deadlock-free; this one keeps the results of before).
// Defaults are applied first; o must be valid.
func ReuseDepth(o *Options) int {
	w := o.withDefaults()
	if !w.Spill {
		return PipelineDepth
	}
	return w.SpillChunk*(w.SpillAhead+1) + pipelineSlack(w.InFlight)
}

// pipelineSlack is ReuseDepth's depth beyond the spill buffering: what the
// old derivation counted as the fewest batches between the spill reader
// and compute (the reader's, toGather's, gather's and min(inFlight, 3)
// past gather) plus one. With micro-batches those stages hold parts of a
// batch, so it is not a bound (package doc), only the depth kept.
func pipelineSlack(inFlight int) int { return 4 + min(inFlight, 3) }
