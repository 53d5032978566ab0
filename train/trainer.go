package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/iostat"
	"github.com/ssdgnn/ssdgnn/internal/progress"
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
	d     *storage.Dataset
	o     Options
	be    kernels.Backend
	ownBE bool
	beMu  sync.Mutex // serialises backend use between transfer and compute

	model   *Model
	sampler *sample.Sampler
	fc      *featurecache.Cache
	nc      *neighborcache.Cache
	hc      *histcache.Cache

	// reuse is the running epoch's reuse broker (nil between epochs); the
	// sampler's ReuseFor hook reaches it through reuseMu.
	reuseMu sync.Mutex
	reuse   *epochReuse

	histOn bool
	// zc is the registered feature-cache array of the zero-copy input
	// path (nil when off); zcRep says why it is off.
	zc    *zeroCopyFeats
	zcRep ZeroCopyReport
	// depth is ReuseDepth(&o): batch i's reuse set is decided after
	// compute of batch i−depth.
	depth int
	mem   MemoryUse
	// lastRing describes the feature-buffer ring of the last epoch.
	lastRing ringStats
	// firstEpochStat is the first entry of epochStats trained by this
	// process (earlier ones come from a checkpoint).
	firstEpochStat int

	// Progress through training (checkpointed).
	step       int64 // Adam steps done; also the history iteration of the next batch
	epoch      int   // current epoch
	batchDone  int   // batches of epoch already done (non-zero only after an interrupted epoch)
	epochStats []EpochStats
	start      time.Time
	elapsed    float64 // seconds of training before a resume
}

