package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dustin/go-humanize"
	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DefaultProfileName is the profile PlanMemory writes under
// DIR/profile/<name> when MemPlanOptions.ProfileName is empty. It first
// looks for a matching profile of that name, then for one made by `ssdgnn
// profile` (planner.DefaultProfileName).
const DefaultProfileName = "train"

// MemPlanOptions configures PlanMemory.
type MemPlanOptions struct {
	// MemBytes is the budget B for the caches; required unless PlanFile is
	// set (then 0 takes the plan's budget).
	MemBytes int64
	// PlanFile, when set, is a plan.json (from `ssdgnn plan` or an earlier
	// PlanMemory) used instead of profiling; its profile is loaded from
	// DIR/profile/<plan's profile> when present.
	PlanFile string
	// ProfileName names the profile under DIR/profile. Without PlanFile,
	// a profile of that name already there is planned from when it
	// matches this training (planner.Profile.Reusable), so runs with the
	// same options plan alike; otherwise the profiling epoch runs and
	// writes it. Empty: the profile named DefaultProfileName, or failing
	// that the one `ssdgnn profile` saves by default
	// (planner.DefaultProfileName), whichever matches first; a new one is
	// written as DefaultProfileName.
	ProfileName string
	// PlanOut is where the plan PlanMemory makes is written (the CLI
	// gives the checkpoint directory's plan.json); empty: plan.json beside
	// the profile it was made from.
	PlanOut string
	// Reprofile runs the profiling epoch even when the saved profile
	// matches (new timings, so a new β; e.g. after a hardware change).
	Reprofile bool
	// Part is the node → partition assignment (needed in partition
	// selection), Partition its name, Cross its cross-partition neighbour
	// counts (the neighbour cache is then modelled and built with
	// neighborcache.PolicyCross).
	Part      []int32
	Partition string
	Cross     []int32
	// SourceAuto says Options.Source is what AutoSource chose for
	// MemBytes. Where that is not the mapping (batched or pread reads,
	// whose buffers the budget holds), MemBytes is below its minimum and
	// the mapping's minimum is lower, PlanMemory plans reads through the
	// mapping instead (MemPlan.SourceMmap): before, `train --mem 20MiB`
	// in a 72 MiB cgroup named a minimum of 71.6 MiB (auto chose the
	// mapping for what 20 MiB leaves the page cache), and at 71.6 MiB
	// auto chose batched reads and named 94.7 MiB.
	SourceAuto bool
}

// MemPlan is PlanMemory's result.
type MemPlan struct {
	Plan *planner.PlanResult
	// Profile is nil when a PlanFile's profile is not on disk (the caches
	// then select by degree).
	Profile *planner.Profile
	// PlanPath is where the plan was read or written (empty: a plan made
	// now that could not be saved into the dataset directory; see
	// saveInDataset); Created says it was made now (planner.Plan), Reused
	// that it was made from a profile already saved rather than a new
	// profiling epoch.
	PlanPath string
	Created  bool
	Reused   bool
	// Replanned says PlanPath's caches did not fit what MemBytes leaves
	// them, so Plan was re-divided from its profile for that share.
	Replanned bool
	// Remodeled says the budget gathers other batches than PlanPath's
	// profile counted (micro-batches of whole batches, or no feature
	// block where it had one), so its reads were counted again for them
	// (planner.Profile.RemodelReads) and the plan re-predicted from them
	// with its division kept. Both can be set: re-divided, then
	// re-predicted.
	Remodeled bool
	// Warning says how the plan's profile differs from this training
	// (fanouts, batch size, selection), so its predictions will not hold;
	// empty when it matches or there is no profile.
	Warning string
	// MemBytes is the whole process's budget.
	MemBytes int64
	// SourceMmap says the plan reads neighbour lists through the mapping
	// where Options.Source, chosen by auto, did not fit MemBytes
	// (MemPlanOptions.SourceAuto); Apply sets Options.Source.
	SourceMmap bool
	// Budget is the arithmetic that divided MemBytes (nil for a plan
	// read from PlanFile with no budget given).
	Budget *Budget
}

// Budget is how PlanMemory divides --mem, the whole process's budget:
//
//	MemBytes = Reserve + Fixed + WorkingSet + Caches
//
// Reserve (RuntimeReserve) is the Go runtime, goroutine stacks, the binary
// and the page cache that memory-mapped reads need; Fixed is FixedState
// (the model and its optimiser state, sampler scratch, the profile
// arrays kept); WorkingSet is the in-flight batches (WorkingSet), cut into
// micro-batches of at most MaxBatchRows input rows when whole batches
// would take more than two thirds of what Reserve, Fixed and the caches'
// tables leave (wholeShare; the micro-batches then take at most half);
// Caches is the rest, which planner.Plan divides among the feature,
// history and neighbour caches (their tables included).
type Budget struct {
	MemBytes   int64              `json:"mem_bytes"`
	Reserve    int64              `json:"reserve_bytes"`
	Fixed      FixedStateEstimate `json:"fixed"`
	WorkingSet WorkingSetEstimate `json:"working_set"`
	Caches     int64              `json:"caches_bytes"`
	// MaxBatchRows is the most input rows a batch may have at run time
	// (larger ones are cut into micro-batches); MicroBatches is how many
	// micro-batches the estimate's largest batch needs at least (1:
	// whole).
	MaxBatchRows int64 `json:"max_batch_rows,omitempty"`
	// MaxBatchDst is the most input-layer destinations a (micro-)batch of
	// MaxBatchRows rows may have when the plan leaves part of the caches'
	// share unused (a small graph's caches hold it all): the estimate
	// (batchDst) raised to what that room holds in every batch in flight
	// (setMaxBatchDst); 0: the estimate. A batch with more destinations
	// than its bound is cut (trainBound).
	MaxBatchDst  int64 `json:"max_batch_dst,omitempty"`
	MicroBatches int   `json:"micro_batches"`
	BatchSize    int   `json:"batch_size"`
	// NoFeatureBlock is set when a partition-major dataset's feature
	// block (one macro batch's feature rows) did not fit beside the
	// working set, the fixed state and the caches' tables: training
	// turns it off (Options.NoFeatureBlock, set by MemPlan.Apply) and
	// gathers those rows like any other, instead of refusing. The
	// working set is then the one without the block. It is also set when
	// the block fits but cuts batches into more micro-batches than
	// without it (BlockMicroBatches of them; 0 when it did not fit).
	// BlockBytes is what the block would have taken.
	NoFeatureBlock    bool  `json:"no_feature_block,omitempty"`
	BlockBytes        int64 `json:"block_bytes,omitempty"`
	BlockMicroBatches int   `json:"block_micro_batches,omitempty"`
	// StreamInput is Options.StreamInput's auto resolved: on when whole
	// batches would not fit unstreamed and the model qualifies
	// (MemPlan.Apply sets it); the working set is then the streamed one.
	StreamInput bool `json:"stream_input,omitempty"`
	// DstFromFanouts says the working set did not fit with the profile's
	// ratio of input-layer destinations to rows, even in the least
	// micro-batches, and does with 2·rows/(1+fanout₀) destinations, the
	// estimate the least budget (MinimumBudget, made before profiling)
	// assumes: training then cuts batches to that many
	// (Options.dstFromFanouts). On imported Cora (GAT, --hidden 256) the
	// ratio is 0.45 against the formula's 0.18, and the least budget it
	// named, 118.7 MiB, was refused after profiling.
	DstFromFanouts bool `json:"dst_from_fanouts,omitempty"`
}

// ibytes formats a byte count in IEC units.
func ibytes(b int64) string { return humanize.IBytes(uint64(max(b, 0))) }

// ibytesUp names a least budget, rounded up so that giving it back works;
// ibytesDown the budget given beside it (internal/bytefmt).
func ibytesUp(b int64) string   { return bytefmt.Up(b) }
func ibytesDown(b int64) string { return bytefmt.Down(b) }

// RuntimeReserve is the part of a whole-process budget of mem bytes that
// PlanMemory keeps for what it does not count: the Go runtime and garbage
// awaiting collection, goroutine stacks, the binary, the page cache of
// memory-mapped reads, which a memory cgroup charges too, and the CPU
// backend's GEMM packing scratch of each worker beyond the first (262 KiB
// a core; FixedStateEstimate.BackendScratchBytes). It is mem/8, at least
// 24 MiB.
func RuntimeReserve(mem int64) int64 { return max(mem/8, reserveFloor) }

// reserveFloor is RuntimeReserve's least reserve (a variable only so that
// tests on tiny graphs can reach the budgets that split batches).
var reserveFloor int64 = 24 << 20

// MinimumBudget is the smallest --mem PlanMemory accepts for training d
// with opts: the reserve, the fixed state (with the profile kept), the
// caches' address tables, and the working set of micro-batches of
// microTargets targets at their largest possible size
// (fanoutRows), and, before profiling, room for the profiling epoch's
// counters and appearance log (planner.ProfileMemBytes, HistLogBytes).
//
// With Options.FeatIODepth 0 the read slots are counted at the depth the
// minimum itself gets (GatherDepth): the least, then more while that
// raises it.
func MinimumBudget(d *storage.Dataset, opts *Options) int64 {
	return minimumBudgetWith(d, opts, 0, true)
}

// PlanFileMinimumBudget is the least --mem that PlanMemory with a plan
// file (train --plan) accepts for training d with opts when asked for mem,
// judged as PlanMemory judges it: no profiling epoch, the saved profile
// read back, one batch in flight when opts leaves it to the budget, and
// fewer sampling workers when opts leaves them to the budget and mem is
// below the minimum with one per core (so the answer can depend on mem,
// through the workers and the read depth).
func PlanFileMinimumBudget(d *storage.Dataset, opts *Options, mem int64) (int64, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	o := withFanoutsOf(opts.withDefaults(), d)
	if err := streamOnGraph(&o, opts, d); err != nil {
		return 0, err
	}
	if opts.FeatIODepth == 0 {
		o.FeatIODepth = GatherDepth(mem)
	}
	least := o
	if opts.InFlight == 0 && !opts.Spill {
		least.InFlight = 1
	}
	m, _, _ := acceptedMinimum(d, opts, &least, mem, false)
	return m, nil
}

// acceptedMinimum is the least budget PlanMemory accepts for least (o with
// one batch in flight where the budget chooses it) under mem: with every
// core's sampling worker, or, where opts leaves the workers to the budget
// and mem is below that, with the fewest that fit (w, 0 when none does:
// then least.Workers is one and the minimum named is one worker's).
// withAll is the minimum with every core's worker.
func acceptedMinimum(d *storage.Dataset, opts, least *Options, mem int64, profiling bool) (minMem, withAll int64, w int) {
	withAll = minimumBudgetWith(d, least, 0, profiling)
	if opts.Workers != 0 || mem <= 0 || mem >= withAll {
		return withAll, withAll, 0
	}
	// Each sampling worker holds a batch under construction (and
	// macro-batch caches): on many cores the workers alone can pass the
	// budget. Left to the budget, take fewer of them.
	w = workersToFit(least, mem, func(o *Options) int64 { return minimumBudgetWith(d, o, 0, profiling) })
	// Too small even for one: the minimum to name is one worker's.
	least.Workers = max(w, 1)
	return minimumBudgetWith(d, least, 0, profiling), withAll, w
}

