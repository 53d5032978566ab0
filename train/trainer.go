package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Trainer trains one model on one dataset. It is not safe for concurrent
// use; Run owns the pipeline goroutines of an epoch and joins them before it
// returns.
type Trainer struct {
	// trainedOn is the dataset name of the checkpoint the trainer was
	// restored from ("" when none): TrainedOn.
	trainedOn string
	// trainedSums are that checkpoint's DatasetSums (OtherData).
	trainedSums []string
	// restored is the training position of the checkpoint
	// NewFromCheckpoint restored (whole epochs and batches of the next):
	// the model infer predicts with (InferReport).
	restored struct{ epochs, batches int }
	d        *storage.Dataset
	o        Options
	be       kernels.Backend
	ownBE    bool
	beMu     sync.Mutex // serialises backend use between transfer and compute

	model   *Model
	sampler *sample.Sampler
	// deg are GCN's whole-graph degrees (nil for other models), which
	// every block's normalisation uses: training's, sampled
	// evaluation's and layer-wise evaluation's.
	deg *graphDegrees
	// caches owns the feature, neighbour and history caches (built by
	// planner.BuildCaches); fc, nc and hc are its members (nc and hc nil
	// when there is none).
	caches *planner.Caches
	fc     *featurecache.Cache
	nc     *neighborcache.Cache
	hc     *histcache.Cache

	// fb is the dynamic feature block of a partition-major dataset (nil
	// otherwise); only the gather stage uses it.
	fb *featBlock

	// reuse is the running epoch's reuse broker (nil between epochs); the
	// sampler's ReuseFor hook reaches it through reuseMu.
	reuseMu sync.Mutex
	reuse   *epochReuse

	// zc is the registered feature-cache array of the zero-copy input
	// path (nil when off); zcRep says why it is off.
	zc    *zeroCopyFeats
	zcRep ZeroCopyReport
	// stream is the streamed input layer's host half (nil when off; only
	// the gather stage uses it).
	stream *streamer
	// depth is ReuseDepth(&o): batch i's reuse set is decided after
	// compute of batch i−depth.
	depth int
	mem   MemoryUse
	// lwStage forces layer-wise inference's stage kind (lwMemory, lwPush,
	// lwFiles; tests); lwAuto chooses by memory.
	lwStage string
	// bound is what a training micro-batch may hold (zero: batches are
	// never split for memory), evalBound the same for sampled evaluation,
	// which gathers whole input rows; gradAcc holds the batch's gradient
	// sums while its micro-batches are computed (nil until the first
	// split batch).
	bound, evalBound splitBound
	gradAcc          []kernels.Tensor
	// lastRing describes the feature-buffer ring of the last epoch.
	lastRing ringStats
	// firstEpochStat is the first entry of epochStats trained by this
	// process (earlier ones come from a checkpoint).
	firstEpochStat int
	// keepPrev: CheckpointDir held a checkpoint this run did not resume;
	// the first SaveCheckpoint keeps it as PrevCheckpointFile.
	keepPrev bool

	// Progress through training (checkpointed).
	step      int64 // Adam steps done; also the history iteration of the next batch
	epoch     int   // current epoch
	batchDone int   // batches of epoch already done (non-zero only after an interrupted epoch)
	// partial is the epoch's loss and accuracy sums over its first
	// batchDone batches, so that an epoch resumed mid-way reports the
	// whole epoch's loss and train accuracy (checkpointMeta.Partial).
	partial    epochPartial
	epochStats []EpochStats
	start      time.Time
	lastSave   time.Time // the run's start or its last checkpoint (CheckpointInterval)
	elapsed    float64   // seconds of training before a resume
}