// New builds a trainer over d: the model, the caches and the sampler. With
// Options.Resume it restores a checkpoint.
func New(ctx context.Context, d *storage.Dataset, opts *Options) (_ *Trainer, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	m := d.Manifest()
	if m.NumClasses < 1 {
		return nil, fmt.Errorf("%w: dataset %s has no classes", ErrInvalidOptions, m.Name)
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
	sz := o.sizes(d.NumNodes())
	t.histOn = sz.histOn
	t.mem = estimateMemory(d, &o, sz, cfg.HistWidth())
	if err := checkMemory(t.mem, "planned sizes"); err != nil {
		return nil, err
	}
	if t.model, err = NewModel(t.be, cfg, mixSeed(o.Seed, 1)); err != nil {
		return nil, err
	}
	if sz.nbr > 0 {
		no := &neighborcache.Options{Budget: sz.nbr}
		if o.NeighborCross != nil {
			no.Policy, no.Cross = neighborcache.PolicyCross, o.NeighborCross
		}
		if t.nc, err = neighborcache.Build(d, no); err != nil {
			return nil, err
		}
	}
	fo := &featurecache.Options{Policy: o.FeatPolicy, Mode: o.FeatRead, IODepth: o.FeatIODepth, Logger: o.Logger}
	if o.Profile != nil && (o.FeatPolicy == featurecache.PolicyAuto || o.FeatPolicy == featurecache.PolicyProfiled) {
		fo.Counts = o.Profile.Feat
	}
	if t.fc, err = featurecache.New(ctx, d, sz.feat, fo); err != nil {
		return nil, err
	}
	if t.histEnabled() {
		if t.hc, err = newHistCache(d, cfg.HistWidth(), sz.hist, &o); err != nil {
			return nil, err
		}
	}
	// The estimate's working set and fixed state stand; the caches are
	// replaced by what was built.
	t.mem.FeatureBytes, t.mem.NeighborBytes, t.mem.HistoryBytes = t.fc.Stats().MemoryBytes, t.nc.Bytes(), 0
	if t.hc != nil {
		t.mem.HistoryBytes = t.hc.Stats().MemBytes
	}
	t.mem.sum()
	if err := checkMemory(t.mem, "built caches"); err != nil {
		return nil, err
	}
	if err := t.setupZeroCopy(); err != nil {
		return nil, err
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
	t.depth = ReuseDepth(&o)
	if t.hc != nil && o.Staleness <= int64(t.depth) {
		o.Logger.Warn("history reuse needs staleness > reuse depth: no embedding will be reused",
			"staleness", o.Staleness, "depth", t.depth, "spill", o.Spill)
	}
	if o.Resume != "" {
		if err := t.loadCheckpoint(o.Resume); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Trainer) modelConfig() ModelConfig {
	m := t.d.Manifest()
	return ModelConfig{Kind: t.o.Model, InDim: t.d.FeatDim(), Hidden: t.o.Hidden, Classes: int(m.NumClasses),
		Layers: t.o.Layers, Heads: t.o.Heads, Dropout: float32(t.o.Dropout)}
}

func (t *Trainer) histEnabled() bool { return t.histOn }

func defaultHistBudget(n int64, width int) int64 {
	return histcache.BytesFor(n, int64(float64(n)*sample.DefaultHistFrac), width)
}

// newHistCache builds the history cache. Candidate scores are the
// profile's β·saved_IO_hist_sample + saved_IO_hist_gather when Options has
// a Profile, else the degree; a negative budget means room for
// sample.DefaultHistFrac of the nodes.
func newHistCache(d *storage.Dataset, width int, budget int64, o *Options) (*histcache.Cache, error) {
	n := d.NumNodes()
	scores := make([]float32, n)
	if p := o.Profile; p != nil {
		beta := p.Meta.Beta
		if o.Plan != nil && o.Plan.Beta > 0 {
			beta = o.Plan.Beta
		}
		for v := range scores {
			scores[v] = float32(beta*float64(p.HistSample[v]) + float64(p.HistGather[v]))
		}
	} else {
		ip := d.Indptr()
		for v := int64(0); v < n; v++ {
			scores[v] = float32(ip[v+1] - ip[v])
		}
	}
	budget = histBudget(n, budget, width)
	return histcache.New(histcache.Config{Scores: scores, Hidden: width, BudgetBytes: budget},
		&histcache.Options{Staleness: o.Staleness, Policy: o.HistPolicy, PGrad: o.PGrad, Logger: o.Logger})
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
	if t.fc != nil {
		errs = append(errs, t.fc.Close())
	}
	if t.model != nil {
		t.model.Close()
	}
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
	Epoch     int     `json:"epoch"`
	Batches   int     `json:"batches"`
	Loss      float64 `json:"loss"`
	TrainAcc  float64 `json:"train_acc"`
	Evaluated bool    `json:"evaluated"`
	ValidAcc  float64 `json:"valid_acc"`
	TestAcc   float64 `json:"test_acc"`
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
	// Hit rates in [0,1] (NaN-free: 0 when nothing was asked).
	NeighborHit float64 `json:"neighbor_hit_rate"`
	DynamicHit  float64 `json:"dynamic_hit_rate"`
	FeatureHit  float64 `json:"feature_hit_rate"`
	HistHit     float64 `json:"hist_hit_rate"`
	// InputRowsZeroCopy counts the input rows the backend gathered
	// straight from the registered feature cache (zero-copy path);
	// InputRowsUploaded those gathered on the host and uploaded. They sum
	// to InputNodes.
	InputRowsZeroCopy int64 `json:"input_rows_zero_copy"`
	InputRowsUploaded int64 `json:"input_rows_uploaded"`
	// Reused counts second-layer nodes whose embedding was pulled.
	Reused int64 `json:"hist_reused"`
	// InputNodes sums the batches' input-layer node counts.
	InputNodes int64 `json:"input_nodes"`
	// Lookups are the sampler's neighbour-list lookups of the epoch (lists
	// of reused nodes are not looked up).
	Lookups sample.LookupStats `json:"lookups"`
	// Measured are the storage savings of the epoch in the planner's terms
	// (see docs/train.md): feature-cache hits and the bytes they served;
	// HistGatherRows, the hop-2 neighbours not drawn below reused nodes
	// (Σ min(fanout, degree) over reused embeddings); NeighborBytesSaved,
	// the list bytes the neighbour cache served plus those hop-2 ids.
	Measured planner.Measured `json:"measured"`
}

// Report is the result of Run.
type Report struct {
	Model       ModelConfig  `json:"model"`
	Params      int          `json:"params"`
	Options     Options      `json:"options"`
	Epochs      []EpochStats `json:"epochs"`
	FinalValid  float64      `json:"final_valid_acc"`
	FinalTest   float64      `json:"final_test_acc"`
	BestValid   float64      `json:"best_valid_acc"`
	TestAtBest  float64      `json:"test_at_best_valid"`
	Interrupted bool         `json:"interrupted"`
	// Memory is the caches' memory (tables included) against MemBytes.
	Memory MemoryUse `json:"memory"`
	// Plan is the memory plan the caches were sized from (nil: none), and
	// PlanComparison its predicted savings per epoch next to the measured
	// ones (the mean of the epochs trained in this run).
	Plan           *planner.PlanResult `json:"plan,omitempty"`
	PlanComparison *planner.Comparison `json:"plan_comparison,omitempty"`
	Checkpoint     string              `json:"checkpoint,omitempty"`
	// ZeroCopy says whether feature-cache hits reached the backend
	// zero-copy (Options.ZeroCopy) and, if not, why.
	ZeroCopy   ZeroCopyReport `json:"zero_copy"`
	ElapsedSec float64        `json:"elapsed_s"`
}

// Run trains until Options.Epochs epochs are done. When ctx is cancelled it
// stops after cleaning the pipeline up, writes a checkpoint (when
// CheckpointDir is set) and returns the report so far with Interrupted set
// and a nil error.
func (t *Trainer) Run(ctx context.Context) (*Report, error) {
	t.start = time.Now()
	t.firstEpochStat = len(t.epochStats)
	o := &t.o
	rep := &Report{Model: t.model.cfg, Params: t.model.NumParams(), Options: *o}
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
			if es.ValidAcc, err = t.Evaluate(ctx, t.d.ValidIdx(), o.EvalFanouts); err == nil {
				es.TestAcc, err = t.Evaluate(ctx, t.d.TestIdx(), o.EvalFanouts)
			}
			if err != nil {
				if ctx.Err() != nil {
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
		if o.CheckpointDir != "" && ((o.CheckpointEvery > 0 && t.epoch%o.CheckpointEvery == 0) || t.epoch == o.Epochs) {
			if _, err := t.SaveCheckpoint(o.CheckpointDir); err != nil {
				return nil, err
			}
			rep.Checkpoint = filepath.Join(o.CheckpointDir, CheckpointFile)
		}
	}
	t.finish(rep)
	return rep, nil
}

func (t *Trainer) finish(rep *Report) {
	rep.Epochs = t.epochStats
	rep.Memory = t.mem
	rep.ZeroCopy = t.zcRep
	if t.o.Plan != nil {
		rep.Plan = t.o.Plan
		var ms []planner.Measured
		for _, e := range t.epochStats[t.firstEpochStat:] {
			ms = append(ms, e.Measured)
		}
		c := planner.Compare(t.o.Plan, ms...)
		rep.PlanComparison = &c
	}
	rep.ElapsedSec = t.elapsed + time.Since(t.start).Seconds()
	for _, e := range t.epochStats {
		if !e.Evaluated {
			continue
		}
		rep.FinalValid, rep.FinalTest = e.ValidAcc, e.TestAcc
		if e.ValidAcc > rep.BestValid {
			rep.BestValid, rep.TestAtBest = e.ValidAcc, e.TestAcc
		}
	}
}

func (t *Trainer) interrupted(rep *Report) (*Report, error) {
	rep.Interrupted = true
	t.finish(rep)
	if t.o.CheckpointDir != "" {
		if _, err := t.SaveCheckpoint(t.o.CheckpointDir); err != nil {
			return nil, err
		}
		rep.Checkpoint = filepath.Join(t.o.CheckpointDir, CheckpointFile)
	}
	return rep, nil
}

// job is one batch travelling through the pipeline.
type job struct {
	idx    int
	iter   int64
	hb     *hostBatch
	hist   *hist
	feats  []float32
	labels []int32
	// buf is feats' ring buffer, returned to ring when the batch's input
	// no longer needs it (after upload, or when x is freed if x adopted it).
	buf  []float32
	ring *bufRing
	// dropped: the input layer's dropout was applied to feats on the host,
	// or, on the zero-copy path, by upload on the backend (with dropP and
	// dropSeed, the mask hostDropout would draw).
	dropped  bool
	dropP    float32
	dropSeed uint64
	// zc splits the input rows on the zero-copy path (nil: every row is
	// in feats); feats then holds only the misses.
	zc *zcSplit
	// on the backend
	blocks []*devBlock
	x      kernels.Tensor
	lab    kernels.IntTensor
}

func (t *Trainer) freeJob(j *job) {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	for _, b := range j.blocks {
		if b != nil {
			t.be.FreeBlock(b.blk)
			t.be.FreeInts(b.iota)
		}
	}
	t.be.Free(j.x)
	t.be.FreeInts(j.lab)
	j.blocks, j.x, j.lab = nil, nil, nil
	if j.ring != nil {
		j.ring.put(j.buf)
	}
	j.buf, j.feats = nil, nil
}

type histReq struct {
	iter  int64
	local []int32 // candidate positions in the batch's hop-1 list, ascending
	nodes []int64
	reply chan histResp
}

type histResp struct {
	reused []int32 // positions in the hop-1 list, ascending
	pulled []float32
	err    error
}

// epochReuse connects the sampler's ReuseFor calls of one epoch with the
// compute goroutine, which answers batch i's request right after computing
// batch i−D (D = Trainer.depth, see ReuseDepth; at the start of the epoch
// for the first D batches). Each batch has a slot of capacity 1, so a worker
// never blocks handing its request over, only waiting for the answer.
type epochReuse struct {
	epoch int
	skip  int   // batches before skip are not trained (resume): no reuse
	step0 int64 // history iteration of batch skip
	slots []chan histReq
	mu    sync.Mutex
	resp  map[int]histResp // decided, not yet taken by the consumer
}

type nodeSet map[int64]struct{}

func (s nodeSet) Contains(v int64) bool { _, ok := s[v]; return ok }

// reuseFor is the sampler's ReuseFor hook: it hands batch index's hop-1
// candidates to the compute goroutine and waits for its decision.
func (t *Trainer) reuseFor(ctx context.Context, epoch, index int, hop1 []int64) (sample.NodeSet, error) {
	t.reuseMu.Lock()
	er := t.reuse
	t.reuseMu.Unlock()
	if er == nil || er.epoch != epoch || index < er.skip || index >= len(er.slots) {
		return nil, nil
	}
	req := histReq{iter: er.step0 + int64(index-er.skip), reply: make(chan histResp, 1)}
	for k, v := range hop1 {
		if t.hc.IsCandidate(v) {
			req.local = append(req.local, int32(k))
			req.nodes = append(req.nodes, v)
		}
	}
	er.slots[index] <- req
	var resp histResp
	select {
	case resp = <-req.reply:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if resp.err != nil {
		return nil, resp.err
	}
	er.mu.Lock()
	er.resp[index] = resp
	er.mu.Unlock()
	if len(resp.reused) == 0 {
		return nil, nil
	}
	set := make(nodeSet, len(resp.reused))
	for _, k := range resp.reused {
		set[hop1[k]] = struct{}{}
	}
	return set, nil
}

// batchSource is the sample stage's input: a *sample.Iterator, or a
// *sample.SpillIterator with Options.Spill.
type batchSource interface {
	Next() (*sample.Batch, error)
	Stats() sample.LookupStats
	Close() error
}

// epochBatches starts sampling epoch t.epoch and returns the batches'
// source and count. The caller must Close the source (a spill source
// deletes its file then).
func (t *Trainer) epochBatches(ctx context.Context) (batchSource, int64, error) {
	if !t.o.Spill {
		it := t.sampler.Epoch(ctx, t.epoch)
		if it.Plan() == nil {
			// The plan failed: Next reports why.
			_, err := it.Next()
			it.Close()
			return nil, 0, err
		}
		return it, int64(len(it.Plan().Batches)), nil
	}
	pl, err := t.sampler.Plan(t.epoch)
	if err != nil {
		return nil, 0, err
	}
	si, err := t.sampler.SpillEpoch(ctx, t.epoch, &sample.SpillOptions{Dir: t.o.SpillDir,
		ChunkBatches: t.o.SpillChunk, AheadChunks: t.o.SpillAhead, Logger: t.o.Logger})
	if err != nil {
		return nil, 0, err
	}
	return si, int64(len(pl.Batches)), nil
}

// take returns (and forgets) batch index's decision.
func (er *epochReuse) take(index int) (histResp, bool) {
	er.mu.Lock()
	defer er.mu.Unlock()
	r, ok := er.resp[index]
	delete(er.resp, index)
	return r, ok
}

// stageClock accumulates busy nanoseconds.
type stageClock struct{ ns atomic.Int64 }

func (c *stageClock) since(t0 time.Time) { c.ns.Add(int64(time.Since(t0))) }
func (c *stageClock) sec() float64       { return float64(c.ns.Load()) / 1e9 }
func (c *stageClock) add(sec float64)    { c.ns.Add(int64(sec * 1e9)) }

// trainEpoch runs the four-stage pipeline over epoch t.epoch, skipping the
// first t.batchDone batches.
func (t *Trainer) trainEpoch(parent context.Context) (EpochStats, error) {
	o := &t.o
	es := EpochStats{Epoch: t.epoch}
	acc0 := t.d.Accounting().Snapshot()
	io0, ioErr := iostat.Self()
	fc0 := t.featStats()
	var histEdges int64  // hop-2 neighbours not drawn below reused nodes
	var histReused int64 // hop-1 nodes whose embedding was reused
	var hc0 histcache.Stats
	if t.hc != nil {
		hc0 = t.hc.Stats()
	}
	wall0 := time.Now()

	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	var sa, ga, tr, co stageClock
	skip, step0 := t.batchDone, t.step
	var er *epochReuse
	if t.hc != nil {
		pl, err := t.sampler.Plan(t.epoch)
		if err != nil {
			return es, err
		}
		er = &epochReuse{epoch: t.epoch, skip: skip, step0: step0, slots: make([]chan histReq, len(pl.Batches)), resp: map[int]histResp{}}
		for i := range er.slots {
			er.slots[i] = make(chan histReq, 1)
		}
		t.reuseMu.Lock()
		t.reuse = er
		t.reuseMu.Unlock()
		defer func() {
			t.reuseMu.Lock()
			t.reuse = nil
			t.reuseMu.Unlock()
		}()
	}
	it, total, err := t.epochBatches(ctx)
	if err != nil {
		return es, err
	}
	task := o.Progress.Start(fmt.Sprintf("epoch %d", t.epoch), total, progress.Items)
	task.Add(int64(t.batchDone))
	defer task.Done()

	epoch := t.epoch
	ring := newBufRing(o.InFlight)
	defer func() { t.lastRing = ring.stats() }()
	toGather := make(chan *job, 1)
	toTransfer := make(chan *job, 1)
	toCompute := make(chan *job, 1)
	gat := o.Model == ModelGAT
	L := o.Layers
	var wg sync.WaitGroup
	wg.Add(3)
	// Sample: deliver sampled batches (the sampler has applied the reuse
	// decision: reused nodes were not expanded) and convert them.
	go func() {
		defer wg.Done()
		defer close(toGather)
		defer it.Close()
		for i, iter := 0, step0; ; i++ {
			b, err := it.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			t0 := time.Now()
			sa.add(b.SampleSeconds)
			if i < skip {
				continue
			}
			j := &job{idx: i, iter: iter}
			iter++
			if er != nil {
				top := &b.Blocks[L-1]
				resp, ok := er.take(i)
				if !ok {
					fail(fmt.Errorf("train: internal error: batch %d sampled without a reuse decision", i))
					return
				}
				reused := make([]int32, len(resp.reused))
				for k, p := range resp.reused {
					reused[k] = p + int32(top.NumDst)
				}
				if !slices.Equal(reused, b.Reused) {
					fail(fmt.Errorf("train: internal error: batch %d: sampler reused %v, decided %v", i, b.Reused, reused))
					return
				}
				histReused += int64(len(reused))
				k2 := o.Fanouts[L-2]
				for _, r := range reused {
					deg := t.d.Degree(top.Src[r])
					if k2 >= 0 {
						deg = min(deg, int64(k2))
					}
					histEdges += deg
				}
				hs := &hist{reused: reused, pulled: resp.pulled, wantEmb: true, wantGrad: o.HistPolicy == histcache.PolicyGrad}
				r := 0
				for k := 0; k < len(top.Src); k++ {
					if r < len(reused) && int(reused[r]) == k {
						r++
						continue
					}
					hs.computed = append(hs.computed, int32(k))
				}
				j.hist = hs
			}
			j.hb = convert(b, nil, gat)
			sa.since(t0)
			select {
			case toGather <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Gather: feature rows and labels into host buffers.
	go func() {
		defer wg.Done()
		defer close(toTransfer)
		for j := range toGather {
			t0 := time.Now()
			n := t.split(j)
			ga.since(t0)
			// Waiting for a free buffer is back-pressure from compute,
			// not gather work: it is not timed.
			buf, err := ring.get(ctx, n*t.d.FeatDim())
			if err != nil {
				return
			}
			t0 = time.Now()
			j.feats, j.buf, j.ring = buf, buf, ring
			if err := t.gather(j); err != nil {
				ring.put(buf)
				fail(err)
				return
			}
			if drop := float32(o.Dropout); drop > 0 {
				seed := mixSeed(t.batchSeed(epoch, j.idx), 0)
				if j.zc == nil {
					hostDropout(j.feats, drop, seed)
				} else {
					// Hits never reach the host: upload drops on the
					// backend once the input is assembled.
					j.dropP, j.dropSeed = drop, seed
				}
				j.dropped = true
			}
			ga.since(t0)
			select {
			case toTransfer <- j:
			case <-ctx.Done():
				ring.put(buf)
				return
			}
		}
	}()
	// Transfer: upload to the backend.
	go func() {
		defer wg.Done()
		defer close(toCompute)
		for j := range toTransfer {
			t0 := time.Now()
			err := t.upload(j)
			tr.since(t0)
			if err != nil {
				t.freeJob(j)
				fail(err)
				return
			}
			select {
			case toCompute <- j:
			case <-ctx.Done():
				t.freeJob(j)
				return
			}
		}
	}()

	// Compute runs here and answers batch i's reuse request right after
	// computing batch i−D.
	D := t.depth
	serve := func(i int) {
		if er == nil || i >= len(er.slots) {
			return
		}
		var r histReq
		select {
		case r = <-er.slots[i]:
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		r.reply <- t.histLookup(r)
		co.since(t0)
	}
	for k := range D {
		serve(skip + k)
	}
	var lossSum float64
	var lossN, correct, seen int
	for j := range toCompute {
		if ctx.Err() != nil {
			t.freeJob(j)
			continue
		}
		t0 := time.Now()
		loss, n, c, tot, err := t.computeBatch(j)
		es.InputNodes += int64(len(j.hb.nodes))
		if j.zc != nil {
			es.InputRowsZeroCopy += int64(len(j.zc.hitPos))
			es.InputRowsUploaded += int64(len(j.zc.missPos))
		} else {
			es.InputRowsUploaded += int64(len(j.hb.nodes))
		}
		t.freeJob(j)
		if err == nil && j.hist != nil {
			err = t.histPush(j)
			es.Reused += int64(len(j.hist.reused))
		}
		co.since(t0)
		if err != nil {
			fail(err)
			continue
		}
		t.step++
		t.batchDone = j.idx + 1
		lossSum += float64(loss) * float64(n)
		lossN += n
		correct += c
		seen += tot
		es.Batches++
		task.Add(1)
		o.Logger.Debug("batch done", "epoch", t.epoch, "batch", j.idx+1, "of", total,
			"input_rows", len(j.hb.nodes), "epoch_s", time.Since(wall0).Seconds())
		if lossN > 0 {
			task.Describe(fmt.Sprintf("epoch %d loss %.4f", t.epoch, lossSum/float64(lossN)))
		}
		serve(j.idx + D)
	}
	// Drain a pending request so the sampler goroutine can finish.
	cancel()
	wg.Wait()
	for _, ch := range []chan *job{toGather, toTransfer, toCompute} {
		for j := range ch {
			t.freeJob(j)
		}
	}
	if firstErr == nil && parent.Err() != nil {
		firstErr = parent.Err()
	}
	if firstErr != nil {
		return es, firstErr
	}
	es.WallSec = time.Since(wall0).Seconds()
	es.Stages = StageTimes{Sample: sa.sec(), Gather: ga.sec(), Transfer: tr.sec(), Compute: co.sec()}
	if es.WallSec > 0 {
		es.Overlap = es.Stages.Sum() / es.WallSec
	}
	if lossN > 0 {
		es.Loss = lossSum / float64(lossN)
	}
	es.TrainAcc = ratio(int64(correct), int64(seen))
	es.Storage = subStages(t.d.Accounting().Snapshot(), acc0)
	es.IOReadBytes = -1
	if io1, err := iostat.Self(); err == nil && ioErr == nil {
		es.IOReadBytes = io1.Sub(io0).ReadBytes
	}
	ls := it.Stats()
	es.Lookups = ls
	es.NeighborHit = ratio(ls.Global.Hits, ls.Lookups)
	es.DynamicHit = ratio(ls.Dynamic.Hits, ls.Dynamic.Hits+ls.Dynamic.Misses)
	fc1 := t.featStats()
	es.FeatureHit = ratio(fc1.Hits-fc0.Hits, fc1.Requests-fc0.Requests)
	idBytes := int64(4)
	if t.d.Indices32() == nil {
		idBytes = 8
	}
	es.Measured = planner.Measured{FeatRows: float64(fc1.Hits - fc0.Hits), HistGatherRows: float64(histEdges), HistReusedNodes: float64(histReused),
		FeatureBytesSaved:  float64((fc1.BytesRequested-fc1.BytesMissed)-(fc0.BytesRequested-fc0.BytesMissed)) + float64(histEdges*t.d.FeatRowBytes()),
		NeighborBytesSaved: float64(ls.Global.BytesSaved + histEdges*idBytes)}
	if t.hc != nil {
		hc1 := t.hc.Stats()
		es.HistHit = ratio(hc1.Hits-hc0.Hits, hc1.Lookups-hc0.Lookups)
	}
	return es, nil
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func subStages(now, before []storage.StageStats) []storage.StageStats {
	prev := map[string]storage.StageStats{}
	for _, s := range before {
		prev[s.Stage] = s
	}
	var out []storage.StageStats
	for _, s := range now {
		p := prev[s.Stage]
		d := storage.StageStats{Stage: s.Stage, Rows: s.Rows - p.Rows, BytesRequested: s.BytesRequested - p.BytesRequested,
			BytesRead: s.BytesRead - p.BytesRead, ReadCalls: s.ReadCalls - p.ReadCalls}
		if d.Rows != 0 || d.BytesRequested != 0 || d.BytesRead != 0 {
			out = append(out, d)
		}
	}
	return out
}

// histLookup decides a batch's reuse set against the cache as it stands and
// pulls the embeddings right away, so later pushes cannot change them.
func (t *Trainer) histLookup(r histReq) histResp {
	if len(r.nodes) == 0 {
		return histResp{}
	}
	hits := make([]bool, len(r.nodes))
	n, err := t.hc.Lookup(r.iter, r.nodes, hits)
	if err != nil || n == 0 {
		return histResp{err: err}
	}
	var resp histResp
	nodes := make([]int64, 0, n)
	for i, h := range hits {
		if h {
			resp.reused = append(resp.reused, r.local[i])
			nodes = append(nodes, r.nodes[i])
		}
	}
	resp.pulled = make([]float32, n*t.hc.Hidden())
	if err := t.hc.Pull(r.iter, nodes, resp.pulled); err != nil {
		return histResp{err: err}
	}
	return resp
}

// histPush offers the batch's computed layer-(L−1) embeddings to the cache
// (with their gradient norms under the gradient policy) and, under that
// policy, evicts pulled entries whose gradient is unstable.
func (t *Trainer) histPush(j *job) error {
	hs := j.hist
	w := t.hc.Hidden()
	nodes := make([]int64, len(hs.computed))
	emb := make([]float32, len(hs.computed)*w)
	var norms []float32
	if hs.wantGrad {
		norms = make([]float32, len(hs.computed))
	}
	rowNorm := func(k int32) float32 {
		var s float64
		for _, g := range hs.grad[int(k)*w : int(k+1)*w] {
			s += float64(g) * float64(g)
		}
		return float32(math.Sqrt(s))
	}
	for i, k := range hs.computed {
		nodes[i] = j.hb.nodes[k]
		copy(emb[i*w:(i+1)*w], hs.emb[int(k)*w:int(k+1)*w])
		if norms != nil {
			norms[i] = rowNorm(k)
		}
	}
	if _, err := t.hc.Push(j.iter, nodes, emb, norms); err != nil {
		return err
	}
	if hs.wantGrad && len(hs.reused) > 0 {
		rn := make([]int64, len(hs.reused))
		rg := make([]float32, len(hs.reused))
		for i, k := range hs.reused {
			rn[i], rg[i] = j.hb.nodes[k], rowNorm(k)
		}
		if _, err := t.hc.EvictUnstable(rn, rg); err != nil {
			return err
		}
	}
	return nil
}

// upload copies a job's blocks, features and labels to the backend.
func (t *Trainer) upload(j *job) error {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	be := t.be
	j.blocks = make([]*devBlock, len(j.hb.blocks))
	for l, kb := range j.hb.blocks {
		db, err := be.UploadBlock(kb)
		if err != nil {
			return err
		}
		j.blocks[l] = &devBlock{blk: db}
	}
	rows, dim := len(j.hb.nodes), t.d.FeatDim()
	if j.zc != nil {
		x, err := t.uploadZeroCopy(j)
		if err != nil {
			return err
		}
		j.x = x
		if j.ring != nil {
			j.ring.put(j.buf)
		}
		j.buf = nil
	} else if ad, ok := be.(adopter); ok && j.buf != nil {
		// The tensor takes the ring buffer over; freeJob returns it.
		x, err := ad.Adopt(rows, dim, j.feats)
		if err != nil {
			return err
		}
		j.x = x
	} else {
		x, err := be.Alloc(rows, dim)
		if err != nil {
			return err
		}
		j.x = x
		be.Upload(x, j.feats)
		if j.ring != nil {
			j.ring.put(j.buf)
		}
		j.buf = nil
	}
	lab, err := be.AllocInts(len(j.labels))
	if err != nil {
		return err
	}
	j.lab = lab
	be.UploadInts(lab, j.labels)
	// Identity indices of every block, allocated here so compute's tape
	// does not own them.
	for _, b := range j.blocks {
		n := b.blk.NumDst()
		idx, err := be.AllocInts(n)
		if err != nil {
			return err
		}
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i)
		}
		be.UploadInts(idx, v)
		b.iota = idx
	}
	j.feats = nil
	return be.Err()
}

// batchSeed is the dropout seed of batch idx of epoch; layer l's mask is
// drawn with mixSeed(batchSeed, l).
func (t *Trainer) batchSeed(epoch, idx int) uint64 {
	return mixSeed(mixSeed(t.o.Seed, uint64(epoch)+0x100), uint64(idx))
}

// computeBatch runs forward, backward and the Adam step of one batch.
func (t *Trainer) computeBatch(j *job) (loss float32, n, correct, total int, err error) {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	tp := &tape{be: t.be}
	defer tp.free()
	p := &pass{train: true, inputDropped: j.dropped, seed: t.batchSeed(t.epoch, j.idx), blocks: j.blocks, x: j.x, hist: j.hist}
	err = tp.run(func() {
		logits := t.model.forward(tp, p)
		dl := tp.alloc(logits.Rows(), logits.Cols())
		var e error
		loss, n, e = t.be.CrossEntropy(dl, logits, j.lab)
		if e != nil {
			panic(tapeError{e})
		}
		correct, total, e = t.be.Accuracy(logits, j.lab)
		if e != nil {
			panic(tapeError{e})
		}
		t.model.backward(tp, p, dl)
		t.model.step(int(t.step)+1, t.adam())
	})
	return loss, n, correct, total, err
}

func (t *Trainer) adam() kernels.AdamConfig {
	c := kernels.DefaultAdam()
	c.LR, c.WeightDecay = float32(t.o.LR), float32(t.o.WeightDecay)
	return c
}

// Evaluate returns the accuracy of sampled inference (fanouts; -1 = full
// neighbourhood) on the labelled nodes among nodes. The sampling seed is
// fixed, so repeated evaluations of the same model agree.
func (t *Trainer) Evaluate(ctx context.Context, nodes []int64, fanouts []int) (float64, error) {
	var correct, total int
	err := t.infer(ctx, nodes, fanouts, func(targets []int64, logits kernels.Tensor, lab kernels.IntTensor) error {
		c, n, err := t.be.Accuracy(logits, lab)
		correct += c
		total += n
		return err
	})
	return ratio(int64(correct), int64(total)), err
}

// Predict returns, for every node of nodes (in that order), its log-softmax
// row (len(nodes)·Classes floats) computed by sampled inference with fanouts.
func (t *Trainer) Predict(ctx context.Context, nodes []int64, fanouts []int) ([]float32, error) {
	c := t.model.cfg.Classes
	pos := make(map[int64]int, len(nodes))
	for i, v := range nodes {
		pos[v] = i
	}
	uniq := make([]int64, 0, len(pos))
	for v := range pos {
		uniq = append(uniq, v)
	}
	out := make([]float32, len(nodes)*c)
	byNode := make(map[int64][]float32, len(uniq))
	err := t.infer(ctx, uniq, fanouts, func(targets []int64, logits kernels.Tensor, _ kernels.IntTensor) error {
		t.be.LogSoftmax(logits, logits)
		buf := make([]float32, logits.Rows()*c)
		if err := t.be.Download(buf, logits); err != nil {
			return err
		}
		for i, v := range targets {
			byNode[v] = buf[i*c : (i+1)*c]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, v := range nodes {
		copy(out[i*c:(i+1)*c], byNode[v])
	}
	return out, nil
}

// infer runs the model in evaluation mode over batches of nodes.
func (t *Trainer) infer(ctx context.Context, nodes []int64, fanouts []int, fn func([]int64, kernels.Tensor, kernels.IntTensor) error) error {
	if len(nodes) == 0 {
		return nil
	}
	if len(fanouts) != t.o.Layers {
		return fmt.Errorf("%w: %d fanouts for %d layers", ErrInvalidOptions, len(fanouts), t.o.Layers)
	}
	s, err := sample.New(t.d, nil, &sample.Options{Fanouts: fanouts, BatchSize: t.o.BatchSize, Seed: mixSeed(t.o.Seed, 0xe7a1),
		Workers: t.o.Workers, Source: t.o.Source, NeighborCache: t.nc, Train: nodes})
	if err != nil {
		return err
	}
	defer s.Close()
	it := s.Epoch(ctx, 0)
	defer it.Close()
	ring := newBufRing(1) // one batch at a time: the buffer is reused
	for {
		b, err := it.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		j := &job{hb: convert(b, nil, t.o.Model == ModelGAT), ring: ring}
		if j.feats, err = ring.get(ctx, t.split(j)*t.d.FeatDim()); err != nil {
			return err
		}
		j.buf = j.feats
		if err := t.gather(j); err != nil {
			ring.put(j.buf)
			return err
		}
		targets := j.hb.nodes[:j.hb.targets]
		if err := t.upload(j); err != nil {
			t.freeJob(j)
			return err
		}
		t.beMu.Lock()
		tp := &tape{be: t.be}
		err = tp.run(func() {
			logits := t.model.forward(tp, &pass{blocks: j.blocks, x: j.x})
			if e := fn(targets, logits, j.lab); e != nil {
				panic(tapeError{e})
			}
		})
		tp.free()
		t.beMu.Unlock()
		t.freeJob(j)
		if err != nil {
			return err
		}
	}
}

// gather is the gather stage shared by training and inference: it fills
// j.feats (already sized by split) with the feature rows of j's input
// nodes, normalised, and j.labels with its targets' labels. On the
// zero-copy path feats receives only the misses; the hits are counted
// here (the gather stage's accounting and featStats) and left to upload.
func (t *Trainer) gather(j *job) error {
	ids := j.hb.nodes
	if j.zc != nil {
		ids = j.zc.missIDs
		if h := int64(len(j.zc.hitPos)); h > 0 {
			t.zc.stage.Request(h, h*t.zc.rowBytes)
			t.zc.hits.Add(h)
		}
	}
	if err := t.fc.GatherF32(ids, j.feats); err != nil {
		return err
	}
	t.normalize(j.feats)
	labels := t.d.Labels()
	j.labels = make([]int32, j.hb.targets)
	for k, v := range j.hb.nodes[:j.hb.targets] {
		j.labels[k] = labels[v]
	}
	return nil
}

// normalize scales every feature row to unit L1 norm when
// Options.NormalizeFeatures is set (rows of zeros stay zero).
func (t *Trainer) normalize(f []float32) {
	if !t.o.NormalizeFeatures {
		return
	}
	dim := t.d.FeatDim()
	for r := 0; r+dim <= len(f); r += dim {
		var s float64
		for _, x := range f[r : r+dim] {
			s += math.Abs(float64(x))
		}
		if s > 0 {
			inv := float32(1 / s)
			for i := r; i < r+dim; i++ {
				f[i] *= inv
			}
		}
	}
}