// minimumBudgetWith is MinimumBudget with caches sized by hand that take
// given bytes (tables included) beside training: a lower bound, since
// their address tables may be the plan's too. Without profiling (a plan
// file gives the plan) the profiling epoch's room is not counted, only
// the saved profile read back and a sampling pass over its batches (the
// reads' recount).
func minimumBudgetWith(d *storage.Dataset, opts *Options, given int64, profiling bool) int64 {
	if opts != nil && opts.FeatIODepth != 0 {
		return minimumBudget(d, opts, given, profiling)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	m, _ := atOwnDepth(func(depth int) int64 {
		o.FeatIODepth = depth
		return minimumBudget(d, &o, given, profiling)
	})
	return m
}

// atOwnDepth is budget(depth) at the read depth its result gets: from
// storage.DefaultScatterDepth, raised to GatherDepth of the result while
// that is more. budget grows with the depth, and GatherDepth is capped,
// so it ends.
func atOwnDepth(budget func(depth int) int64) (mem int64, depth int) {
	for depth = storage.DefaultScatterDepth; ; {
		mem = budget(depth)
		if g := GatherDepth(mem); g > depth {
			depth = g
			continue
		}
		return mem, depth
	}
}

func minimumBudget(d *storage.Dataset, opts *Options, given int64, profiling bool) int64 {
	o := withFanoutsOf(opts.withDefaults(), d)
	n := d.NumNodes()
	hist := histOn(&o)
	fixed := FixedState(d, &o, &planner.Profile{}).Bytes
	whole := fanoutRows(batchTargets(&o), o.Fanouts, n)
	// Beside both phases: each sampling worker's batch under
	// construction and, in partition selection, the macro-batch caches
	// the workers hold at their bound from the partitioning.
	sampler := samplersBytes(d, &o)
	rows := fanoutRows(microTargets(&o), o.Fanouts, n)
	stream, gather := stageBytes(d, &o, rows)
	ws := int64(o.InFlight)*(batchBytes(d, &o, rows)+whole*idBytesPerRow(&o)) + stream + gather
	// The profile planned here samples one epoch (profileOptions leaves
	// PresampleEpochs at its default, 1).
	prof := profilingBytes(d, &o, whole, 1, profiling)
	return withReserve(fixed + sampler + max(ws+max(planner.TableBytes(n, hist), given), prof))
}

// profilingBytes is the memory of a profiling epoch beside the sampling
// workers' own (o has its defaults, whole is the most rows of one of its
// batches): the counters and its working set and, when it samples
// (profiling; not when a saved profile is read back), the appearance log
// over epochs profiled epochs and its gather scratch.
func profilingBytes(d *storage.Dataset, o *Options, whole int64, epochs int, profiling bool) int64 {
	n := d.NumNodes()
	prof := planner.ProfileMemBytes(n) + planner.ProfileWorkingBytes(whole, d.FeatRowBytes(), sample.BatchBytesBound(batchTargets(o), o.Fanouts, n, d.NumEdges()))
	if profiling {
		prof += planner.HistLogBytes(d.Indptr(), d.TrainIdx(), int64(epochs)) +
			featurecache.GatherCallBytes(d, planner.ProfileGatherRows(whole, d.FeatRowBytes()), o.featureOptions())
	}
	return prof
}

// ProfileMinimumBudget is the least memory in which a profiling epoch
// alone (ssdgnn profile) runs with opts over epochs pre-sampled epochs:
// the runtime reserve, the sampling workers' batches under construction
// and macro-batch caches, and the profiling epoch's own memory, each as
// MinimumBudget counts it, and the global neighbour cache of
// opts.NeighborCacheBytes (profile --neighbor-cache); no model, feature or
// history cache, or training batches.
func ProfileMinimumBudget(d *storage.Dataset, opts *Options, epochs int) int64 {
	o := withFanoutsOf(opts.withDefaults(), d)
	whole := fanoutRows(batchTargets(&o), o.Fanouts, d.NumNodes())
	return withReserve(samplersBytes(d, &o) + profilingBytes(d, &o, whole, max(epochs, 1), true) + max(o.NeighborCacheBytes, 0))
}

// SamplingMinimumBudget is the least memory in which sampling alone (ssdgnn
// rr) runs with opts: the runtime reserve and the sampling workers'
// batches under construction and macro-batch caches, as MinimumBudget
// counts them, and the global neighbour cache of opts.NeighborCacheBytes
// (rr --neighbor-cache).
func SamplingMinimumBudget(d *storage.Dataset, opts *Options) int64 {
	o := withFanoutsOf(opts.withDefaults(), d)
	return withReserve(samplersBytes(d, &o) + max(o.NeighborCacheBytes, 0))
}

// samplersBytes is what o's sampling workers hold (o has its defaults):
// each one's batch under construction and, in partition selection, the
// macro-batch caches they hold at the partitioning's bound.
func samplersBytes(d *storage.Dataset, o *Options) int64 {
	workers := samplingWorkers(o.Workers)
	b := int64(workers) * sample.WorkerBytesBound(batchTargets(o), o.Fanouts, d.NumNodes(), d.NumEdges(), o.Source)
	if o.Selection == sample.ModePartition {
		b += int64(sample.MacroCachesHeld(workers)) * macroBound(o)
	}
	return b
}

// withReserve solves need + RuntimeReserve(mem) <= mem for the least mem,
// as MinimumBudget does.
func withReserve(need int64) int64 { return max(need+reserveFloor, (need*8+6)/7) }

// ProfileFit fits a profiling epoch alone (ssdgnn profile) with opts
// over epochs pre-sampled epochs to the memory cgroup the process runs in,
// as PlanMemory fits training: without a limit, or within it, it changes
// nothing (workers 0, note ""). Over it, with opts.Workers at its default,
// it returns the most sampling workers, fewer than one per core, that fit
// and a note saying so; when even one does not fit (or Workers was given),
// an ErrBudget naming the limit and the least it needs, so that the epoch
// is refused before it starts instead of OOM-killed part way.
func ProfileFit(d *storage.Dataset, opts *Options, epochs int) (workers int, note string, err error) {
	return fitCgroup(d, opts, "profile", "a profiling epoch", "sampling workers, per-node counters and the validity model's log, the neighbour cache", ", --presample-epochs or --neighbor-cache",
		func(o *Options) int64 { return ProfileMinimumBudget(d, o, epochs) })
}

// SamplingFit is ProfileFit for sampling alone (ssdgnn rr):
// SamplingMinimumBudget against the memory cgroup's limit.
func SamplingFit(d *storage.Dataset, opts *Options) (workers int, note string, err error) {
	return fitCgroup(d, opts, "rr", "sampling", "sampling workers' batches and macro-batch caches, the neighbour cache", " or --neighbor-cache",
		func(o *Options) int64 { return SamplingMinimumBudget(d, o) })
}

// fitCgroup is ProfileFit's and SamplingFit's fit of least (what what,
// made of terms, needs) to the memory cgroup's limit; more names the
// flags beside --batch-size, --fanouts and --workers that lower it, and
// the refusal is command cmd's (BudgetError).
func fitCgroup(d *storage.Dataset, opts *Options, cmd, what, terms, more string, least func(*Options) int64) (workers int, note string, err error) {
	l, ok := cgroup.SelfMemoryLimit()
	if !ok {
		return 0, "", nil
	}
	need := least(opts)
	if l >= need {
		return 0, "", nil
	}
	if opts.Workers == 0 {
		if w := workersToFit(opts, l, least); w > 0 {
			return w, fmt.Sprintf("%d sampling workers (not %d): what the memory cgroup's limit (%s) leaves %s", w, samplingWorkers(0), ibytes(l), what), nil
		}
		o := *opts
		o.Workers = 1
		need = least(&o)
	}
	return 0, "", budgetErrorf(cmd, "the memory cgroup this process runs in is limited to %s, below the %s %s of %s needs (runtime reserve, %s): raise the limit, or lower --batch-size, --fanouts, --workers%s",
		ibytes(l), ibytes(need), what, d.Dir(), terms, more)
}

// workersToFit is the most sampling workers, fewer than the default (one
// per core), with which least(o with them) is at most mem; 0 when even
// one worker does not fit.
func workersToFit(o *Options, mem int64, least func(*Options) int64) int {
	l := *o
	for w := samplingWorkers(0) - 1; w >= 1; w-- {
		l.Workers = w
		if least(&l) <= mem {
			return w
		}
	}
	return 0
}

// batchTargets is the most targets one of o's batches holds
// (sample.MaxBatchTargets: BatchSize, or BatchSize + BatchSize/4 in
// partition selection, whose macro batches are cut evenly). o has its
// defaults.
func batchTargets(o *Options) int64 {
	return int64(sample.MaxBatchTargets(o.BatchSize, o.Selection))
}

// microTargets is the most targets of the finest micro-batch: a batch of
// batchTargets cut into MaxMicroBatches.
func microTargets(o *Options) int64 {
	return (batchTargets(o) + MaxMicroBatches - 1) / MaxMicroBatches
}

// macroBound is the partitioning's bound on one macro batch's dynamic
// cache (sample.PartitionFiles.MacroBytesBound), 0 when o.Partitions
// cannot tell.
func macroBound(o *Options) int64 {
	b, ok := o.Partitions.(interface {
		MacroBytesBound(ppb, batchSize int) int64
	})
	if !ok {
		return 0
	}
	return b.MacroBytesBound(o.PartsPerBatch, o.BatchSize)
}

// Apply sets o's Plan, Profile, MemBytes, MaxBatchRows and (from
// mo.Cross) NeighborCross. The feature reads in flight the budget counted
// follow from MemBytes (GatherDepth, in withDefaults) unless o names them.
func (mp *MemPlan) Apply(o *Options, mo *MemPlanOptions) {
	o.Plan, o.Profile, o.MemBytes = mp.Plan, mp.Profile, mp.MemBytes
	if mp.SourceMmap {
		o.Source = sample.SourceMmap
	}
	if mp.Budget != nil && o.MaxBatchRows == 0 {
		o.MaxBatchRows = mp.Budget.MaxBatchRows
		o.MaxBatchDst = mp.Budget.MaxBatchDst
	}
	if mp.Budget != nil && o.InFlight == 0 {
		o.InFlight = mp.Budget.WorkingSet.InFlight
	}
	if mp.Budget != nil && o.Workers == 0 {
		// The sampling workers the budget counted (fewer than the cores
		// when that is what fitted it).
		o.Workers = mp.Budget.Fixed.Workers
	}
	if mp.Budget != nil && mp.Budget.NoFeatureBlock {
		o.NoFeatureBlock = true
	}
	if mp.Budget != nil && mp.Budget.DstFromFanouts {
		o.dstFromFanouts = true
	}
	if mp.Budget != nil && (o.StreamInput == "" || o.StreamInput == StreamInputAuto) {
		o.StreamInput = StreamInputOff
		if mp.Budget.StreamInput {
			o.StreamInput = StreamInputOn
		}
	}
	if mo != nil && mo.Cross != nil && o.NeighborCross == nil {
		o.NeighborCross = mo.Cross
	}
}

// PlanMemory makes (or reads) the memory plan for training d with opts
// under mo.MemBytes. Without PlanFile it runs the profiling epoch
// (planner.RunProfile with opts' fanouts, batch size, selection, partitions,
// seed, workers and source; saved under DIR/profile/<ProfileName>) and
// planner.Plan with MemBytes less the working set and the fixed state (see
// WorkingSet, FixedState) and Hidden = the model's layer-(L−1) width
// (history off: -1), and writes plan.json beside the profile. The
// returned Profile keeps only the arrays training reads (Feat, HistSample,
// HistGather), so the planning-only ones are freed; the profiling epoch's
// heap is returned to the OS (debug.FreeOSMemory) before PlanMemory returns. A budget that
// cannot hold the caches' tables fails with ErrBudget before profiling.
func PlanMemory(ctx context.Context, d *storage.Dataset, opts *Options, mo *MemPlanOptions) (*MemPlan, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if mo == nil || mo.MemBytes < 0 || (mo.MemBytes == 0 && mo.PlanFile == "") {
		return nil, opterr.Errorf(ErrInvalidOptions, "PlanMemory needs %s > 0 or a PlanFile", opterr.Field("MemBytes"))
	}
	o := withFanoutsOf(opts.withDefaults(), d)
	if err := streamOnGraph(&o, opts, d); err != nil {
		return nil, err
	}
	if opts.FeatIODepth == 0 {
		// The depth of mo's budget. A plan file without one derives the
		// budget from the plan, read slots at the default depth included.
		o.FeatIODepth = GatherDepth(mo.MemBytes)
	}
	hist := histOn(&o)
	// With InFlight left to the budget, one batch in flight is the least
	// that can run.
	autoInFlight := opts.InFlight == 0 && !opts.Spill
	least := o
	if autoInFlight {
		least.InFlight = 1
	}
	// A plan file needs no profiling epoch: its room is not asked for
	// (54.25 MiB was refused for the profiling epoch's counters while
	// training with the plan left 13 MiB of caches at 54.5 MiB).
	profiling := mo.PlanFile == ""
	// Nor does a saved profile training will reuse: looked for first,
	// when the budget holds the profile read back (its load is not to be
	// what passes the budget).
	var saved *planner.Profile
	searched := false // the saved profiles were looked at: none is looked at again
	if profiling && mo.MemBytes > 0 && mo.MemBytes >= minimumBudgetWith(d, &least, 0, false) {
		searched = true
		ow := o.withDataset(d, nil)
		name, names := profileNames(mo)
		var err error
		if saved, err = savedProfile(ctx, d, &ow, mo, profileOptions(&ow, mo, name), names); err != nil {
			return nil, err
		}
		profiling = saved == nil
	}
	minMem, withAll, w := acceptedMinimum(d, opts, &least, mo.MemBytes, profiling)
	if mo.SourceAuto && o.Source != sample.SourceMmap && mo.MemBytes > 0 && mo.MemBytes < minMem {
		mm := *opts
		mm.Source = sample.SourceMmap
		ml := least
		ml.Source = sample.SourceMmap
		if m, _, _ := acceptedMinimum(d, &mm, &ml, mo.MemBytes, profiling); m < minMem {
			// Planned again through the mapping, whose minimum is named
			// if it does not fit either.
			o.Logger.Info("neighbour reads: through the mapping: the budget is below the minimum with the reads auto chose", "source", o.Source.String(), "minimum", ibytesUp(minMem), "minimum_mmap", ibytesUp(m))
			mmo := *mo
			mmo.SourceAuto = false
			mp, err := PlanMemory(ctx, d, &mm, &mmo)
			if mp != nil {
				mp.SourceMmap = true
			}
			return mp, err
		}
	}
	if w > 0 {
		o.Logger.Info("fewer sampling workers than cores, to fit the budget", "workers", w, "cores", samplingWorkers(0),
			"minimum_with_all", ibytes(withAll))
		o.Workers = w
	}
	m := d.Manifest()
	cfg := ModelConfig{Kind: o.Model, InDim: d.FeatDim(), Hidden: o.Hidden, Classes: int(m.NumClasses), Layers: o.Layers, Heads: o.Heads}
	// Caches sized by hand take their room beside the least working set:
	// a budget below that is refused before the profiling epoch.
	given := givenCacheBytes(d, &o, cfg.HistWidth())
	if err := givenAtLeastTables(d, &o, cfg.HistWidth()); err != nil {
		return nil, err
	}
	if given > 0 && mo.MemBytes > 0 && mo.PlanFile == "" {
		if need := minimumBudgetWith(d, &least, given, profiling); mo.MemBytes < need {
			return nil, fmt.Errorf("%w: %w: --mem %s is below the %s that %s (%s, tables included) and the least training beside them take (the minimum without them is %s): lower the cache sizes, or raise --mem to at least %s",
				ErrBudget, planner.ErrBudget, ibytesDown(mo.MemBytes), ibytesUp(need), givenFlags(&o), ibytes(given), ibytesUp(minMem), ibytesUp(need))
		}
	}
	if mo.MemBytes > 0 && mo.MemBytes < minMem {
		degrees := ""
		if o.Model == ModelGCN {
			degrees = ", GCN's graph degrees"
		}
		prof := "the profiling epoch's counters"
		if !profiling {
			prof = "the saved profile read back"
		}
		return nil, fmt.Errorf("%w: %w: --mem %s is below the minimum of %s for this dataset and model (runtime reserve, model and optimiser, sampler scratch, feature read slots%s, cache tables, and micro-batches of %d targets, %d in flight; or %s)",
			ErrBudget, planner.ErrBudget, ibytesDown(mo.MemBytes), ibytesUp(minMem), degrees, microTargets(&o), least.InFlight, prof)
	}
	if mo.PlanFile != "" {
		mp, full, err := readPlan(d, mo.PlanFile, o.Logger)
		if err != nil {
			return nil, err
		}
		o = o.withDataset(d, full)
		mp.MemBytes = mo.MemBytes
		reads, err := featurecache.PlanReadsFor(d, o.featureOptions())
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		mp.Warning = strings.TrimPrefix(mp.Warning+"; "+profileMismatch(mp.Plan.Profile, full, &o, reads), "; ")
		if full != nil && full.Meta.Partition != "" && o.Selection == sample.ModePartition {
			// A profile of a partitioning replaced since counts other
			// batches, as 'ssdgnn plan' warns (and a bare --mem profiles
			// again rather than reuse it).
			w := ""
			if mo.Partition != "" && mo.Partition != full.Meta.Partition {
				w = fmt.Sprintf("profile %q was made on partitioning %q, training uses %q: its counts are those of other batches", full.Meta.Name, full.Meta.Partition, mo.Partition)
			} else if err := full.Meta.OfPartition(mo.Part); err != nil && mo.Part != nil {
				w = strings.TrimPrefix(err.Error(), "planner: ")
			}
			if w != "" {
				mp.Warning = strings.TrimPrefix(mp.Warning+"; "+w, "; ")
			}
		}
		mp.Warning = strings.TrimSuffix(mp.Warning, "; ")
		if w := cfg.HistWidth(); mp.Plan.Hidden > 0 && w > 0 && mp.Plan.Hidden != w && !o.NoHist {
			mp.Warning = strings.TrimPrefix(mp.Warning+"; ", "; ") + fmt.Sprintf(
				"plan %s divided the budget for history embeddings of width %d, this training's are %d wide ('ssdgnn plan --hidden %d' divides it for them)",
				mo.PlanFile, mp.Plan.Hidden, w, w)
		}
		if mp.MemBytes == 0 {
			// The plan's budget covers the caches only; the reserve,
			// fixed state and working set came first, so the budget is
			// their sum (the reserve solved for: RuntimeReserve of the
			// total). With the depth left to the budget, the read slots
			// are counted at the depth the sum gets (GatherDepth), as
			// MinimumBudget counts them.
			derive := func() int64 {
				rest := mp.Plan.Memory.MemBytes + WorkingSet(d, &o, full).Bytes + FixedState(d, &o, full).Bytes
				return max(rest+RuntimeReserve(0), (rest*8+6)/7)
			}
			if opts.FeatIODepth != 0 {
				mp.MemBytes = derive()
			} else {
				mp.MemBytes, o.FeatIODepth = atOwnDepth(func(depth int) int64 {
					o.FeatIODepth = depth
					return derive()
				})
			}
		}
		if mp.MemBytes > 0 {
			b, err := budgetWorkers(d, &o, full, mp.MemBytes, autoInFlight, planCacheBytes(mp.Plan), opts.Workers == 0)
			if err != nil {
				return nil, err
			}
			mp.Budget = b
			o.NoFeatureBlock = o.NoFeatureBlock || b.NoFeatureBlock
			// A plan whose caches do not fit the room is re-divided first,
			// on the profile's own counts (whole batches), as a bare
			// --mem divides: re-divided after the recount below, the
			// feature cache's hits were those of the micro-batches (each
			// reads the rows it shares with the others again) and the
			// history's those of whole batches, and the division leaned
			// to the feature cache (α 1.00 against 'ssdgnn plan''s 0.73
			// for the same room, TestReplanDividesAsPlan).
			if need := planCacheBytes(mp.Plan); need > b.Caches {
				if err := replan(d, &o, cfg, hist, mo, mp, full); err != nil {
					return nil, err
				}
			}
			// Hand-sized caches replace the plan's: counted twice, the
			// room is not overstated.
			if err := recountForTraining(ctx, d, &o, mo, mp, full, b, planCacheBytes(mp.Plan)+given); err != nil {
				return nil, err
			}
		}
		// Only now, with the plan settled, is the profile cut to what
		// training reads (and counted under memacct.Profile once).
		mp.Profile = keptProfile(full, mp.Plan.Beta)
		return mp, nil
	}
	o = o.withDataset(d, nil)
	name, names := profileNames(mo)
	po := profileOptions(&o, mo, name)
	p, reused := saved, saved != nil
	if p == nil {
		if searched {
			names = nil // each saved profile was loaded and found not to fit
		}
		var err error
		if p, reused, err = savedOrNewProfile(ctx, d, &o, mo, po, names); err != nil {
			return nil, err
		}
	}
	hidden := cfg.HistWidth()
	if !hist {
		hidden = -1
	}
	// The reserve, the fixed state and the batches in flight come first;
	// the caches get the rest.
	b, err := budgetWorkers(d, &o, p, mo.MemBytes, autoInFlight, 0, opts.Workers == 0)
	if err != nil {
		return nil, err
	}
	o.NoFeatureBlock = o.NoFeatureBlock || b.NoFeatureBlock
	ws, fs := b.WorkingSet, b.Fixed
	o.Logger.Info("working set reserved", "bytes", ws.Bytes, "in_flight", ws.InFlight, "batch_bytes", ws.BatchBytes, "batch_rows", ws.BatchRows, "from", ws.From, "dynamic_bytes", ws.DynamicBytes, "feature_block_bytes", ws.FeatureBlockBytes)
	o.Logger.Info("fixed state reserved", "bytes", fs.Bytes, "sampler_bytes", fs.SamplerBytes, "workers", fs.Workers, "profile_bytes", fs.ProfileBytes, "model_bytes", fs.ModelBytes, "gather_slot_bytes", fs.GatherSlotBytes)
	// Caches sized by hand (--feat-cache, --hist-cache, --neighbor-cache)
	// take their room first; the plan divides the rest, so that what it
	// gives the others and what was given fit together.
	planBytes := b.Caches
	// Whether any cache is left to the plan to size (0: the plan's; a
	// negative size is off).
	planned := o.FeatCacheBytes == 0 || o.NeighborCacheBytes == 0 || (hidden > 0 && o.HistCacheBytes == 0)
	if given > 0 {
		// The plan needs its address tables beside what was given, when
		// it sizes a cache. With every cache given it sizes none (it is
		// made only for its predictions, and builds nothing), so nothing
		// is reserved for it: before, a history cache given all the
		// caches' room was refused for the plan's 391 KiB of tables.
		tables := planner.TableBytes(d.NumNodes(), hidden > 0)
		if !planned {
			tables = 0
		}
		if given+tables > b.Caches {
			raise := "raise --mem"
			if m := memForCaches(d, opts, &o, p, autoInFlight, given+tables, mo.MemBytes); m > 0 {
				raise = "raise --mem to " + ibytesUp(m)
			}
			return nil, fmt.Errorf("%w: %s take %s, tables included, and the plan needs %s of address tables beside them, but --mem %s leaves %s for caches beside the working set (%s), fixed state (%s) and runtime reserve (%s): lower them, turn the caches not given off (an explicit 0), or %s",
				ErrBudget, givenFlags(&o), ibytes(given), ibytes(tables), ibytesDown(mo.MemBytes), ibytes(b.Caches), ibytes(ws.Bytes), ibytes(fs.Bytes), ibytes(b.Reserve), raise)
		}
		planBytes = b.Caches - given
		if !planned {
			planBytes = max(planBytes, planner.TableBytes(d.NumNodes(), hidden > 0))
		}
		o.Logger.Info("caches sized by hand take their room before the plan", "given_bytes", given, "plan_bytes", planBytes)
	}
	// The division is made on the profile's own counts (whole batches),
	// as 'ssdgnn plan' makes it for 'train --plan': there the feature
	// cache's hits and the history's saved rows are counted in the same
	// batches. Recounting the feature reads for the micro-batches first
	// (as before 2026-11-28) multiplied the feature cache's benefit by the
	// cut (each micro-batch reads the rows it shares with the others
	// again) and left the history's at whole batches, so the division
	// leaned to the feature cache: on a 50,000-node graph under --mem
	// 80MiB (batches cut to micro-batches of ≤26,620 of 47,478 rows) α
	// was 0.89 against 'ssdgnn plan''s 0.44, and the epochs read 968 MiB
	// against the plan file's 678 MiB.
	res, err := planner.Plan(p, &planner.PlanOptions{MemBytes: planBytes, Hidden: hidden, Indptr: d.Indptr(), Cross: mo.Cross,
		Staleness: o.Staleness})
	if err != nil {
		return nil, err
	}
	// Then the reads (and the feature cache's hits) of what training will
	// gather are counted: micro-batches, batches keeping the destinations
	// the caches' leftover room allows, without a block the budget turned
	// off; and the plan is predicted again from them with its division
	// kept. In memory only: the profile on disk stays as profiled (whole
	// batches), for other budgets and for the next run to reuse.
	caches := planCacheBytes(res) + given
	if !planned {
		caches = given // the plan's caches are not built
	}
	rp := &MemPlan{Plan: res}
	if err := recountForTraining(ctx, d, &o, mo, rp, p, b, caches); err != nil {
		return nil, err
	}
	res = rp.Plan
	path := mo.PlanOut
	if path != "" {
		if err := res.Save(path); err != nil {
			return nil, err
		}
	} else {
		path = filepath.Join(planner.ProfilePath(d.Dir(), p.Meta.Name), "plan.json")
		if !saveInDataset(d, o.Logger, "plan "+path, func() error { return res.Save(path) }) {
			path = ""
		}
	}
	o.Logger.Info("memory plan", "path", path, "alpha", res.Alpha, "feature_bytes", res.Feature.Bytes(),
		"history_bytes", res.History.Bytes(), "neighbor_bytes", res.Neighbor.Bytes())
	mp := &MemPlan{Plan: res, Profile: keptProfile(p, res.Beta), PlanPath: path, Created: true, Reused: reused, MemBytes: mo.MemBytes, Budget: b}
	// The profiling epoch's scratch (per-node counters, batches) is garbage
	// now; return it to the OS so the process starts training at the size
	// --mem budgets rather than at the profiling peak.
	p = nil
	debug.FreeOSMemory()
	return mp, nil
}

// savedOrNewProfile returns the first profile saved under names that can
// stand for a new one (planner.Profile.Reusable) when mo does not ask for
// a new one, and reports that it did; otherwise it runs the profiling
// epoch and saves the profile as po.Name before anything recounts it. A
// saved profile that does not match, or is damaged, is passed over (and
// the new one saved over it when it is po.Name), with a log line saying
// why.
func savedOrNewProfile(ctx context.Context, d *storage.Dataset, o *Options, mo *MemPlanOptions, po *planner.ProfileOptions, names []string) (*planner.Profile, bool, error) {
	if p, err := savedProfile(ctx, d, o, mo, po, names); p != nil || err != nil {
		return p, p != nil, err
	}
	p, err := planner.RunProfile(ctx, d, o.Partitions, po)
	if err != nil {
		return nil, false, err
	}
	saveInDataset(d, o.Logger, "profile "+po.Name, func() error { return p.Save(d.Dir()) })
	return p, false, nil
}

// savedProfile is the first saved profile of names that training with o
// can reuse (nil when none can, or with mo.Reprofile); a saved profile
// that does not match, or is damaged, is passed over with a log line.
func savedProfile(ctx context.Context, d *storage.Dataset, o *Options, mo *MemPlanOptions, po *planner.ProfileOptions, names []string) (*planner.Profile, error) {
	if mo.Reprofile {
		return nil, nil
	}
	for _, name := range names {
		p, err := loadProfileCounted(d, name)
		if err == nil {
			err = p.Reusable(ctx, d, o.Partitions, po)
		}
		switch {
		case err == nil:
			o.Logger.Info("profile reused", "name", name, "beta", p.Meta.Beta)
			return p, nil
		case errors.Is(err, planner.ErrNotFound):
		case errors.Is(err, planner.ErrMismatch):
			o.Logger.Info("saved profile not reused", "name", name, "reason", err)
		case errors.As(err, new(*planner.CorruptError)):
			// Damage is no mismatch: say so without -v (before, it was
			// an Info line and the profile was profiled over silently).
			o.Logger.Warn("saved profile is damaged: not reused, profiling again", "name", name, "reason", err)
		default:
			return nil, err
		}
	}
	return nil, nil
}

// profileNames are the saved profiles PlanMemory looks for, the first the
// one it writes.
func profileNames(mo *MemPlanOptions) (name string, names []string) {
	if mo.ProfileName != "" {
		return mo.ProfileName, []string{mo.ProfileName}
	}
	return DefaultProfileName, []string{DefaultProfileName, planner.DefaultProfileName}
}

// saveInDataset runs save, which writes what (a profile, its recount, a
// plan) under d's directory, holding the directory's lock
// (internal/dirlock) for the save alone, as every writer into a dataset
// holds it: two trainings on one dataset never write one profile at once.
// What it writes is a record of state this run keeps in memory, so a
// directory that another writer holds or that cannot be written (a
// read-only dataset), or a save that fails, costs a later run a profiling
// epoch or a recount, not this run its training: it is logged as a
// warning and saveInDataset reports false.
func saveInDataset(d *storage.Dataset, log *slog.Logger, what string, save func() error) bool {
	lk, err := dirlock.Acquire(d.Dir())
	if err == nil {
		err = save()
		if rerr := lk.Release(); err == nil {
			err = rerr
		}
	}
	if err != nil {
		log.Warn(what+" not saved; this run keeps it in memory", "reason", err)
		return false
	}
	return true
}

// loadProfileCounted loads profile name of d, counted in memacct.Profile
// while it loads as the profiling epoch's counters are while it runs.
func loadProfileCounted(d *storage.Dataset, name string) (*planner.Profile, error) {
	n := planner.ProfileMemBytes(d.NumNodes())
	memacct.Add(memacct.Profile, n)
	defer memacct.Add(memacct.Profile, -n)
	return planner.LoadProfile(d.Dir(), name)
}

// profileOptions profiles (or remodels profile name) for training with o
// (defaults applied) as PlanMemory plans it.
func profileOptions(o *Options, mo *MemPlanOptions, name string) *planner.ProfileOptions {
	return &planner.ProfileOptions{Name: name, Fanouts: o.Fanouts, BatchSize: o.BatchSize,
		Mode: o.Selection, PartsPerBatch: o.PartsPerBatch, Seed: o.Seed, Workers: o.Workers, Source: o.Source,
		Part: mo.Part, Partition: mo.Partition, Staleness: o.Staleness, ReuseDepth: int64(ReuseDepth(o)),
		Gather: o.buildOptions(0).Feature, NoFeatureBlock: partRanges(o) == nil,
		Progress: o.Progress, Logger: o.Logger}
}

// recountForTraining fits the batches' destinations to the room left
// beside caches bytes of caches, counts p's reads again for the batches
// training gathers (remodelReads), and, when they differ from the profile's,
// re-predicts mp's plan from them with its division kept (repredict). The
// division itself is made before, on the profile's whole batches, for
// both a bare --mem and a plan file.
func recountForTraining(ctx context.Context, d *storage.Dataset, o *Options, mo *MemPlanOptions, mp *MemPlan, p *planner.Profile, b *Budget, caches int64) error {
	// Training's destination estimate (batchDst) reads the profile it is
	// given (MemPlan.Apply), so the cut counted here must too.
	w := *o
	w.Profile = p
	o = &w
	b.setMaxBatchDst(d, o, caches)
	remodeled, err := remodelReads(ctx, d, o, mo, p, b)
	if err != nil || !remodeled {
		return err
	}
	return repredict(d, o, mo, mp, p)
}

// remodelReads counts p's reads again for what training with o under
// b gathers, when p counted something else: whole batches that b cuts into
// micro-batches, a feature block b turned off, batches that b's streamed
// input layer reads in shared scans (trainScan), or may cut by their
// input-layer destinations (trainBound, as the streamed layer does), which
// the profile's batch rows do not bound. It reports whether it did. A profile made with other
// batches (seed, size, fanouts, selection) keeps its counts, with a log
// line: its predictions were off anyway (MemPlan.Warning says why).
func remodelReads(ctx context.Context, d *storage.Dataset, o *Options, mo *MemPlanOptions, p *planner.Profile, b *Budget) (bool, error) {
	r := b.MaxBatchRows
	if p == nil || p.Meta.Reads == nil || r <= 0 {
		return false, nil
	}
	bound := trainBound(asTrained(o, b), r) // training's cut (Trainer.bound)
	split := r < p.Meta.MaxBatchRows && p.Meta.Reads.MicroBatchRows != r
	blockOff := b.NoFeatureBlock && p.Meta.Reads.BlockRows > 0
	scan := trainScan(o, b)
	scanned := max(p.Meta.Reads.ScanBatches, 1) != scan
	chunk := trainChunk(b)
	chunked := p.Meta.Reads.ChunkRows != chunk
	if !split && !blockOff && !scanned && !chunked && bound.dst <= 0 {
		return false, nil
	}
	micro := r
	if !split && p.Meta.Reads.MicroBatchRows == 0 {
		micro = 0 // whole batches, as profiled
	}
	po := profileOptions(o, mo, p.Meta.Name)
	// The recount samples the profiled epochs again (about an epoch's
	// sampling); a run with the same inputs reads the last one's back.
	key, kerr := remodelKey(d, p, po, bound, micro, scan, chunk)
	if kerr == nil {
		switch ok, err := p.LoadRemodel(d.Dir(), key); {
		case err != nil:
			o.Logger.Info("saved recount of the profile's reads not used; counting again", "key", key, "reason", err)
		case ok:
			o.Logger.Info("profile's reads recounted for training's batches: saved recount reused", "key", key)
			return true, nil
		}
	} else {
		o.Logger.Debug("profile's recount not saved", "reason", kerr)
	}
	t0 := time.Now()
	err := p.RemodelReads(ctx, d, o.Partitions, po, splitRows(bound), micro, scan, chunk)
	if errors.Is(err, planner.ErrMismatch) {
		o.Logger.Info("plan predictions stay those of whole batches", "reason", err)
		return false, nil
	}
	if err == nil {
		o.Logger.Info("profile's reads recounted for training's batches", "seconds", time.Since(t0).Seconds(), "key", key)
		// A profile whose own save was skipped (no files recorded) is
		// not on disk for a recount to sit beside.
		if kerr == nil && len(p.Meta.Files) > 0 {
			saveInDataset(d, o.Logger, "recount of the profile's reads", func() error { return p.SaveRemodel(d.Dir(), key) })
		}
	}
	return err == nil, err
}

// remodelKey names the recount of p's reads (planner.RemodelReads) for the
// cut bound, micro, scan and chunk: a hash of everything the recount
// depends on. That is p as loaded (its meta, which carries its files'
// checksums, the dataset's and partition's, and the profiling run's
// options and timings), the recount's arguments, how the gather plans its
// reads (the read plan the device profile gives, the read mode, size and
// engine), and the running binary's own checksum: the code that counts,
// so that a changed binary never reads another's recount.
func remodelKey(d *storage.Dataset, p *planner.Profile, po *planner.ProfileOptions, bound splitBound, micro int64, scan, chunk int) (string, error) {
	exe, err := binaryChecksum()
	if err != nil {
		return "", err
	}
	rp, err := featurecache.PlanReadsFor(d, po.Gather)
	if err != nil {
		return "", err
	}
	var g featurecache.Options
	if po.Gather != nil {
		g = *po.Gather
	}
	in := struct {
		Binary         uint64
		Meta           planner.Meta
		Rows, Dst      int
		Micro          int64
		Scan, Chunk    int
		Plan           featurecache.ReadPlan
		Mode           storage.ReadMode
		MaxReadBytes   int64
		IO             storage.IOEngine
		NoFeatureBlock bool
		Partition      string
	}{exe, p.Meta, bound.rows, bound.dst, micro, scan, chunk, rp, g.Mode, g.MaxReadBytes, g.IO,
		po.NoFeatureBlock, po.Partition}
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("r%016x", xxhash.Sum64(b)), nil
}

// binaryChecksum is the xxhash of the running executable's file, read
// once per process (a few tens of MB, streamed).
var binaryChecksum = sync.OnceValues(func() (uint64, error) {
	path, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := xxhash.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
})

// asTrained is o as training under b runs it: b's batches in flight and
// streamed input layer, which MemPlan.Apply sets in the options training
// gets (o's may still be the caller's: 0 and auto).
func asTrained(o *Options, b *Budget) *Options {
	w := *o
	w.InFlight = b.WorkingSet.InFlight
	w.MaxBatchDst = b.MaxBatchDst
	w.dstFromFanouts = w.dstFromFanouts || b.DstFromFanouts
	w.StreamInput = StreamInputOff
	if b.StreamInput {
		w.StreamInput = StreamInputOn
	}
	return &w
}

// trainScan is the (micro-)batches one streamed scan reads when training
// with o under b: scanBatches at b's batches in flight when b streams the
// input layer (b.StreamInput already says the model qualifies), else 1.
func trainScan(o *Options, b *Budget) int {
	if !b.StreamInput {
		return 1
	}
	return scanBatches(asTrained(o, b))
}

// trainChunk is the rows of each read plan when training under b reads
// the input layer: the streamed layer's chunks (streamChunk), or 0 where
// that is the gather's own chunk (storage.DefaultScatterChunk) or b does
// not stream.
func trainChunk(b *Budget) int {
	if !b.StreamInput {
		return 0
	}
	if c := streamChunk(b.MaxBatchRows); c != storage.DefaultScatterChunk {
		return c
	}
	return 0
}

// repredict makes mp's plan's predictions again from p (remodelled for
// micro-batches) with its division kept. A plan whose division p does not
// reproduce (made with other planner options) keeps its predictions, with
// a log line.
func repredict(d *storage.Dataset, o *Options, mo *MemPlanOptions, mp *MemPlan, p *planner.Profile) error {
	old := mp.Plan
	hidden := old.Hidden
	if hidden == 0 {
		hidden = -1
	}
	res, err := planner.Plan(p, &planner.PlanOptions{MemBytes: old.Memory.MemBytes, Hidden: hidden, Indptr: d.Indptr(), Cross: mo.Cross,
		Staleness: o.Staleness, Decoupled: old.Decoupled, Beta: old.Beta, Keep: old})
	if errors.Is(err, planner.ErrMismatch) {
		o.Logger.Info("plan predictions stay those of whole batches", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	o.Logger.Info("plan re-predicted for the batches training gathers", "plan", mp.PlanPath, "micro_batch_rows", p.Meta.Reads.MicroBatchRows,
		"gather_reads", res.Predicted.GatherReads, "whole_batch_gather_reads", old.Predicted.GatherReads)
	res.Recounted = true
	mp.Plan, mp.Remodeled = res, true
	return nil
}

// wholeShare is the most of avail (the budget less the reserve, the fixed
// state and the caches' tables) that whole batches' working set may take;
// batches that need more are cut into micro-batches whose working set
// takes at most half. Whole batches get more because the first cut is the
// costly one: at 3 GiB / 1 GiB (docs/ooc.md, "Streamed input layer")
// whole batches made 17 % fewer gather reads than batches cut in two, and
// their epochs were 12-15 % shorter in interleaved runs, for 28 MiB of
// the caches' 427 MiB (6.6 %).
//
// With scans of several batches (the streamed input layer, scanBatches > 1)
// whole batches may take seven eighths: a scan reads the union of its
// batches' rows once, and the denser the union, the more of it the read
// planner merges, so batches in flight whole are worth more than the
// caches they displace. At 3 GiB under 1 GiB (docs/ooc.md, "Shared
// scans") this share planned two whole batches in flight and 150 MiB of
// caches, against one batch and 343 MiB at two thirds: the first epoch
// made 89 % fewer gather reads and 19 % fewer bytes, and took 34 % less.
// noCaches reports whether training with o builds no cache at all: the
// feature and neighbour caches turned off by hand (an explicit 0) and no
// history.
func noCaches(o *Options) bool {
	return o.FeatCacheBytes < 0 && o.NeighborCacheBytes < 0 && !histOn(o)
}

// histOn reports whether training with o may build a history cache.
func histOn(o *Options) bool { return !o.NoHist && o.Layers >= 2 && o.HistCacheBytes >= 0 }

func wholeShare(avail int64, scans bool) int64 {
	if scans {
		return avail / 8 * 7
	}
	return avail / 3 * 2
}

// CacheShare is the memory, tables included, that PlanMemory gives the
// caches when training d with opts under mem from profile p (Budget.Caches,
// with Options.InFlight and FeatIODepth chosen as PlanMemory chooses
// them): what a plan for this training may use. The benchmark plans its caches with it, so that
// its plan is the one a bare `train --mem` makes.
func CacheShare(d *storage.Dataset, opts *Options, p *planner.Profile, mem int64) (int64, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	if mem <= 0 {
		return 0, fmt.Errorf("%w: CacheShare needs a budget, got %d bytes", ErrInvalidOptions, mem)
	}
	o := opts.withDataset(d, p)
	if opts.FeatIODepth == 0 {
		o.FeatIODepth = GatherDepth(mem)
	}
	b, err := budgetWorkers(d, &o, p, mem, opts.InFlight == 0 && !opts.Spill, 0, opts.Workers == 0)
	if err != nil {
		return 0, err
	}
	return b.Caches, nil
}

// budgetWorkers is budgetFor, choosing o.Workers too when autoWorkers (the
// caller left Options.Workers 0): each sampling worker holds a batch under
// construction and its macro-batch caches, and they come out of the same
// budget as the batches in flight, so where the workers the cores (or
// MinimumBudget) allow cut batches into micro-batches, or leave room for
// one batch in flight only, fewer workers are taken: the most workers with
// the fewest micro-batches, then the most batches in flight, then, when
// batches are cut, the largest micro-batches (MaxBatchRows). The last
// makes the cut, which changes results (each micro-batch draws its own
// dropout masks), a single core's: fewer workers leave more room, so it
// picks the count one core would (TestWorkersCutIndependentOfCores).
// What else the budget sizes from the room the workers leave (the
// history cache, the streamed input layer's destination bound) still
// follows the worker count: docs/train.md, "Sampling workers".
// On a 16-core machine, 1.5 GiB of data under --mem 1GiB: five workers cut
// each batch into at least 21 micro-batches, two keep batches whole (the
// development machine's plan, with its two cores). Sampling was 8 % of
// the gather's time there, so fewer workers cost little.
func budgetWorkers(d *storage.Dataset, o *Options, p *planner.Profile, mem int64, auto bool, want int64, autoWorkers bool) (*Budget, error) {
	first := *o
	b, err := budgetFor(d, o, p, mem, auto, want)
	if !autoWorkers || (err == nil && b.MicroBatches <= 1 && (!auto || b.WorkingSet.InFlight >= DefaultInFlight)) {
		return b, err
	}
	top := samplingWorkers(first.Workers)
	best, bestErr, bestO, bestW := b, err, *o, top
	for w := top - 1; w >= 1; w-- {
		ow := first
		ow.Workers = w
		bw, errw := budgetFor(d, &ow, p, mem, auto, want)
		if errw != nil {
			continue
		}
		if bestErr != nil || bw.MicroBatches < best.MicroBatches ||
			(bw.MicroBatches == best.MicroBatches && bw.WorkingSet.InFlight > best.WorkingSet.InFlight) ||
			(bw.MicroBatches == best.MicroBatches && bw.WorkingSet.InFlight == best.WorkingSet.InFlight &&
				best.MicroBatches > 1 && bw.MaxBatchRows > best.MaxBatchRows) {
			best, bestErr, bestO, bestW = bw, nil, ow, w
		}
	}
	if bestW != top && bestErr == nil {
		before := []any{"workers_before", top, "fits_before", err == nil}
		if b != nil {
			before = append(before, "micro_batches_before", b.MicroBatches, "in_flight_before", b.WorkingSet.InFlight)
		}
		o.Logger.Info("fewer sampling workers: their batches and caches would cut training batches into more micro-batches or leave fewer in flight",
			append([]any{"workers", bestW, "micro_batches", best.MicroBatches, "in_flight", best.WorkingSet.InFlight}, before...)...)
	}
	*o = bestO
	return best, bestErr
}

// budgetFor is divide, choosing o.InFlight when auto (the caller left
// Options.InFlight 0 and does not spill): DefaultInFlight, unless one batch
// in flight cuts batches into fewer micro-batches, or two do not fit at
// all, or (with as many micro-batches) two leave the caches less than
// want bytes (a plan file's caches, 0: none) and one leaves them more;
// then 1, set in o and in the Budget's working set. Each cut costs
// more reads than the overlap of gather and compute saves: at 3 GiB under
// 1 GiB (docs/ooc.md, "One batch in flight by default") two in flight cut
// each batch of 1000 targets into at least 4 micro-batches, which read
// 4.26 M times against 1.40 M whole, and the epoch took 74.5 s against
// 40.6 s with one (two bench runs minutes apart).
func budgetFor(d *storage.Dataset, o *Options, p *planner.Profile, mem int64, auto bool, want int64) (*Budget, error) {
	b, err := divide(d, o, p, mem)
	short := err == nil && want > b.Caches
	if !auto || (err == nil && b.MicroBatches <= 1 && !short) {
		return b, err
	}
	one := *o
	one.InFlight = 1
	b1, err1 := divide(d, &one, p, mem)
	switch {
	case err1 != nil && err != nil:
		// Neither fits: name the least working set.
		return nil, err1
	case err1 != nil, err == nil && b1.MicroBatches > b.MicroBatches,
		err == nil && b1.MicroBatches == b.MicroBatches && !(short && b1.Caches > b.Caches):
		return b, err
	}
	switch {
	case err != nil:
		o.Logger.Info("one batch in flight: two do not fit", "reason", err)
	case b1.MicroBatches < b.MicroBatches:
		o.Logger.Info("one batch in flight: two would cut batches into more micro-batches", "micro_batches_two", b.MicroBatches, "micro_batches_one", b1.MicroBatches)
	default:
		o.Logger.Info("one batch in flight: with two the plan's caches would not fit", "plan_cache_bytes", want, "caches_two", b.Caches, "caches_one", b1.Caches)
	}
	o.InFlight = 1
	return b1, nil
}

// divide splits mem (see Budget) for training d with o (defaults applied)
// and profile p (nil: the fanout bound for batch sizes).
func divide(d *storage.Dataset, o *Options, p *planner.Profile, mem int64) (*Budget, error) {
	given := o
	n := d.NumNodes()
	hist := histOn(o)
	b := &Budget{MemBytes: mem, Reserve: RuntimeReserve(mem), Fixed: FixedState(d, o, p), MicroBatches: 1, BatchSize: o.BatchSize}
	tables := planner.TableBytes(n, hist)
	avail := mem - b.Reserve - b.Fixed.Bytes - tables
	if o.StreamInput == StreamInputAuto {
		// Stream the input layer where its scans read several batches
		// at once (scanBatches), which reads far less than batch by
		// batch; otherwise where whole batches would not fit without it
		// and it makes them smaller: then fewer micro-batches are cut,
		// and their rows are read with fewer, larger reads. Where they
		// fit and a scan holds one batch, streaming would save memory
		// the caches cannot use for reads.
		w, on := *o, *o
		w.StreamInput, on.StreamInput = StreamInputOff, StreamInputOn
		if ok, _ := streamQualifies(o); ok {
			if off := WorkingSet(d, &w, p).Bytes; scanBatches(&on) > 1 ||
				off > wholeShare(avail, false) && WorkingSet(d, &on, p).Bytes < off {
				w.StreamInput = StreamInputOn
			}
		}
		o = &w
	}
	b.StreamInput = streamOn(o)
	// A scan keeps to one macro batch while the feature block holds its
	// rows, and a macro batch holds about one batch: scans group batches
	// only without the block.
	share := wholeShare(avail, b.StreamInput && scanBatches(o) > 1 && FeatureBlockBytes(d, o) == 0)
	if noCaches(o) {
		// Nothing would use the room a cut leaves: batches stay whole
		// while they fit at all (bench ooc's mmap-baseline turns every
		// cache off, and was cut into micro-batches for caches it never
		// built).
		share = avail
	}
	ws := WorkingSet(d, o, p)
	if ws.Bytes > share && o.MaxBatchRows == 0 {
		// Whole batches would leave the caches less than a third: cut
		// them into micro-batches whose working set takes at most half,
		// or the smallest split when even that does not fit.
		whole := ws.BatchRows
		floor := fanoutRows(microTargets(o), o.Fanouts, n)
		wsOf := func(rows int64) int64 {
			w := *o
			w.MaxBatchRows = rows
			return WorkingSet(d, &w, p).Bytes
		}
		// wsOf(min(floor, whole)) is the least: the smallest split
		// when even that does not fit.
		limit := avail / 2
		if noCaches(o) {
			limit = avail
		}
		lo := largestFitting(min(floor, whole), whole, func(rows int64) bool { return wsOf(rows) <= limit })
		w := *o
		w.MaxBatchRows = lo
		ws = WorkingSet(d, &w, p)
		b.MaxBatchRows = lo
		b.MicroBatches = int((whole + lo - 1) / lo)
	}
	if b.MaxBatchRows == 0 {
		// Whole batches fit as estimated; the cap still holds at run
		// time, so a batch larger than the estimate (another epoch's,
		// or random batches against a partition profile) is split
		// rather than overrunning the working set.
		b.MaxBatchRows = ws.BatchRows
	}
	b.WorkingSet = ws
	b.Caches = avail + tables - ws.Bytes
	fits := b.Caches >= tables
	if ws.FeatureBlockBytes > 0 && (!fits || b.MicroBatches > 1) {
		// The block is a speed-up, not a need: without it the macro
		// batch's rows are gathered like any other's. Take the division
		// without it when the block does not fit (adapt before
		// refusing), or when it fits but cuts batches into more
		// micro-batches than they need without it: each cut reads the
		// rows its micro-batches share again, more than the block's
		// sequential loads save (docs/ooc.md, "The feature block gives
		// way to whole batches": at 3 GiB under 1 GiB the block cut
		// every batch into at least 27 micro-batches). The division
		// starts again from the given options, so streaming is chosen
		// for the working set without the block.
		w := *given
		w.NoFeatureBlock = true
		if nb, err := divide(d, &w, p, mem); err == nil && (!fits || nb.MicroBatches < b.MicroBatches) {
			nb.NoFeatureBlock, nb.BlockBytes = true, ws.FeatureBlockBytes
			if fits {
				nb.BlockMicroBatches = b.MicroBatches
			}
			return nb, nil
		}
	}
	if !fits && !o.dstFromFanouts && p != nil && o.MaxBatchRows == 0 {
		// The least budget assumed the formula's destinations: cut to
		// them (more micro-batches, each within the estimate) rather
		// than refuse the budget it named.
		w := *given
		w.dstFromFanouts = true
		if nb, err := divide(d, &w, p, mem); err == nil {
			nb.DstFromFanouts = true
			return nb, nil
		}
	}
	if !fits {
		return nil, workingSetError(ws, b.Fixed, mem, tables)
	}
	return b, nil
}

// profileMismatch describes how profile p (named name) was sampled or
// priced differently from training with o, whose feature reads follow
// reads (featurecache.PlanReadsFor; its read mode is not compared), or
// returns "".
func profileMismatch(name string, p *planner.Profile, o *Options, reads featurecache.ReadPlan) string {
	if p == nil {
		return ""
	}
	var diff []string
	if !slices.Equal(p.Meta.Fanouts, o.Fanouts) {
		diff = append(diff, fmt.Sprintf("fanouts %v, training %v", p.Meta.Fanouts, o.Fanouts))
	}
	if p.Meta.BatchSize != o.BatchSize {
		diff = append(diff, fmt.Sprintf("batch size %d, training %d", p.Meta.BatchSize, o.BatchSize))
	}
	if p.Meta.SamplePlan != sample.PlanVersion {
		diff = append(diff, fmt.Sprintf("batches constructed by sample plan version %d, training %d", p.Meta.SamplePlan, sample.PlanVersion))
	}
	if o.Selection != sample.ModeAuto && p.Meta.Mode != "" && p.Meta.Mode != string(o.Selection) {
		diff = append(diff, fmt.Sprintf("%s batches, training %s", p.Meta.Mode, o.Selection))
	}
	if r := p.Meta.Reads; r != nil {
		if d := r.PricedOtherwise(reads); d != "" {
			diff = append(diff, "reads priced with "+d+" (device.json probed again, --coalesce-gap or --max-read-amp)")
		}
	}
	if len(diff) == 0 {
		return ""
	}
	return fmt.Sprintf("profile %q was sampled with %s: the plan's predictions will not hold; run 'ssdgnn profile' with training's flags", name, strings.Join(diff, "; "))
}

// planCacheBytes is what a plan's three caches take, tables included.
func planCacheBytes(p *planner.PlanResult) int64 {
	return p.Feature.Bytes() + p.History.Bytes() + p.Neighbor.Bytes()
}

// replan re-divides profile p (mp.Plan's, nil when it is not on disk) for
// the cache share of mp.Budget,
// when the plan file's caches were sized for more than --mem leaves them
// (a plan made with 'ssdgnn plan --mem X' budgets the caches alone, so
// training under the same X must shrink them). Without the profile on
// disk it fails with ErrBudget, naming the budget that would fit.
func replan(d *storage.Dataset, o *Options, cfg ModelConfig, hist bool, mo *MemPlanOptions, mp *MemPlan, p *planner.Profile) error {
	old, caches := planCacheBytes(mp.Plan), mp.Budget.Caches
	if p == nil {
		return fmt.Errorf("%w: plan %s's caches take %s but --mem %s leaves them %s, and its profile %q is not there to re-plan from: give --mem %s or more, or plan again with --mem %s",
			ErrBudget, mp.PlanPath, ibytes(old), ibytesDown(mp.MemBytes), ibytes(caches), mp.Plan.Profile, ibytesUp(mp.MemBytes+old-caches), ibytesDown(caches))
	}
	hidden := cfg.HistWidth()
	if !hist {
		hidden = -1
	}
	res, err := planner.Plan(p, &planner.PlanOptions{MemBytes: caches, Hidden: hidden, Indptr: d.Indptr(), Cross: mo.Cross,
		Staleness: o.Staleness, Decoupled: mp.Plan.Decoupled})
	if err != nil {
		return err
	}
	o.Logger.Info("plan re-divided to fit --mem", "plan", mp.PlanPath, "plan_cache_bytes", old, "cache_bytes", caches,
		"alpha", res.Alpha, "feature_bytes", res.Feature.Bytes(), "history_bytes", res.History.Bytes(), "neighbor_bytes", res.Neighbor.Bytes())
	mp.Plan, mp.Replanned = res, true
	return nil
}

// readPlan reads the plan at path and its whole profile (nil when the
// profile is not on disk or is for another node count).
func readPlan(d *storage.Dataset, path string, log interface{ Info(string, ...any) }) (*MemPlan, *planner.Profile, error) {
	res, err := planner.ReadPlan(path)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case res.NumNodes != d.NumNodes():
		return nil, nil, fmt.Errorf("%w: %s is for %d nodes, dataset %s has %d", ErrPlanMismatch, path, res.NumNodes, d.Dir(), d.NumNodes())
	case res.FeatRowBytes > 0 && res.FeatRowBytes != d.FeatRowBytes():
		return nil, nil, fmt.Errorf("%w: %s is for feature rows of %d bytes, dataset %s has %d", ErrPlanMismatch, path, res.FeatRowBytes, d.Dir(), d.FeatRowBytes())
	}
	mp := &MemPlan{Plan: res, PlanPath: path}
	if res.Profile == "" {
		return mp, nil, nil
	}
	p, err := planner.LoadProfile(d.Dir(), res.Profile)
	switch {
	case err == nil && p.Meta.NumNodes == d.NumNodes():
		// Its counts rank the caches and are recounted for training's
		// batches: those of another dataset (a profile directory copied
		// over, a dataset replaced since) are refused, as 'ssdgnn plan'
		// refuses them.
		if err := p.Meta.OfDataset(d); err != nil {
			return nil, nil, fmt.Errorf("%w: plan %s: %w", ErrPlanMismatch, path, err)
		}
		if res.ProfileID != "" && p.ID() != res.ProfileID {
			// Saved again under the name since (another training's --mem
			// re-profiles into "train"): its counts rank the caches the
			// plan sized for the old one's.
			mp.Warning = fmt.Sprintf("profile %q has been saved again since %s was made from it (profile %s, the plan's %s): the plan's cache sizes were divided for the old counts; run 'ssdgnn plan' again, or train with --mem",
				res.Profile, path, p.ID(), res.ProfileID)
		}
		return mp, p, nil
	case err == nil, errors.Is(err, planner.ErrNotFound):
		log.Info("plan's profile not usable; caches select by degree", "profile", res.Profile)
		why := "is not in " + d.Dir()
		if err == nil {
			why = fmt.Sprintf("in %s is of %d nodes", d.Dir(), p.Meta.NumNodes)
		}
		mp.Warning = fmt.Sprintf("plan %s's profile %q %s: the caches take the plan's sizes but select by degree, not by the profile's counts, and its predictions are those of the profile's batches, not recounted for training's",
			path, res.Profile, why)
		return mp, nil, nil
	}
	return nil, nil, err
}

// MemoryUse is the caches' memory, tables included, plus the working set
// reserved for the batches in flight, plus the fixed state.
type MemoryUse struct {
	FeatureBytes  int64 `json:"feature_bytes"`
	HistoryBytes  int64 `json:"history_bytes"`
	NeighborBytes int64 `json:"neighbor_bytes"`
	// WorkingSetBytes is InFlight × BatchBytes plus the dynamic
	// neighbour caches, the sampling workers' batches, the gather stage's
	// scratch and, where used, the feature block and the stream's chunks
	// (see WorkingSet).
	WorkingSetBytes int64 `json:"working_set_bytes"`
	InFlight        int   `json:"in_flight"`
	BatchBytes      int64 `json:"batch_bytes"`
	BatchRows       int64 `json:"batch_rows"`
	DynamicBytes    int64 `json:"dynamic_bytes,omitempty"`
	SamplerBytes    int64 `json:"sampler_bytes,omitempty"`
	GatherBytes     int64 `json:"gather_bytes,omitempty"`
	// FeatureBlockBytes and StreamBytes are the feature block and the
	// streamed input layer's chunk slots, where used.
	FeatureBlockBytes int64 `json:"feature_block_bytes,omitempty"`
	StreamBytes       int64 `json:"stream_bytes,omitempty"`
	// FixedBytes is the trainer's per-process state beside the caches
	// and the working set (see FixedState).
	FixedBytes int64 `json:"fixed_bytes"`
	// ReserveBytes is RuntimeReserve(LimitBytes) (0 without a limit).
	ReserveBytes int64 `json:"reserve_bytes,omitempty"`
	// TotalBytes is the caches plus the working set plus the fixed state
	// plus the reserve.
	TotalBytes int64 `json:"total_bytes"`
	// LimitBytes is Options.MemBytes (0: none).
	LimitBytes int64 `json:"limit_bytes,omitempty"`
}

func (m *MemoryUse) sum() {
	m.TotalBytes = m.FeatureBytes + m.HistoryBytes + m.NeighborBytes + m.WorkingSetBytes + m.FixedBytes + m.ReserveBytes
}

func (m *MemoryUse) setWorkingSet(ws WorkingSetEstimate) {
	m.WorkingSetBytes, m.InFlight, m.BatchBytes, m.BatchRows, m.DynamicBytes, m.SamplerBytes = ws.Bytes, ws.InFlight, ws.BatchBytes, ws.BatchRows, ws.DynamicBytes, ws.SamplerBytes
	m.GatherBytes, m.FeatureBlockBytes, m.StreamBytes = ws.GatherBytes, ws.FeatureBlockBytes, ws.StreamBytes
}

// WorkingSetEstimate is the memory the training pipeline itself needs,
// beside the caches.
type WorkingSetEstimate struct {
	// BatchRows is the input-layer rows of the largest batch expected, and
	// From says where it comes from: "profile" (the profile's
	// MaxBatchRows), "profile-mean" (1.5 × its mean rows per batch, for
	// profiles without the maximum) or "fanouts" (the most targets of a
	// batch, sample.MaxBatchTargets, × Π(1+fanout), at most the node
	// count: an upper bound).
	BatchRows int64  `json:"batch_rows"`
	From      string `json:"from"`
	// BatchBytes is one batch's peak: the input features (the gather
	// buffer, which the CPU backend adopts as the input tensor), 48 bytes
	// per input row of ids and block CSRs (sampler, host and backend
	// copies), and the backend's tensors (backendBytes: per input-layer
	// destination, at most 2·BatchRows/(1+fanout₀) of them, 64 floats,
	// 5 hidden widths and unstreamed 2·in + 64 more; the history's
	// substitution; GAT's per-source and per-edge terms). Unless Options.ZeroCopy is
	// off it adds the zero-copy split's 20 bytes per input row (the miss
	// buffer itself is counted at full size); with ZeroCopyOn, which may
	// run on the CPU backend, also 3·4·in bytes per row: an input tensor
	// separate from the gather buffer, and the hit/miss tensor and the
	// input dropout mask that exist while upload assembles it.
	BatchBytes int64 `json:"batch_bytes"`
	InFlight   int   `json:"in_flight"`
	// SamplerBytes is the batches the sampling workers are building: one
	// whole batch and its scratch each, at sample.WorkerBytesBound.
	SamplerBytes int64 `json:"sampler_bytes"`
	// SplitFrom is the whole batch's input rows when batches are cut into
	// micro-batches of BatchRows rows (Options.MaxBatchRows), else 0; its
	// ids and blocks (idBytesPerRow) are counted in BatchBytes.
	SplitFrom int64 `json:"split_from,omitempty"`
	// DynamicBytes is the partition sampler's macro-batch dynamic
	// neighbour caches held at once: sample.MacroCachesHeld(sampling
	// workers), one per worker, × the profile's MaxDynamicBytes. 0 in
	// random selection and without a matching profile. Like
	// BatchRows it comes from the profiling epoch: another epoch's macro
	// batches may be somewhat larger.
	DynamicBytes int64 `json:"dynamic_bytes,omitempty"`
	// FeatureBlockBytes is the dynamic feature block of a partition-major
	// dataset (FeatureBlockBytes in featblock.go): one macro batch's
	// feature rows, held by the gather stage.
	FeatureBlockBytes int64 `json:"feature_block_bytes,omitempty"`
	// Streamed says the input layer is streamed (Options.StreamInput):
	// BatchBytes then holds no input rows but the order and by-source
	// edges the stream needs, and StreamBytes is its chunk of ids and rows.
	Streamed    bool  `json:"streamed,omitempty"`
	StreamBytes int64 `json:"stream_bytes,omitempty"`
	// GatherBytes is the gather stage's scratch for its largest call
	// (gatherBytes): one gather runs at a time. Its read slots are in
	// FixedStateEstimate.GatherSlotBytes.
	GatherBytes int64 `json:"gather_bytes"`
	// Bytes = InFlight × BatchBytes + DynamicBytes + SamplerBytes +
	// FeatureBlockBytes + StreamBytes + GatherBytes.
	Bytes int64 `json:"bytes"`
}

// stageBytes is what the gather stage holds once, whatever the batches
// in flight, for (micro-)batches of rows input rows: the streamed input
// layer's chunk slots (0 unstreamed) and its gather scratch
// (gatherBytes). o has its defaults.
func stageBytes(d *storage.Dataset, o *Options, rows int64) (stream, gather int64) {
	if streamOn(o) {
		stream = streamChunkBytes(d.FeatDim(), streamChunk(rows))
	}
	return stream, gatherBytes(d, o, rows)
}

// gatherBytes is the gather stage's scratch for (micro-)batches of rows
// input rows: the feature cache's for a call of rows ids, or of one chunk
// when the input layer is streamed (featurecache.GatherCallBytes; its read
// slots are fixed state), and with the feature block its blockIDBytes per
// id. o has its defaults.
func gatherBytes(d *storage.Dataset, o *Options, rows int64) int64 {
	if streamOn(o) {
		rows = int64(streamChunk(rows))
	}
	n := featurecache.GatherCallBytes(d, rows, o.featureOptions())
	if FeatureBlockBytes(d, o) > 0 {
		n += blockIDBytes * rows
	}
	return n
}

// idRowBytes is the per-input-row cost of ids and block CSRs in
// WorkingSet's estimate.
const idRowBytes = 48

// idBytesPerRow is idRowBytes and, for GCN, its blocks' whole-graph
// degrees (hostBatch.withDegrees: one int32 per node and one per
// destination of the largest block, shared by the blocks: at most 8 bytes
// a row).
func idBytesPerRow(o *Options) int64 {
	if o.Model == ModelGCN {
		return idRowBytes + 8
	}
	return idRowBytes
}

// batchBytes is the peak memory of one batch (or micro-batch) of rows input
// rows: see WorkingSetEstimate.BatchBytes. o has its defaults.
func batchBytes(d *storage.Dataset, o *Options, rows int64) int64 {
	return batchBytesDst(d, o, rows, batchDst(o, rows))
}

// batchBytesDst is batchBytes for a (micro-)batch of dst input-layer
// destinations.
func batchBytesDst(d *storage.Dataset, o *Options, rows, dst int64) int64 {
	in := int64(d.FeatDim())
	if streamOn(o) {
		// No input rows: a chunk at a time (WorkingSetEstimate.StreamBytes),
		// folded into the destinations' aggregate and own rows (the 2·in
		// below, the adopted ring buffer), with the order and the edges
		// by source (at most Fanouts[0] per destination: streamQualifies)
		// as scratch. Training cuts batches with more destinations than
		// dst (trainBound), so the estimate holds.
		edges := min(dst*min(int64(o.Fanouts[0]), d.NumEdges()), d.NumEdges())
		return rows*(idBytesPerRow(o)+streamRowBytes) + edges*streamEdgeBytes + dst*2*in*4 + backendBytes(d, o, rows, dst, true)
	}
	return rows*(4*in+idBytesPerRow(o)+zeroCopyRowBytes(o.ZeroCopy, in)) + backendBytes(d, o, rows, dst, false)
}

// Backend tensors of a training step, per input-layer destination, in
// float32s: a constant, and a multiple of the hidden width (heads × hidden
// for GAT); unstreamed also the layer's aggregate and own input rows
// (2·in) and another constant. Fitted to the CPU backend's counted peak
// (memacct.Backend, size classes included) on a 300,000-node graph
// (2026-11-27; SAGE, GCN and GAT, 2 and 3 layers, hidden 16 to 128,
// streamed and not, history on and off): streamed SAGE took 215 floats
// a destination at hidden 32 and 689 at 128, 57 + 4.94 widths.
// TestBatchBytesCoversMeasured holds the estimate above the measured
// peak (1.04–1.66× in its twelve configurations).
const (
	backendDstFloats  = 64
	backendWidthTerms = 5
	// backendHistTerms is the history's substitution (Model.substitute:
	// the pulled rows, the merged rows and their gradient), in hidden
	// widths per destination of the layer whose outputs it replaces:
	// 4.5 measured.
	backendHistTerms = 5
	// GAT's per-source terms (z = x·W and its two gradients) in widths,
	// and per-edge terms (scores, attention and their gradients) in
	// heads.
	gatSrcTerms  = 3
	gatEdgeTerms = 4
)

// backendBytes is the backend's tensors for one (micro-)batch of rows input
// rows and dst input-layer destinations (backendDstFloats and the terms
// beside it), with a tenth more for the store's size classes and the
// spread between batches. The model's parameters are fixed state.
func backendBytes(d *storage.Dataset, o *Options, rows, dst int64, streamed bool) int64 {
	in := int64(d.FeatDim())
	h := int64(o.Hidden)
	if o.Model == ModelGAT {
		h *= int64(o.Heads)
	}
	per := backendDstFloats + backendWidthTerms*h
	if !streamed {
		per += 2*in + backendDstFloats
	}
	n := dst * per
	if o.Model == ModelGAT {
		f0 := min(int64(o.Fanouts[0]), d.NumEdges()) // a list is no longer than the graph's edges
		if f0 < 0 {
			f0 = (d.NumEdges() + d.NumNodes() - 1) / max(d.NumNodes(), 1)
		}
		n += rows*gatSrcTerms*h + dst*(f0+1)*gatEdgeTerms*int64(o.Heads)
	}
	if histOn(o) {
		// The history replaces layer L−2's outputs: the input layer's
		// destinations with two layers, fewer above.
		hd := dst
		for _, f := range o.Fanouts[1 : len(o.Fanouts)-1] {
			if f > 0 {
				hd = min(hd, 2*hd/int64(1+f)+1)
			}
		}
		n += hd * backendHistTerms * h
	}
	return 4 * n * 11 / 10
}

// batchDst is the input-layer destinations WorkingSet assumes a
// (micro-)batch of rows input rows has: the profile's measured ratio with
// a twentieth more when it sampled these batches, else
// 2·rows/(1+fanout₀)+1; never more than rows. Neither is a bound (the
// ratio is epoch 0's, and on a graph whose degrees are below fanout₀
// the formula undershoots: Cora's batches at fanouts 10,10 had 0.45
// destinations a row against its 0.18), so training cuts a batch with
// more (trainBound) and the estimate holds. o has its defaults.
func batchDst(o *Options, rows int64) int64 {
	dst := rows
	if testDstPerRow > 0 {
		return min(dst, int64(math.Ceil(testDstPerRow*float64(rows)))+1)
	}
	if p := o.Profile; p != nil && p.Meta.MaxDstPerRow > 0 && sameBatches(o, p) && !o.dstFromFanouts {
		dst = min(dst, int64(math.Ceil(p.Meta.MaxDstPerRow*1.05*float64(rows)))+1)
	} else if f0 := o.Fanouts[0]; f0 > 0 {
		dst = min(dst, 2*rows/int64(1+f0)+1)
	}
	return dst
}

// sameBatches reports whether profile p sampled batches as training with o
// does (fanouts and batch size): only then is its ratio of destinations to
// rows training's.
func sameBatches(o *Options, p *planner.Profile) bool {
	return slices.Equal(p.Meta.Fanouts, o.Fanouts) && p.Meta.BatchSize == o.BatchSize
}

// trainBound is the cut training with o makes (Trainer.bound) for
// (micro-)batches of at most rows input rows: also at most the input-layer
// destinations the estimate assumed (batchDst), whose rows a streamed
// batch holds and whose activations every batch's backend tensors scale
// with (backendBytes). The plan's recount (remodelReads) cuts the
// profile's batches with it too. Without a profile of these batches the
// bound is not tight for deeper models: with three layers of fanout 10,
// batches of 185,000 input rows had 48,000 input-layer destinations
// against the formula's 33,600. o has its defaults.
func trainBound(o *Options, rows int64) splitBound {
	b := splitBound{rows: int(rows)}
	if rows > 0 {
		b.dst = int(max(batchDst(o, rows), o.MaxBatchDst))
	}
	return b
}

// testDstPerRow, set by tests, replaces batchDst's ratio of destinations
// to rows, to test the cut that keeps the estimate when it undershoots.
var testDstPerRow float64

// testNoDstRoom, set by tests, keeps setMaxBatchDst from raising the
// bound, for tests of the cut the estimate makes.
var testNoDstRoom bool

// setMaxBatchDst sets b.MaxBatchDst for training with o (its defaults
// applied) when the plan's caches take planned of b.Caches: the share
// they leave unused (caches are planned no larger than what they hold)
// goes to the batches in flight as room for more input-layer destinations
// than the estimate, so that a batch is not cut into micro-batches when
// nothing needs the memory. It reports whether the bound changed (the
// caller then counts the reads of the new cut). Before, under --mem 2GiB on a 50,000-node graph every batch was
// cut in two (the estimate 2·rows/(1+fanout₀) undershot its
// destinations), and training differed from the unbudgeted run.
func (b *Budget) setMaxBatchDst(d *storage.Dataset, o *Options, planned int64) bool {
	old := b.MaxBatchDst
	b.MaxBatchDst = 0
	left := b.Caches - planned
	if b.MaxBatchRows > 0 && left > 0 && !testNoDstRoom {
		w := asTrained(o, b)
		rows := b.MaxBatchRows
		base := batchDst(w, rows)
		const step = 1024
		if per := (batchBytesDst(d, w, rows, base+step) - batchBytesDst(d, w, rows, base) + step - 1) / step; per > 0 {
			if dst := min(rows, base+left/int64(max(b.WorkingSet.InFlight, 1))/per); dst > base {
				b.MaxBatchDst = dst
			}
		}
	}
	return b.MaxBatchDst != old
}

// evalBound is the cut sampled evaluation, which gathers whole input
// rows, makes in the working set planned for training's (micro-)batches
// of rows input rows: training's cut (trainBound), and with the streamed
// input layer the most rows whose unstreamed estimate fits the streamed
// one, with the destinations that estimate assumed. o has its defaults.
func evalBound(d *storage.Dataset, o *Options, rows int64) splitBound {
	if !streamOn(o) || rows <= 0 {
		return trainBound(o, rows)
	}
	off := *o
	off.StreamInput = StreamInputOff
	limit := batchBytes(d, o, rows) + gatherBytes(d, o, rows)
	r := largestFitting(1, rows, func(r int64) bool { return batchBytes(d, &off, r)+gatherBytes(d, &off, r) <= limit })
	return splitBound{rows: int(r), dst: int(batchDst(&off, r))}
}

// largestFitting is the largest x in [lo, hi] with fits(x), for fits true
// up to some point and false after it; lo when none fits.
func largestFitting(lo, hi int64, fits func(int64) bool) int64 {
	n := sort.Search(int(hi-lo+1), func(i int) bool { return !fits(lo + int64(i)) })
	return lo + max(int64(n)-1, 0)
}

// fanoutRows is the most input rows a batch of targets targets can have:
// targets × Π(1+fanout), at most n (a fanout of -1 takes every node).
func fanoutRows(targets int64, fanouts []int, n int64) int64 {
	r := float64(targets)
	for _, f := range fanouts {
		if f < 0 || r >= float64(n) {
			return n
		}
		r *= float64(1 + f)
	}
	return int64(min(r, float64(n)))
}

// WorkingSet estimates the pipeline's working set for training d with
// opts: Options.InFlight batches of the largest expected size (see
// WorkingSetEstimate). The batch size comes from p (nil: opts.Profile) when
// its batch size and fanouts match opts, else from the fanouts.
func WorkingSet(d *storage.Dataset, opts *Options, p *planner.Profile) WorkingSetEstimate {
	o := withFanoutsOf(opts.withDefaults(), d)
	if p == nil {
		p = o.Profile
	}
	o.Profile = p // batchDst reads its ratio of destinations to rows
	n := d.NumNodes()
	var ws WorkingSetEstimate
	if p != nil && sameBatches(&o, p) && p.Meta.Batches > 0 {
		if o.Selection == sample.ModePartition && p.Meta.MaxDynamicBytes > 0 {
			ws.DynamicBytes = int64(sample.MacroCachesHeld(samplingWorkers(o.Workers))) * p.Meta.MaxDynamicBytes
		}
		if p.Meta.MaxBatchRows > 0 {
			ws.BatchRows, ws.From = p.Meta.MaxBatchRows, "profile"
		} else {
			ws.BatchRows, ws.From = (3*p.Meta.GatheredRows+2*p.Meta.Batches-1)/(2*p.Meta.Batches), "profile-mean"
		}
	} else {
		ws.BatchRows, ws.From = fanoutRows(batchTargets(&o), o.Fanouts, n), "fanouts"
	}
	if o.MaxBatchRows > 0 && ws.BatchRows > o.MaxBatchRows {
		// Batches are cut into micro-batches of at most MaxBatchRows
		// input rows; the whole batch's ids and blocks stay alive while
		// they are computed.
		ws.SplitFrom = ws.BatchRows
		ws.BatchRows, ws.From = o.MaxBatchRows, ws.From+", micro-batches"
	}
	ws.BatchBytes = batchBytes(d, &o, ws.BatchRows) + ws.SplitFrom*idBytesPerRow(&o)
	ws.InFlight = o.InFlight
	// Each sampling worker holds the batch it is building, whole.
	ws.SamplerBytes = int64(samplingWorkers(o.Workers)) * sample.WorkerBytesBound(batchTargets(&o), o.Fanouts, n, d.NumEdges(), o.Source)
	ws.Bytes = int64(ws.InFlight)*ws.BatchBytes + ws.DynamicBytes + ws.SamplerBytes
	ws.StreamBytes, ws.GatherBytes = stageBytes(d, &o, ws.BatchRows)
	ws.Streamed = streamOn(&o)
	ws.Bytes += ws.StreamBytes + ws.GatherBytes
	// The feature block, separate from the adjacency caches above.
	ws.FeatureBlockBytes = FeatureBlockBytes(d, &o)
	ws.Bytes += ws.FeatureBlockBytes
	return ws
}

// FixedStateEstimate is the memory the trainer holds for the whole run,
// independent of the batches: per-node state that is neither a cache nor
// a batch.
type FixedStateEstimate struct {
	// Workers is the number of sampling goroutines, SamplerBytes their
	// scratch: sample.IDMapBytes each (a dense node → local-id map of 4
	// bytes per node up to 2^23 nodes, else a hash map sized by the batch,
	// counted as 0 here).
	Workers      int   `json:"workers"`
	SamplerBytes int64 `json:"sampler_bytes"`
	// ProfileBytes is the part of the profile kept for the run:
	// profileNodeBytes (8) bytes per node (saved_IO_feat, which the
	// profiled feature cache keeps as its selection counts, and the
	// history score the plan ranked by, planner.Profile.ForTraining) when
	// Options.Profile is set, else 0. PlanMemory's
	// MemPlan carries only these arrays.
	ProfileBytes int64 `json:"profile_bytes"`
	// ModelBytes is the model on its backend: weights, gradients, Adam's
	// moments and the micro-batch gradient sums (ModelConfig.MemBytes),
	// and the host copy of one parameter a checkpoint write takes
	// (ModelConfig.CheckpointScratchBytes).
	ModelBytes int64 `json:"model_bytes"`
	// GatherSlotBytes is the read slots of the feature cache's read
	// session (featurecache.GatherSlotBytes: IODepth slots of its largest
	// read, 16 × 256 KiB by default), kept for the run. One gather runs
	// at a time (profiling's, the gather stage's, evaluation's), so one
	// session is counted.
	GatherSlotBytes int64 `json:"gather_slot_bytes"`
	// DegreeBytes is GCN's whole-graph degrees (graphDegrees: 4 bytes
	// per node, 8 when the dataset is not symmetrised), 0 for the other
	// models.
	DegreeBytes int64 `json:"degree_bytes,omitempty"`
	// BackendScratchBytes is what the backend keeps beyond its tensors
	// for one of its workers (backendScratchBytes: the CPU backend's GEMM
	// packing buffers, 262 KiB; Cora's whole streamed SAGE batch peaked at
	// 0.50 MiB of backend memory, two workers' buffers included,
	// TestBatchDstOfLowDegree). Each further worker's (one a core) is
	// within the runtime reserve (RuntimeReserve), so that one budget
	// divides alike, and trains alike with --workers, on machines with
	// other core counts: counted here, every worker's changed the history
	// cache's share and the losses of a --workers 2 run on the 50,000-node
	// graph between GOMAXPROCS 1, 2 and 4 (0.26, 0.5 and 1 MiB).
	BackendScratchBytes int64 `json:"backend_scratch_bytes,omitempty"`
	// Bytes = SamplerBytes + ProfileBytes + ModelBytes + GatherSlotBytes +
	// DegreeBytes + BackendScratchBytes.
	Bytes int64 `json:"bytes"`
}

const (
	// profileNodeBytes is the profile arrays kept per node
	// (planner.Profile.ForTraining: Feat and HistScores, 4 bytes each).
	profileNodeBytes = 8
)

// FixedState estimates the trainer's fixed state for training d with
// opts (p nil: opts.Profile):
//
//	Bytes = 4 · N · Workers  (N ≤ 2^23; else 0)  +  8 · N  (with a profile)  +  model  +  gather slots
//	        +  4 or 8 · N  (GCN's degrees)  +  the backend's scratch
//
// with Workers defaulting to GOMAXPROCS as the sampler's does. The memory
// check and --mem reserve it beside the working set. Memory-mapped
// dataset and partition files are not counted: the kernel may drop their
// pages under pressure.
func FixedState(d *storage.Dataset, opts *Options, p *planner.Profile) FixedStateEstimate {
	o := withFanoutsOf(opts.withDefaults(), d)
	if p == nil {
		p = o.Profile
	}
	fs := fixedState(d.NumNodes(), o.Workers, p != nil)
	mc := modelConfig(d, &o)
	fs.ModelBytes = mc.MemBytes(true) + mc.CheckpointScratchBytes()
	fs.GatherSlotBytes = featurecache.GatherSlotBytes(d, o.featureOptions())
	if o.Model == ModelGCN {
		fs.DegreeBytes = degreeBytes(d)
	}
	fs.BackendScratchBytes = backendScratchBytes(o.Backend)
	fs.Bytes += fs.ModelBytes + fs.GatherSlotBytes + fs.DegreeBytes + fs.BackendScratchBytes
	return fs
}

// backendScratchBytes is what backend be keeps for its life beyond its
// tensors for one worker (a backend's ScratchBytes, at most one CPU
// worker's; nil: the CPU backend New makes).
func backendScratchBytes(be kernels.Backend) int64 {
	one := cpu.ScratchBytes(&cpu.Options{Workers: 1})
	if be == nil {
		return one
	}
	if s, ok := be.(interface{ ScratchBytes() int64 }); ok {
		return min(s.ScratchBytes(), one)
	}
	return 0
}

// modelConfig is the model o trains on d (o with defaults).
func modelConfig(d *storage.Dataset, o *Options) ModelConfig {
	return ModelConfig{Kind: o.Model, InDim: d.FeatDim(), Hidden: o.Hidden, Classes: int(d.Manifest().NumClasses),
		Layers: o.Layers, Heads: o.Heads, Dropout: float32(o.Dropout)}
}

// samplingWorkers is the sampler's worker count for Options.Workers w
// (sample's default, GOMAXPROCS, when w <= 0).
func samplingWorkers(w int) int {
	if w <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return w
}

func fixedState(n int64, workers int, profile bool) FixedStateEstimate {
	workers = samplingWorkers(workers)
	fs := FixedStateEstimate{Workers: workers}
	fs.SamplerBytes = sample.IDMapBytes(n) * int64(workers)
	if profile {
		fs.ProfileBytes = profileNodeBytes * n
	}
	fs.Bytes = fs.SamplerBytes + fs.ProfileBytes
	return fs
}

// keptProfile is p without the arrays that only planning reads (the
// neighbour benefit and the history validity counts): what the trainer
// needs of it, so the rest can be freed once the plan is made.
func keptProfile(p *planner.Profile, beta float64) *planner.Profile {
	if p == nil {
		return nil
	}
	if beta <= 0 {
		beta = p.Meta.Beta
	}
	return p.ForTraining(beta)
}

func workingSetError(ws WorkingSetEstimate, fs FixedStateEstimate, mem, caches int64) error {
	block := ""
	if ws.FeatureBlockBytes > 0 {
		block = fmt.Sprintf(", a feature block of %s", ibytes(ws.FeatureBlockBytes))
	}
	fix := "a smaller --batch-size or --fanouts"
	if ws.InFlight > 1 {
		fix += ", or --in-flight 1"
	}
	return fmt.Errorf("%w: --mem %s (less the runtime reserve of %s) cannot hold the training working set of %d in-flight batches × %s (up to %d input rows per batch, from %s), %s of macro-batch neighbour caches, %s of batches the sampling workers build%s, plus %s of fixed state (%d sampling workers) plus %s of cache tables: use %s",
		ErrBudget, ibytes(mem), ibytes(RuntimeReserve(mem)), ws.InFlight, ibytes(ws.BatchBytes), ws.BatchRows, ws.From, ibytes(ws.DynamicBytes), ibytes(ws.SamplerBytes), block, ibytes(fs.Bytes), fs.Workers, ibytes(caches), fix)
}

// estimateMemory is the memory training d with o takes at most: the
// caches (c, from planner.BuildOptions.Estimate), the working set, the
// fixed state and the runtime reserve.
func estimateMemory(d *storage.Dataset, o *Options, c planner.CacheBytes) MemoryUse {
	m := MemoryUse{FeatureBytes: c.Feature, HistoryBytes: c.History, NeighborBytes: c.Neighbor}
	m.LimitBytes = o.MemBytes
	if o.MemBytes > 0 {
		m.ReserveBytes = RuntimeReserve(o.MemBytes)
	}
	m.setWorkingSet(WorkingSet(d, o, nil))
	m.FixedBytes = FixedState(d, o, nil).Bytes
	m.sum()
	return m
}

func checkMemory(m MemoryUse, when string) error {
	if m.LimitBytes <= 0 || m.TotalBytes <= m.LimitBytes {
		return nil
	}
	caches := m.FeatureBytes + m.HistoryBytes + m.NeighborBytes
	if m.WorkingSetBytes > 0 && m.WorkingSetBytes+m.FixedBytes+m.ReserveBytes+min(caches, 1) > m.LimitBytes {
		return fmt.Errorf("%w: %s: the training working set (%d in-flight batches × %s, up to %d input rows each), fixed state (%s) and runtime reserve (%s) alone exceed --mem %s: use a smaller --batch-size or --fanouts",
			ErrBudget, when, m.InFlight, ibytes(m.BatchBytes), m.BatchRows, ibytes(m.FixedBytes), ibytes(m.ReserveBytes), ibytes(m.LimitBytes))
	}
	room := m.LimitBytes - m.WorkingSetBytes - m.FixedBytes - m.ReserveBytes
	return fmt.Errorf("%w: %s: the caches take %s (feature %s, history %s, neighbour %s, tables included), but --mem %s leaves %s for them beside the working set (%s, %d in-flight batches), fixed state (%s) and runtime reserve (%s): lower --feat-cache, --hist-cache or --neighbor-cache (what was given, or the plan's), or raise --mem to %s",
		ErrBudget, when, ibytes(caches), ibytes(m.FeatureBytes), ibytes(m.HistoryBytes), ibytes(m.NeighborBytes), ibytes(m.LimitBytes), ibytes(max(room, 0)),
		ibytes(m.WorkingSetBytes), m.InFlight, ibytes(m.FixedBytes), ibytes(m.ReserveBytes), ibytesUp(leastMemFor(m.TotalBytes-m.ReserveBytes)))
}

// givenCacheBytes is what the caches sized by hand (a positive
// FeatCacheBytes, HistCacheBytes or NeighborCacheBytes) take, tables
// included (planner.BuildOptions.Estimate).
func givenCacheBytes(d *storage.Dataset, o *Options, histWidth int) int64 {
	given := func(v int64) int64 {
		if v > 0 {
			return v
		}
		return -1 // off: not counted here
	}
	bo := o.buildOptions(histWidth)
	bo.Plan, bo.Profile = nil, nil
	bo.FeatureBytes, bo.HistoryBytes, bo.NeighborBytes = given(o.FeatCacheBytes), given(o.HistCacheBytes), given(o.NeighborCacheBytes)
	c := bo.Estimate(d)
	return c.Feature + c.History + c.Neighbor
}

// givenAtLeastTables refuses, before any work, a feature or history cache
// sized by hand below its own address table (the least it can be; 0
// turns it off): the cache would refuse it after the profiling epoch.
func givenAtLeastTables(d *storage.Dataset, o *Options, histWidth int) error {
	n := d.NumNodes()
	if f := o.FeatCacheBytes; f > 0 && o.FeatPolicy != featurecache.PolicyDynamic {
		if least := featurecache.BytesFor(0, d.FeatRowBytes(), n); f < least {
			return fmt.Errorf("%w: --feat-cache %s is below the feature cache's address table (%s over %d nodes): give at least %s, or 0 for none",
				ErrBudget, ibytes(f), ibytes(least), n, ibytesUp(least))
		}
	}
	if h := o.HistCacheBytes; h > 0 && histWidth >= 1 {
		if least := histcache.BytesFor(n, 0, histWidth); h < least {
			return fmt.Errorf("%w: --hist-cache %s is below the history cache's address table (%s over %d nodes): give at least %s, or 0 for none",
				ErrBudget, ibytes(h), ibytes(least), n, ibytesUp(least))
		}
	}
	return nil
}

// givenFlags names the cache sizes o gives by hand ("--feat-cache 8 MiB
// and --hist-cache 4 MiB").
func givenFlags(o *Options) string {
	var f []string
	for _, c := range []struct {
		flag string
		v    int64
	}{{"--feat-cache", o.FeatCacheBytes}, {"--hist-cache", o.HistCacheBytes}, {"--neighbor-cache", o.NeighborCacheBytes}} {
		if c.v > 0 {
			f = append(f, c.flag+" "+ibytes(c.v))
		}
	}
	return strings.Join(f, " and ")
}

// memForCaches is the least --mem above from, in MiB steps, whose budget
// (budgetFor, at the read depth of that --mem unless opts fixes one)
// leaves caches bytes for the caches; 0 when none within 4 GiB more. The
// working set and fixed state grow with --mem (the read slots, a second
// batch in flight), so the least is searched, not solved for.
func memForCaches(d *storage.Dataset, opts, o *Options, p *planner.Profile, auto bool, caches, from int64) int64 {
	const mib = 1 << 20
	quiet := *o
	quiet.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for m := (from + mib) &^ (mib - 1); m <= from+4096*mib; m += mib {
		c := quiet
		if opts.FeatIODepth == 0 {
			c.FeatIODepth = GatherDepth(m)
		}
		if b, err := budgetFor(d, &c, p, m, auto, caches); err == nil && b.Caches >= caches {
			return m
		}
	}
	return 0
}

// leastMemFor is the least --mem M whose room beside the runtime reserve
// (M − RuntimeReserve(M)) holds need bytes.
func leastMemFor(need int64) int64 {
	const mib = 1 << 20
	m := (need + RuntimeReserve(need) + mib - 1) &^ (mib - 1)
	for m-RuntimeReserve(m) < need {
		m += mib
	}
	return m
}

// zeroCopyRowBytes is the zero-copy path's extra working set per input row
// in WorkingSet's estimate (see WorkingSetEstimate.BatchBytes).
func zeroCopyRowBytes(mode string, in int64) int64 {
	switch mode {
	case ZeroCopyOff:
		return 0
	case ZeroCopyOn:
		return zcSplitRowBytes + 3*4*in
	}
	return zcSplitRowBytes
}

// NoMemWithPlan replaces DefaultMem's note when there is no budget but a
// plan gives one (PlanMemory: the plan's caches plus the working set,
// fixed state and reserve); DefaultMem's "no memory budget; feature and
// neighbour caches off" was false there.
const NoMemWithPlan = "no --mem and no memory cgroup limit: the budget is --plan's caches plus the working set, fixed state and runtime reserve"

// DefaultMem resolves --mem: set says whether it was given (then *mem
// stands); else the deprecated --mem-limit when given; else the limit of
// the memory cgroup this process runs in. Without any of them there is no
// budget: the process shares the machine with others, and ssdgnn does not
// guess how much of it the user grants, so caches are off unless sized by
// hand and batches are not split. note is a line for the user, or "".
func DefaultMem(set bool, mem *int64, limitSet bool, limit int64) (note string) {
	switch {
	case set:
		return ""
	case limitSet:
		*mem = limit
		return "--mem-limit is deprecated: it is now the same as --mem, the whole process's budget"
	}
	if l, ok := cgroup.SelfMemoryLimit(); ok {
		*mem = l
		return fmt.Sprintf("--mem %s: the limit of the memory cgroup this process runs in", ibytes(l))
	}
	return "no --mem and no memory cgroup limit: no memory budget; feature and neighbour caches off unless sized by hand, the history cache at its default (--mem SIZE plans them all)"
}

// MemWithinCgroup is cgroup.WithinLimit as command cmd's refusal ("train",
// "infer"): a *BudgetError, which matches ErrBudget.
func MemWithinCgroup(cmd string, mem int64) error {
	if err := cgroup.WithinLimit(mem); err != nil {
		return &BudgetError{Cmd: cmd, Err: err}
	}
	return nil
}

// MemAboveMachine is a warning line when mem, the whole process's budget,
// exceeds the machine's memory (memstat.Total), "" otherwise: the planner
// would size caches the machine cannot hold (--mem 100GiB on a 23 GiB
// machine planned 87 GiB of caches without a word). Only a memory
// cgroup's limit is refused (MemWithinCgroup): swap may make more usable.
func MemAboveMachine(mem int64) string { return memAboveMachine(mem, memstat.Total()) }

func memAboveMachine(mem, total int64) string {
	if mem <= 0 || total <= 0 || mem <= total {
		return ""
	}
	return fmt.Sprintf("--mem %s exceeds this machine's memory (%s): the caches are planned for memory it does not have; give at most %s",
		ibytes(mem), ibytes(total), ibytes(total))
}

// LessBackend takes the backend's own host memory (kernels.HostFootprint:
// a GPU driver's context, module and pinned staging, measured when it was
// opened) out of mem, the whole process's budget, and returns what is left
// to plan with and a line for the user ("" when nothing was taken). A
// budget the backend alone fills is ErrBudget.
func LessBackend(be kernels.Backend, mem int64) (int64, string, error) {
	f, ok := be.(kernels.HostFootprint)
	if !ok || mem <= 0 {
		return mem, "", nil
	}
	hb := f.HostBytes()
	if hb <= 0 {
		return mem, "", nil
	}
	if hb >= mem {
		return 0, "", fmt.Errorf("%w: --mem %s: the %s backend alone holds %s of host memory", ErrBudget, ibytes(mem), be.Name(), ibytes(hb))
	}
	return mem - hb, fmt.Sprintf("--mem %s less the %s backend's own host memory (%s, measured as it opened): planning with %s",
		ibytes(mem), be.Name(), ibytes(hb), ibytes(mem-hb)), nil
}

// SoftMemoryLimit is the Go runtime's soft memory limit for a process
// budget of mem bytes (0: none): mem less half the runtime reserve, so the
// garbage collector works harder instead of letting the heap outgrow the
// budget, while the other half of the reserve stays for memory outside the
// Go heap (stacks, the binary, page cache).
func SoftMemoryLimit(mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	return mem - RuntimeReserve(mem)/2
}

// BudgetGCPercent is the garbage collector's target (GOGC) under a memory
// budget: a collection starts when the heap has grown 10 % past the data
// the last one kept, instead of the runtime's default 100 %. Garbage is
// memory the budget's caches and the page cache do not get: under a
// cgroup that charges the page cache, the mmapped graph is read from disk
// again when garbage displaces it. Measured at 3 GiB against 1 GiB
// (docs/train.md, "The collector's target"): GOGC 10 against 100, epoch
// 75.0–80.6 s against 87.8–94.8 s, 13 % fewer bytes read, less CPU
// (most of the heap is pointer-free arrays, which marking skips), same
// accuracy.
const BudgetGCPercent = 10

// TuneGC sets the Go runtime for a process budget of mem bytes: the soft
// memory limit (SoftMemoryLimit) and the collector's target
// (BudgetGCPercent). Without a budget (mem <= 0) it changes nothing. It
// returns a function that restores both.
func TuneGC(mem int64) (restore func()) {
	soft := SoftMemoryLimit(mem)
	if soft <= 0 {
		return func() {}
	}
	limit := debug.SetMemoryLimit(soft)
	percent := debug.SetGCPercent(BudgetGCPercent)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// WriteBudget prints b's arithmetic, one line per term.
func WriteBudget(w io.Writer, b *Budget) error {
	ws := b.WorkingSet
	batch := fmt.Sprintf("batch %d whole", b.BatchSize)
	if b.MicroBatches > 1 {
		batch = fmt.Sprintf("batch %d as ≥%d micro-batches of ≤%d input rows (whole: %d)", b.BatchSize, b.MicroBatches, b.MaxBatchRows, ws.SplitFrom)
	}
	// Every term of ws.Bytes is named, so the line adds up.
	terms := fmt.Sprintf("macro-batch caches %s; sampling workers %s; gather scratch %s", ibytes(ws.DynamicBytes), ibytes(ws.SamplerBytes), ibytes(ws.GatherBytes))
	if ws.FeatureBlockBytes > 0 {
		terms += "; feature block " + ibytes(ws.FeatureBlockBytes)
	}
	switch {
	case b.NoFeatureBlock && b.BlockMicroBatches > 0:
		terms += fmt.Sprintf("; feature block off: its %s would cut batches into %d micro-batches", ibytes(b.BlockBytes), b.BlockMicroBatches)
	case b.NoFeatureBlock:
		terms += fmt.Sprintf("; feature block off: its %s did not fit", ibytes(b.BlockBytes))
	}
	if ws.Streamed {
		terms += "; input layer streamed, chunk " + ibytes(ws.StreamBytes)
	}
	degrees := ""
	if b.Fixed.DegreeBytes > 0 {
		degrees = ", GCN's graph degrees " + ibytes(b.Fixed.DegreeBytes)
	}
	caches := "room for the feature, history and neighbour caches, tables included; the plan may use less"
	if b.MaxBatchDst > 0 {
		caches += fmt.Sprintf(", and what it leaves lets a batch have up to %d input-layer destinations", b.MaxBatchDst)
	}
	_, err := fmt.Fprintf(w, `memory budget --mem %s:
  runtime reserve   %10s  (Go runtime, stacks, binary, page cache)
  fixed state       %10s  (model and optimiser %s, sampler scratch %s, profile %s, feature read slots %s, backend scratch %s%s)
  working set       %10s  (%d in flight × %s; %s; %s)
  caches            %10s  (%s)
`, ibytes(b.MemBytes), ibytes(b.Reserve), ibytes(b.Fixed.Bytes), ibytes(b.Fixed.ModelBytes), ibytes(b.Fixed.SamplerBytes), ibytes(b.Fixed.ProfileBytes), ibytes(b.Fixed.GatherSlotBytes), ibytes(b.Fixed.BackendScratchBytes), degrees,
		ibytes(ws.Bytes), ws.InFlight, ibytes(ws.BatchBytes), batch, terms, ibytes(b.Caches), caches)
	return err
}