// New builds a trainer over d: the model, the caches and the sampler. With
// Options.Resume it restores a checkpoint.
func New(ctx context.Context, d *storage.Dataset, opts *Options) (_ *Trainer, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := usable(d); err != nil {
		return nil, err
	}
	if err := CheckUntilValid(d, opts); err != nil {
		return nil, err
	}
	o := opts.withDataset(d, opts.Profile)
	if err := streamOnGraph(&o, opts, d); err != nil {
		return nil, err
	}
	if err := givenAtLeastTables(d, &o, modelConfig(d, &o).HistWidth()); err != nil {
		return nil, err
	}
	t := &Trainer{d: d, o: o, be: o.Backend}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.be == nil {
		be, err := cpu.New(nil)
		if err != nil {
			return nil, err
		}
		t.be, t.ownBE = be, true
	}
	cfg := t.modelConfig()
	bo := o.buildOptions(cfg.HistWidth())
	t.mem = estimateMemory(d, &o, bo.Estimate(d))
	if err := checkMemory(t.mem, "planned sizes"); err != nil {
		return nil, err
	}
	if err := checkEvalMem(&o, t.mem); err != nil {
		return nil, err
	}
	if t.model, err = NewModel(t.be, cfg, mixSeed(o.Seed, 1)); err != nil {
		return nil, err
	}
	if cfg.Kind == ModelGCN {
		start := time.Now()
		if t.deg, err = loadDegrees(ctx, d); err != nil {
			return nil, err
		}
		o.Logger.Info("GCN normalises by the whole graph's degrees: loaded", "bytes", t.deg.bytes,
			"symmetrised", d.Manifest().Symmetrized, "seconds", time.Since(start).Seconds())
	}
	if t.caches, err = planner.BuildCaches(ctx, d, bo); err != nil {
		return nil, err
	}
	t.fc, t.hc, t.nc = t.caches.Feature, t.caches.History, t.caches.Neighbor
	if t.fb, err = newFeatBlock(d, &o); err != nil {
		return nil, err
	}
	// The estimate's working set and fixed state stand; the caches are
	// replaced by what their constructors counted as they allocated.
	t.mem.FeatureBytes, t.mem.NeighborBytes, t.mem.HistoryBytes = t.caches.Counted.Feature, t.caches.Counted.Neighbor, t.caches.Counted.History
	t.mem.sum()
	if err := checkMemory(t.mem, "built caches"); err != nil {
		return nil, err
	}
	if err := t.setupZeroCopy(); err != nil {
		return nil, err
	}
	if l0, ok := t.model.layers[0].(preAggregated); ok && streamOn(&o) && t.zc == nil {
		t.stream = newStreamer(l0.aggOp(), l0.ownRows(), d.FeatDim(), streamChunk(o.MaxBatchRows))
		o.Logger.Info("input layer streamed: gather folds each chunk of rows, sorted by id, into the layer's aggregate on the host",
			"chunk_rows", t.stream.chunk, "chunk_bytes", streamChunkBytes(d.FeatDim(), t.stream.chunk))
	}
	// The profile's arrays were read by the caches' constructors above;
	// the trainer keeps no reference to them (the feature cache keeps
	// Feat as its counts; FixedState counts what a caller keeps).
	t.o.Profile = nil
	so := &sample.Options{Fanouts: o.Fanouts, BatchSize: o.BatchSize, Mode: o.Selection, PartsPerBatch: o.PartsPerBatch,
		Seed: o.Seed, Workers: o.Workers, Source: o.Source, NeighborCache: t.nc, Prefetch: o.InFlight}
	if t.hc != nil {
		so.ReuseFor = t.reuseFor
	}
	if t.sampler, err = sample.New(d, o.Partitions, so); err != nil {
		return nil, err
	}
	if o.Spill {
		if err := t.sampler.CheckSpillDir(&sample.SpillOptions{Dir: o.SpillDir}); err != nil {
			return nil, fmt.Errorf("train: --spill-dir: %w", err)
		}
	}
	t.depth = ReuseDepth(&o)
	t.bound = trainBound(&o, o.MaxBatchRows)
	t.evalBound = evalBound(d, &o, o.MaxBatchRows)
	if t.hc != nil && o.Staleness <= int64(t.depth) {
		// Decisions within an epoch see pushes at least D batches old;
		// only an epoch's first batches, decided against the cache the
		// previous epoch left (pushes from one batch before on), can
		// reuse: batch k of the epoch while k+1 < staleness.
		o.Logger.Warn("history reuse needs staleness > reuse depth: only the first staleness-1 batches of each epoch after the first can reuse embeddings (decided against the cache the previous epoch left); 1 reuses none",
			"staleness", o.Staleness, "depth", t.depth, "spill", o.Spill)
	}
	if per := histcache.EpochBatches(int64(len(d.TrainIdx())), o.BatchSize); t.hc != nil && o.Staleness > per+int64(t.depth) {
		// OUTRE's staleness 100 is about a twelfth of an ogbn-papers100M
		// epoch (~1,200 batches). Over few-batch epochs the same bound
		// lets layer-2 inputs come from a model epochs old,
		// which costs accuracy per epoch while the model still moves
		// (docs/ooc.md, "History on and off"). The default
		// (histcache.EpochStaleness) is per + depth: a window of one
		// epoch of ages past the reuse depth.
		o.Logger.Warn("history embeddings may be reused from earlier epochs: staleness spans more than an epoch of batches (lower --staleness, or --no-hist, if accuracy per epoch matters)",
			"staleness", o.Staleness, "batches_per_epoch", per, "reuse_depth", t.depth, "epochs", float64(o.Staleness-int64(t.depth))/float64(per))
	}
	if o.Resume != "" {
		if err := t.loadCheckpoint(o.Resume); err != nil {
			return nil, err
		}
	}
	t.keepPrev = t.othersCheckpoint()
	return t, nil
}

// featureOptions is the feature cache's options under o.
func (o *Options) featureOptions() *featurecache.Options {
	return &featurecache.Options{Policy: o.FeatPolicy, Mode: o.FeatRead, IODepth: o.FeatIODepth,
		CoalesceGap: o.FeatCoalesceGap, MaxReadAmplification: o.FeatMaxReadAmp, IO: o.FeatIO, Logger: o.Logger}
}

// buildOptions is what planner.BuildCaches needs of o (with defaults) to
// build the caches: the plan and profile, the explicit sizes and each
// cache's options. histWidth is the model's history width; history is off
// with NoHist or fewer than 2 layers (and with a negative HistCacheBytes,
// which BuildCaches reads as no cache).
func (o *Options) buildOptions(histWidth int) *planner.BuildOptions {
	bo := &planner.BuildOptions{Plan: o.Plan, Profile: o.Profile,
		FeatureBytes: o.FeatCacheBytes, HistoryBytes: o.HistCacheBytes, NeighborBytes: o.NeighborCacheBytes,
		Feature: o.featureOptions(),
		History: &histcache.Options{Staleness: o.Staleness, Policy: o.HistPolicy, PGrad: o.PGrad, Logger: o.Logger},
		Cross:   o.NeighborCross}
	if !o.NoHist && o.Layers >= 2 {
		bo.HistWidth = histWidth
	}
	return bo
}

func (t *Trainer) modelConfig() ModelConfig {
	m := t.d.Manifest()
	return ModelConfig{Kind: t.o.Model, InDim: t.d.FeatDim(), Hidden: t.o.Hidden, Classes: int(m.NumClasses),
		Layers: t.o.Layers, Heads: t.o.Heads, Dropout: float32(t.o.Dropout)}
}

// Model returns the trainer's model.
func (t *Trainer) Model() *Model { return t.model }

// Close releases everything the trainer built.
func (t *Trainer) Close() error {
	var errs []error
	if t.sampler != nil {
		errs = append(errs, t.sampler.Close())
	}
	errs = append(errs, t.closeZeroCopy())
	if t.stream != nil {
		t.stream.close()
		t.stream = nil
	}
	errs = append(errs, t.caches.Close())
	if t.fb != nil {
		errs = append(errs, t.fb.close())
	}
	for _, a := range t.gradAcc {
		t.be.Free(a)
	}
	if t.model != nil {
		t.model.Close()
	}
	t.deg.release()
	if t.ownBE && t.be != nil {
		errs = append(errs, t.be.Close())
	}
	*t = Trainer{}
	return errors.Join(errs...)
}

// StageTimes are the busy seconds of the pipeline stages in one epoch.
// Sample is the sampling workers' time building the epoch's batches
// (sample.Batch.SampleSeconds, summed over workers running in parallel,
// and without their waits for the history reuse decision, which depend on
// compute) plus the conversion of each batch for the backend; the other
// stages are their goroutines' working time.
type StageTimes struct {
	Sample   float64 `json:"sample_s"`
	Gather   float64 `json:"gather_s"`
	Transfer float64 `json:"transfer_s"`
	Compute  float64 `json:"compute_s"`
}

// Sum is the total busy time.
func (s StageTimes) Sum() float64 { return s.Sample + s.Gather + s.Transfer + s.Compute }

// EpochStats describes one epoch.
type EpochStats struct {
	Epoch   int `json:"epoch"`
	Batches int `json:"batches"`
	// ResumedAt is the batch a mid-epoch --resume started the epoch at
	// (0: the whole epoch ran in this process): its figures are a part
	// of an epoch's.
	ResumedAt int `json:"resumed_at_batch,omitempty"`
	// MicroBatches is the micro-batches computed for batches that were
	// split (0 when none was).
	MicroBatches int     `json:"micro_batches,omitempty"`
	Loss         float64 `json:"loss"`
	TrainAcc     float64 `json:"train_acc"`
	Evaluated    bool    `json:"evaluated"`
	// EvalPending marks an epoch whose evaluation was interrupted: it is
	// trained (the checkpoint counts it) and its row not yet reported
	// (OnEpoch); the resuming run evaluates it first, then reports it.
	EvalPending bool    `json:"eval_pending,omitempty"`
	ValidAcc    float64 `json:"valid_acc"`
	TestAcc     float64 `json:"test_acc"`
	// WallSec is the training wall time of the epoch (evaluation excluded);
	// Overlap = Stages.Sum() / WallSec.
	WallSec    float64    `json:"wall_s"`
	EvalSec    float64    `json:"eval_s"`
	ElapsedSec float64    `json:"elapsed_s"` // since training started, evaluation included
	Stages     StageTimes `json:"stages"`
	Overlap    float64    `json:"overlap"`
	// Storage is the per-stage accounting delta of the training part of the
	// epoch; IOReadBytes the /proc/self/io read_bytes delta (-1 when
	// unavailable).
	Storage     []storage.StageStats `json:"storage"`
	IOReadBytes int64                `json:"io_read_bytes"`
	// GatherReadsPerSec and GatherMBPerSec are the gather stage's read
	// calls and bytes read (storage accounting) per busy second of Gather
	// (Stages.Gather): what the feature reads achieved while the stage
	// ran. 0 without gather time.
	GatherReadsPerSec float64 `json:"gather_reads_per_s"`
	GatherMBPerSec    float64 `json:"gather_mb_per_s"`
	// Hit rates in [0,1] (NaN-free: 0 when nothing was asked); the
	// neighbour caches' are hits per lookup (sample.LookupStats.Share).
	NeighborHit float64 `json:"neighbor_hit_rate"`
	DynamicHit  float64 `json:"dynamic_hit_rate"`
	FeatureHit  float64 `json:"feature_hit_rate"`
	HistHit     float64 `json:"hist_hit_rate"`
	// InputRowsZeroCopy counts the input rows the backend gathered
	// straight from the registered feature cache (zero-copy path);
	// InputRowsUploaded those gathered on the host and uploaded (with the
	// streamed input layer: folded into what is uploaded). They sum
	// to InputNodes.
	InputRowsZeroCopy int64 `json:"input_rows_zero_copy"`
	InputRowsUploaded int64 `json:"input_rows_uploaded"`
	// Reused counts second-layer nodes whose embedding was pulled.
	Reused int64 `json:"hist_reused"`
	// InputNodes sums the batches' input-layer node counts.
	InputNodes int64 `json:"input_nodes"`
	// FeatureBlock* describe the dynamic feature block of a
	// partition-major dataset: input rows it served, macro batches loaded
	// into it and the bytes they took (read sequentially, on the load
	// stage).
	FeatureBlockRows      int64 `json:"feature_block_rows,omitempty"`
	FeatureBlockLoads     int64 `json:"feature_block_loads,omitempty"`
	FeatureBlockLoadBytes int64 `json:"feature_block_load_bytes,omitempty"`
	// Lookups are the sampler's neighbour-list lookups of the epoch (lists
	// of reused nodes are not looked up).
	Lookups sample.LookupStats `json:"lookups"`
	// Measured are the storage savings of the epoch in the planner's terms
	// (see docs/train.md): feature-cache hits and the bytes they served;
	// HistGatherRows, the hop-2 neighbours not drawn below reused nodes
	// (Σ min(fanout, degree) over reused embeddings); GatherRows, the
	// rows asked of the feature cache; NeighborBytesSaved, the list bytes
	// the neighbour cache served plus those hop-2 ids.
	Measured planner.Measured `json:"measured"`
}

// Report is the result of Run.
type Report struct {
	Model      ModelConfig  `json:"model"`
	Params     int          `json:"params"`
	Options    Options      `json:"options"`
	Epochs     []EpochStats `json:"epochs"`
	FinalValid float64      `json:"final_valid_acc"`
	FinalTest  float64      `json:"final_test_acc"`
	BestValid  float64      `json:"best_valid_acc"`
	TestAtBest float64      `json:"test_at_best_valid"`
	// BestEpoch is the epoch of BestValid (the first of equals); -1
	// when no epoch was evaluated.
	BestEpoch   int  `json:"best_valid_epoch"`
	Interrupted bool `json:"interrupted"`
	// Memory is the caches' memory (tables included) against MemBytes.
	Memory MemoryUse `json:"memory"`
	// Counted is the process's allocations as counted where they were
	// made (internal/memacct), at their peak during Run.
	Counted CountedMemory `json:"counted"`
	// Plan is the memory plan the caches were sized from (nil: none), and
	// PlanComparison its predicted savings per epoch next to the measured
	// ones (the mean of the epochs trained in this run).
	Plan           *planner.PlanResult `json:"plan,omitempty"`
	PlanComparison *planner.Comparison `json:"plan_comparison,omitempty"`
	Checkpoint     string              `json:"checkpoint,omitempty"`
	// CheckpointEpochs is the epochs the last checkpoint written holds
	// (its model is theirs: the last epoch's, not the best valid
	// epoch's), and CheckpointBatches the batches of the next epoch it
	// holds too (an interrupted run's). Absent when none was written.
	CheckpointEpochs  int `json:"checkpoint_epochs,omitempty"`
	CheckpointBatches int `json:"checkpoint_batches,omitempty"`
	// ZeroCopy says whether feature-cache hits reached the backend
	// zero-copy (Options.ZeroCopy) and, if not, why.
	ZeroCopy ZeroCopyReport `json:"zero_copy"`
	// StreamInput says whether the input layer was streamed
	// (Options.StreamInput).
	StreamInput bool    `json:"stream_input"`
	ElapsedSec  float64 `json:"elapsed_s"`
	// UntilReport: Options.UntilValid's outcome (until.go).
	UntilReport
}

// Run trains until Options.Epochs epochs are done. When ctx is cancelled it
// stops after cleaning the pipeline up, writes a checkpoint (when
// CheckpointDir is set) and returns the report so far with Interrupted set
// and a nil error.
func (t *Trainer) Run(ctx context.Context) (*Report, error) {
	if err := Trainable(t.d); err != nil {
		return nil, err
	}
	t.start = time.Now()
	t.lastSave = t.start
	t.firstEpochStat = len(t.epochStats)
	o := &t.o
	rep := &Report{Model: t.model.cfg, Params: t.model.NumParams(), Options: *o}
	memacct.ResetPeak()
	if n := len(t.epochStats); n > 0 && t.epochStats[n-1].EvalPending {
		// Interrupted during this epoch's evaluation: the epoch is
		// trained, so evaluate it and report it before going on (it
		// was lost, and after the last epoch never evaluated).
		es := &t.epochStats[n-1]
		t0 := time.Now()
		va, te, err := t.evalValidTest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return t.interrupted(rep)
			}
			return nil, err
		}
		es.ValidAcc, es.TestAcc, es.Evaluated, es.EvalPending = va, te, true, false
		es.EvalSec = time.Since(t0).Seconds()
		if o.OnEpoch != nil {
			o.OnEpoch(*es)
		}
		if o.CheckpointDir != "" {
			// The checkpoint keeps the evaluated row, even when no
			// epoch is left to train.
			if err := t.saveCheckpoint(rep); err != nil {
				return nil, err
			}
		}
		if stop, err := t.untilReached(rep, *es); err != nil {
			return nil, err
		} else if stop {
			t.finish(rep)
			return rep, nil
		}
	}
	if t.reachedBefore(rep) {
		t.finish(rep)
		return rep, nil
	}
	for t.epoch < o.Epochs {
		es, err := t.trainEpoch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return t.interrupted(rep)
			}
			return nil, err
		}
		if (t.epoch+1)%o.EvalEvery == 0 || t.epoch+1 == o.Epochs {
			t0 := time.Now()
			es.ValidAcc, es.TestAcc, err = t.evalValidTest(ctx)
			if err != nil {
				if ctx.Err() != nil {
					// The epoch is trained: keep it, for the
					// resuming run to evaluate and report.
					es.EvalPending = true
					es.ElapsedSec = t.elapsed + time.Since(t.start).Seconds()
					t.epochStats = append(t.epochStats, es)
					t.epoch++
					t.batchDone = 0
					return t.interrupted(rep)
				}
				return nil, err
			}
			es.Evaluated = true
			es.EvalSec = time.Since(t0).Seconds()
		}
		es.ElapsedSec = t.elapsed + time.Since(t.start).Seconds()
		t.epochStats = append(t.epochStats, es)
		if o.OnEpoch != nil {
			o.OnEpoch(es)
		}
		t.epoch++
		t.batchDone = 0
		due := o.CheckpointInterval > 0 && time.Since(t.lastSave) >= o.CheckpointInterval
		if o.CheckpointDir != "" && ((o.CheckpointEvery > 0 && t.epoch%o.CheckpointEvery == 0) || t.epoch == o.Epochs || due) {
			if err := t.saveCheckpoint(rep); err != nil {
				return nil, err
			}
			t.lastSave = time.Now()
		}
		if stop, err := t.untilReached(rep, es); err != nil {
			return nil, err
		} else if stop {
			break
		}
	}
	t.finish(rep)
	return rep, nil
}

func (t *Trainer) finish(rep *Report) {
	// An empty list, not null, before any epoch (interrupted in the
	// first, or resumed with nothing to do): "epochs": null broke readers
	// that iterate it (jq '.epochs[]').
	rep.Epochs = t.epochStats
	if rep.Epochs == nil {
		rep.Epochs = []EpochStats{}
	}
	rep.Memory = t.mem
	c := memacct.Read()
	rep.Counted = CountedMemory{PeakBytes: c.Peak, ByPurpose: c.Map(true), MaxByPurpose: c.MaxMap(), RuntimeBytes: c.Runtime}
	rep.ZeroCopy = t.zcRep
	rep.StreamInput = t.stream != nil
	if t.o.Plan != nil {
		rep.Plan = t.o.Plan
		// The plan models a warm history cache; epoch 0 starts with an
		// empty one, so it is compared only when it is all there is.
		es := t.epochStats[t.firstEpochStat:]
		note := ""
		if t.o.Plan.History.Entries > 0 && t.hc == nil {
			// --no-hist with a plan that has a history cache: compared
			// without a word, its history rows read as misses.
			note = "history off: the plan's history cache was not built, so its history savings (and the reads they remove) are not measured"
		}
		if t.o.Plan.History.Entries > 0 && t.hc != nil && len(es) > 0 && es[0].Epoch == 0 {
			if len(es) > 1 {
				es, note = es[1:], "epoch 0 left out: the history cache starts empty there, and the plan models it warm"
			} else {
				note = "epoch 0 only: the history cache starts empty, and the plan models it warm, so the history's savings (and the read calls and bytes they remove) are over-predicted"
			}
		}
		// A mid-epoch resume's first epoch ran only its last batches:
		// averaged as a whole epoch it pulled every per-epoch figure down.
		if len(es) > 0 && es[0].ResumedAt > 0 {
			part := fmt.Sprintf("epoch %d left out: resumed at batch %d, it ran only part of the epoch", es[0].Epoch, es[0].ResumedAt)
			if len(es) > 1 {
				es = es[1:]
			} else {
				part = fmt.Sprintf("epoch %d only, resumed at batch %d: the measured figures are a part of an epoch's", es[0].Epoch, es[0].ResumedAt)
			}
			note = strings.TrimPrefix(note+"; "+part, "; ")
		}
		var ms []planner.Measured
		cut := false
		for _, e := range es {
			ms = append(ms, e.Measured)
			cut = cut || e.MicroBatches > 0
		}
		if cut && !t.o.Plan.Recounted {
			// The plan was not recounted for the cut (its profile was
			// not there, or was of other batches): micro-batches read
			// the rows they share again, so their rows and reads are not
			// the whole batches' it predicted, and the rows not gathered
			// measured against them came out negative.
			note = strings.TrimPrefix(note+"; the plan's rows asked, rows not gathered, bytes saved and reads are of whole batches, and training cut them into micro-batches: those rows are not comparable", "; ")
		}
		if n := cutNote(t.o.Plan, es); n != "" {
			note = strings.TrimPrefix(note+"; "+n, "; ")
		}
		c := planner.Compare(t.o.Plan, ms...)
		c.Note = note
		rep.PlanComparison = &c
	}
	rep.ElapsedSec = t.elapsed + time.Since(t.start).Seconds()
	rep.BestValid, rep.TestAtBest, rep.BestEpoch = 0, 0, -1
	best := false
	for _, e := range t.epochStats {
		if !e.Evaluated {
			continue
		}
		rep.FinalValid, rep.FinalTest = e.ValidAcc, e.TestAcc
		// The first evaluated epoch is the best so far whatever its
		// valid accuracy: starting from 0 reported "test 0.00%" at the
		// best when every valid accuracy was 0 (an empty valid split).
		if !best || e.ValidAcc > rep.BestValid {
			rep.BestValid, rep.TestAtBest, rep.BestEpoch, best = e.ValidAcc, e.TestAcc, e.Epoch, true
		}
	}
}

// saveCheckpoint writes the checkpoint to Options.CheckpointDir and
// records in rep where and what it holds.
func (t *Trainer) saveCheckpoint(rep *Report) error {
	path, err := t.SaveCheckpoint(t.o.CheckpointDir)
	if err != nil {
		return err
	}
	rep.Checkpoint, rep.CheckpointEpochs, rep.CheckpointBatches = path, t.epoch, t.batchDone
	return nil
}

func (t *Trainer) interrupted(rep *Report) (*Report, error) {
	rep.Interrupted = true
	t.finish(rep)
	if t.o.CheckpointDir != "" {
		if err := t.saveCheckpoint(rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// CountedMemory is the memacct counters at their peak: the caches, batch
// buffers, backend tensors, sampler scratch and kept profile, each counted
// by the package that allocated it (ByPurpose: each when the sum peaked;
// MaxByPurpose: each one's own largest count, reached at different
// moments). RuntimeBytes is the Go runtime's own memory (stacks, span and
// GC metadata; memacct.RuntimeBytes) when the report was made, outside
// PeakBytes: the budget's reserve stands for it.
type CountedMemory struct {
	PeakBytes    int64            `json:"peak_bytes"`
	ByPurpose    map[string]int64 `json:"by_purpose"`
	MaxByPurpose map[string]int64 `json:"max_by_purpose"`
	RuntimeBytes int64            `json:"runtime_bytes"`
}

// cutNote says when training cut its batches into other micro-batches than
// the plan's recount did (by more than a tenth): a history cache shrinks
// the batches, so fewer are cut, and the rows the micro-batches of one
// batch share are gathered fewer times. The rows asked, the rows not
// gathered and the reads then move with the cut as well as with the caches
// (docs/planner.md; on a 50,000-node graph at --mem 80MiB the recount cut
// 40 micro-batches an epoch, training 28, 28 and 20, and "rows not
// gathered" measured 3.56 times the prediction). "" when the cuts agree or are unknown (no
// whole epoch: a mid-epoch resume's first epoch is left out).
func cutNote(plan *planner.PlanResult, es []EpochStats) string {
	if plan == nil || plan.Reads == nil || !plan.Recounted || len(es) == 0 {
		return ""
	}
	want := plan.Reads.CutMicroBatches
	var got, whole float64
	for _, e := range es {
		if e.ResumedAt > 0 {
			continue // a mid-epoch resume's epoch cut only its last batches
		}
		got += float64(e.MicroBatches)
		whole++
	}
	if whole == 0 {
		return ""
	}
	got /= whole
	if math.Abs(got-want) <= want/10 {
		return ""
	}
	why, times := "", "more"
	if got < want {
		why, times = " (the history shrinks batches, so fewer are cut)", "fewer"
	}
	return fmt.Sprintf("training cut its batches into %.0f micro-batches an epoch where the plan's recount cut the profile's into %.0f%s: "+
		"the rows the micro-batches of one batch share are gathered %s times, "+
		"so the rows asked, the rows not gathered and the reads differ from the plan's by the cut as well as by the caches",
		got, want, why, times)
}
