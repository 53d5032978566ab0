package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DefaultProfileName is the profile PlanMemory writes under
// DIR/profile/<name> when MemPlanOptions.ProfileName is empty.
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
	// ProfileName names the profile written under DIR/profile (default
	// DefaultProfileName); plan.json goes beside it.
	ProfileName string
	// Part is the node → partition assignment (needed in partition
	// selection), Partition its name, Cross its cross-partition neighbour
	// counts (the neighbour cache is then modelled and built with
	// neighborcache.PolicyCross).
	Part      []int32
	Partition string
	Cross     []int32
}

// MemPlan is PlanMemory's result.
type MemPlan struct {
	Plan *planner.PlanResult
	// Profile is nil when a PlanFile's profile is not on disk (the caches
	// then select by degree).
	Profile *planner.Profile
	// PlanPath is where the plan was read or written; Created says it was
	// made now (profiling epoch + planner.Plan).
	PlanPath string
	Created  bool
	// MemBytes is the budget the caches must fit.
	MemBytes int64
}

// Apply sets o's Plan, Profile, MemBytes and (from mo.Cross)
// NeighborCross.
func (mp *MemPlan) Apply(o *Options, mo *MemPlanOptions) {
	o.Plan, o.Profile, o.MemBytes = mp.Plan, mp.Profile, mp.MemBytes
	if mo != nil && mo.Cross != nil && o.NeighborCross == nil {
		o.NeighborCross = mo.Cross
	}
}

// minTables is the memory the caches' address tables need: 4·N for the
// feature cache and, with history, 4·N for its slot table.
func minTables(n int64, hist bool) int64 {
	if hist {
		return 8 * n
	}
	return 4 * n
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
		return nil, fmt.Errorf("%w: PlanMemory needs MemBytes > 0 or a PlanFile", ErrInvalidOptions)
	}
	o := opts.withDefaults()
	n := d.NumNodes()
	hist := !o.NoHist && o.Layers >= 2 && o.HistCacheBytes >= 0
	if need := minTables(n, hist); mo.MemBytes > 0 && mo.MemBytes < need {
		return nil, fmt.Errorf("%w: %w: --mem %d bytes cannot hold the caches' address tables (%d bytes: 4 bytes per node per cache over %d nodes)",
			ErrBudget, planner.ErrBudget, mo.MemBytes, need, n)
	}
	m := d.Manifest()
	cfg := ModelConfig{Kind: o.Model, InDim: d.FeatDim(), Hidden: o.Hidden, Classes: int(m.NumClasses), Layers: o.Layers, Heads: o.Heads}
	if mo.PlanFile != "" {
		mp, err := readPlan(d, mo.PlanFile, o.Logger)
		if err != nil {
			return nil, err
		}
		mp.MemBytes = mo.MemBytes
		if mp.MemBytes == 0 {
			// The plan's budget covers the caches only; the working set
			// and fixed state were reserved before planning, so the limit
			// is their sum.
			mp.MemBytes = mp.Plan.Memory.MemBytes + WorkingSet(d, &o, mp.Profile).Bytes + FixedState(d, &o, mp.Profile).Bytes
		}
		return mp, nil
	}
	name := mo.ProfileName
	if name == "" {
		name = DefaultProfileName
	}
	p, err := planner.RunProfile(ctx, d, o.Partitions, &planner.ProfileOptions{Name: name, Fanouts: o.Fanouts, BatchSize: o.BatchSize,
		Mode: o.Selection, PartsPerBatch: o.PartsPerBatch, Seed: o.Seed, Workers: o.Workers, Source: o.Source,
		Part: mo.Part, Partition: mo.Partition, Staleness: o.Staleness, ReuseDepth: int64(ReuseDepth(&o)),
		Progress: o.Progress, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	if err := p.Save(d.Dir()); err != nil {
		return nil, err
	}
	hidden := cfg.HistWidth()
	if !hist {
		hidden = -1
	}
	// The batches in flight come first; the caches get the rest.
	ws := WorkingSet(d, &o, p)
	fs := FixedState(d, &o, p)
	if need := minTables(n, hist); mo.MemBytes < ws.Bytes+fs.Bytes+need {
		return nil, workingSetError(ws, fs, mo.MemBytes, need)
	}
	o.Logger.Info("working set reserved", "bytes", ws.Bytes, "in_flight", ws.InFlight, "batch_bytes", ws.BatchBytes, "batch_rows", ws.BatchRows, "from", ws.From, "dynamic_bytes", ws.DynamicBytes)
	o.Logger.Info("fixed state reserved", "bytes", fs.Bytes, "sampler_bytes", fs.SamplerBytes, "workers", fs.Workers, "profile_bytes", fs.ProfileBytes)
	res, err := planner.Plan(p, &planner.PlanOptions{MemBytes: mo.MemBytes - ws.Bytes - fs.Bytes, Hidden: hidden, Indptr: d.Indptr(), Cross: mo.Cross,
		Staleness: o.Staleness})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(planner.ProfilePath(d.Dir(), name), "plan.json")
	if err := res.Save(path); err != nil {
		return nil, err
	}
	o.Logger.Info("memory plan", "path", path, "alpha", res.Alpha, "feature_bytes", res.Feature.Bytes(),
		"history_bytes", res.History.Bytes(), "neighbor_bytes", res.Neighbor.Bytes())
	mp := &MemPlan{Plan: res, Profile: keptProfile(p), PlanPath: path, Created: true, MemBytes: mo.MemBytes}
	// The profiling epoch's scratch (per-node counters, batches) is garbage
	// now; return it to the OS so the process starts training at the size
	// --mem budgets rather than at the profiling peak.
	p = nil
	debug.FreeOSMemory()
	return mp, nil
}

func readPlan(d *storage.Dataset, path string, log interface{ Info(string, ...any) }) (*MemPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("train: plan: %w", err)
	}
	res := new(planner.PlanResult)
	if err := json.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("%w: plan %s: %w", ErrInvalidOptions, path, err)
	}
	if res.NumNodes != d.NumNodes() {
		return nil, fmt.Errorf("%w: plan %s is for %d nodes, the dataset has %d", ErrMismatch, path, res.NumNodes, d.NumNodes())
	}
	mp := &MemPlan{Plan: res, PlanPath: path}
	if res.Profile != "" {
		p, err := planner.LoadProfile(d.Dir(), res.Profile)
		switch {
		case err == nil && p.Meta.NumNodes == d.NumNodes():
			mp.Profile = keptProfile(p)
		case err == nil, errors.Is(err, planner.ErrNotFound):
			log.Info("plan's profile not usable; caches select by degree", "profile", res.Profile)
		default:
			return nil, err
		}
	}
	return mp, nil
}

// cacheSizes are the budgets handed to the caches' constructors.
type cacheSizes struct {
	feat, hist, nbr int64
	histOn          bool
}

func pick(explicit, planned int64, hasPlan bool) int64 {
	switch {
	case explicit > 0:
		return explicit
	case explicit < 0 || !hasPlan:
		return 0
	}
	return planned
}

// sizes resolves the cache budgets: explicit sizes, then the plan's, then
// the defaults (see Options).
func (o *Options) sizes(n int64) cacheSizes {
	pl := o.Plan
	var s cacheSizes
	var pf, ph, pn int64
	if pl != nil {
		pf, ph, pn = pl.Feature.BudgetBytes, pl.History.BudgetBytes, pl.Neighbor.BudgetBytes
	}
	s.feat = pick(o.FeatCacheBytes, pf, pl != nil)
	s.nbr = pick(o.NeighborCacheBytes, pn, pl != nil)
	s.histOn = !o.NoHist && o.Layers >= 2 && o.HistCacheBytes >= 0
	if s.histOn {
		switch {
		case o.HistCacheBytes > 0:
			s.hist = o.HistCacheBytes
		case pl != nil && pl.History.Entries > 0:
			s.hist = ph
		case pl != nil:
			s.histOn = false // the plan gives history nothing
		default:
			s.hist = -1 // the default, resolved by newHistCache
		}
	}
	return s
}

// MemoryUse is the caches' memory, tables included, plus the working set
// reserved for the batches in flight, plus the fixed state.
type MemoryUse struct {
	FeatureBytes  int64 `json:"feature_bytes"`
	HistoryBytes  int64 `json:"history_bytes"`
	NeighborBytes int64 `json:"neighbor_bytes"`
	// WorkingSetBytes is InFlight × BatchBytes plus the dynamic
	// neighbour caches (see WorkingSet).
	WorkingSetBytes int64 `json:"working_set_bytes"`
	InFlight        int   `json:"in_flight"`
	BatchBytes      int64 `json:"batch_bytes"`
	BatchRows       int64 `json:"batch_rows"`
	DynamicBytes    int64 `json:"dynamic_bytes,omitempty"`
	// FixedBytes is the trainer's per-process state beside the caches
	// and the working set (see FixedState).
	FixedBytes int64 `json:"fixed_bytes"`
	// TotalBytes is the caches plus the working set plus the fixed state.
	TotalBytes int64 `json:"total_bytes"`
	// LimitBytes is Options.MemBytes (0: none).
	LimitBytes int64 `json:"limit_bytes,omitempty"`
}

func (m *MemoryUse) sum() {
	m.TotalBytes = m.FeatureBytes + m.HistoryBytes + m.NeighborBytes + m.WorkingSetBytes + m.FixedBytes
}

func (m *MemoryUse) setWorkingSet(ws WorkingSetEstimate) {
	m.WorkingSetBytes, m.InFlight, m.BatchBytes, m.BatchRows, m.DynamicBytes = ws.Bytes, ws.InFlight, ws.BatchBytes, ws.BatchRows, ws.DynamicBytes
}

// WorkingSetEstimate is the memory the training pipeline itself needs,
// beside the caches.
type WorkingSetEstimate struct {
	// BatchRows is the input-layer rows of the largest batch expected, and
	// From says where it comes from: "profile" (the profile's
	// MaxBatchRows), "profile-mean" (1.5 × its mean rows per batch, for
	// profiles without the maximum) or "fanouts" (BatchSize × Π(1+fanout),
	// at most the node count: an upper bound).
	BatchRows int64  `json:"batch_rows"`
	From      string `json:"from"`
	// BatchBytes is one batch's peak: the input features (the gather
	// buffer, which the CPU backend adopts as the input tensor), 48 bytes
	// per input row of ids and block CSRs (sampler, host and backend
	// copies), and the input layer's activations and gradients on its
	// destinations (about 2·BatchRows/(1+fanout₀) rows of 2·in + 3·hidden
	// float32; the upper layers are smaller). Unless Options.ZeroCopy is
	// off it adds the zero-copy split's 20 bytes per input row (the miss
	// buffer itself is counted at full size); with ZeroCopyOn, which may
	// run on the CPU backend, also 3·4·in bytes per row: an input tensor
	// separate from the gather buffer, and the hit/miss tensor and the
	// input dropout mask that exist while upload assembles it.
	BatchBytes int64 `json:"batch_bytes"`
	InFlight   int   `json:"in_flight"`
	// DynamicBytes is the partition sampler's macro-batch dynamic
	// neighbour caches alive at once: (sampling workers + 1) × the
	// profile's MaxDynamicBytes. A macro batch's cache lives from the
	// sampling of its first batch to that of its last, and batches are
	// handed to the workers in order, so the caches alive are at most one
	// per busy worker plus the one whose later batches are not yet
	// started. 0 in random selection and without a matching profile. Like
	// BatchRows it comes from the profiling epoch: another epoch's macro
	// batches may be somewhat larger.
	DynamicBytes int64 `json:"dynamic_bytes,omitempty"`
	// Bytes = InFlight × BatchBytes + DynamicBytes.
	Bytes int64 `json:"bytes"`
}

// idRowBytes is the per-input-row cost of ids and block CSRs in
// WorkingSet's estimate.
const idRowBytes = 48

// WorkingSet estimates the pipeline's working set for training d with
// opts: Options.InFlight batches of the largest expected size (see
// WorkingSetEstimate). The batch size comes from p (nil: opts.Profile) when
// its batch size and fanouts match opts, else from the fanouts.
func WorkingSet(d *storage.Dataset, opts *Options, p *planner.Profile) WorkingSetEstimate {
	o := opts.withDefaults()
	if p == nil {
		p = o.Profile
	}
	n := d.NumNodes()
	var ws WorkingSetEstimate
	if p != nil && p.Meta.BatchSize == o.BatchSize && slices.Equal(p.Meta.Fanouts, o.Fanouts) && p.Meta.Batches > 0 {
		if o.Selection == sample.ModePartition && p.Meta.MaxDynamicBytes > 0 {
			ws.DynamicBytes = int64(samplingWorkers(o.Workers)+1) * p.Meta.MaxDynamicBytes
		}
		if p.Meta.MaxBatchRows > 0 {
			ws.BatchRows, ws.From = p.Meta.MaxBatchRows, "profile"
		} else {
			ws.BatchRows, ws.From = (3*p.Meta.GatheredRows+2*p.Meta.Batches-1)/(2*p.Meta.Batches), "profile-mean"
		}
	} else {
		r := float64(o.BatchSize)
		for _, f := range o.Fanouts {
			if f < 0 || r >= float64(n) {
				r = float64(n)
				break
			}
			r *= float64(1 + f)
		}
		ws.BatchRows, ws.From = int64(min(r, float64(n))), "fanouts"
	}
	in := int64(d.FeatDim())
	h := int64(o.Hidden)
	if o.Model == ModelGAT {
		h *= int64(o.Heads)
	}
	dst := ws.BatchRows
	if f0 := o.Fanouts[0]; f0 > 0 {
		dst = min(dst, 2*ws.BatchRows/int64(1+f0)+1)
	}
	ws.BatchBytes = ws.BatchRows*(4*in+idRowBytes+zeroCopyRowBytes(o.ZeroCopy, in)) + dst*(2*in+3*h)*4
	ws.InFlight = o.InFlight
	ws.Bytes = int64(ws.InFlight)*ws.BatchBytes + ws.DynamicBytes
	return ws
}

// FixedStateEstimate is the memory the trainer holds for the whole run,
// independent of the batches: per-node state that is neither a cache nor
// a batch.
type FixedStateEstimate struct {
	// Workers is the number of sampling goroutines, SamplerBytes their
	// scratch: a dense node → local-id map of idMapNodeBytes (4) bytes per
	// node each while the graph has at most sample's dense limit (2^23)
	// nodes, else a hash map sized by the batch (counted as 0 here).
	Workers      int   `json:"workers"`
	SamplerBytes int64 `json:"sampler_bytes"`
	// ProfileBytes is the part of the profile kept for the run:
	// profileNodeBytes (12) bytes per node (saved_IO_feat, which the
	// profiled feature cache keeps as its selection counts, and the two
	// history scores) when Options.Profile is set, else 0. PlanMemory's
	// MemPlan carries only these arrays.
	ProfileBytes int64 `json:"profile_bytes"`
	// Bytes = SamplerBytes + ProfileBytes.
	Bytes int64 `json:"bytes"`
}

const (
	// idMapNodeBytes is one sampling worker's dense id map per node
	// (an int32 local id + 1).
	idMapNodeBytes = 4
	// idMapDenseLimit mirrors sample's limit for dense id maps.
	idMapDenseLimit = 1 << 23
	// profileNodeBytes is the profile arrays kept per node (3 × uint32).
	profileNodeBytes = 12
)

// FixedState estimates the trainer's fixed state for training d with
// opts (p nil: opts.Profile):
//
//	Bytes = 4 · N · Workers  (N ≤ 2^23; else 0)  +  12 · N  (with a profile)
//
// with Workers defaulting to GOMAXPROCS as the sampler's does. The memory
// check and --mem reserve it beside the working set. Memory-mapped
// dataset and partition files are not counted: the kernel may drop their
// pages under pressure.
func FixedState(d *storage.Dataset, opts *Options, p *planner.Profile) FixedStateEstimate {
	o := opts.withDefaults()
	if p == nil {
		p = o.Profile
	}
	return fixedState(d.NumNodes(), o.Workers, p != nil)
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
	if n <= idMapDenseLimit {
		fs.SamplerBytes = idMapNodeBytes * n * int64(workers)
	}
	if profile {
		fs.ProfileBytes = profileNodeBytes * n
	}
	fs.Bytes = fs.SamplerBytes + fs.ProfileBytes
	return fs
}

// keptProfile is p without the arrays that only planning reads (the
// neighbour benefit and the history validity counts): what the trainer
// needs of it, so the rest can be freed once the plan is made.
func keptProfile(p *planner.Profile) *planner.Profile {
	if p == nil {
		return nil
	}
	return &planner.Profile{Meta: p.Meta, Feat: p.Feat, HistSample: p.HistSample, HistGather: p.HistGather}
}

func workingSetError(ws WorkingSetEstimate, fs FixedStateEstimate, mem, caches int64) error {
	return fmt.Errorf("%w: --mem %d bytes cannot hold the training working set of %d in-flight batches × %d bytes (up to %d input rows per batch, from %s) and %d bytes of macro-batch neighbour caches, plus %d bytes of fixed state (%d sampling workers) plus %d bytes of cache tables: use a smaller --batch-size or --fanouts, or --in-flight 1",
		ErrBudget, mem, ws.InFlight, ws.BatchBytes, ws.BatchRows, ws.From, ws.DynamicBytes, fs.Bytes, fs.Workers, caches)
}

// estimateMemory is the memory the caches built from s will take at most.
func estimateMemory(d *storage.Dataset, o *Options, s cacheSizes, histWidth int) MemoryUse {
	n := d.NumNodes()
	var m MemoryUse
	if s.feat > 0 {
		if o.FeatPolicy == featurecache.PolicyDynamic {
			m.FeatureBytes = s.feat
		} else {
			rb := d.FeatRowBytes()
			m.FeatureBytes = featurecache.BytesFor(featurecache.CapacityFor(s.feat, rb, n), rb, n)
			if s.feat < 4*n {
				m.FeatureBytes = s.feat
			}
		}
	}
	if s.histOn {
		m.HistoryBytes = histcache.BytesFor(n, histcache.CapacityFor(histBudget(n, s.hist, histWidth), n, histWidth), histWidth)
	}
	m.NeighborBytes = s.nbr
	m.LimitBytes = o.MemBytes
	m.setWorkingSet(WorkingSet(d, o, nil))
	m.FixedBytes = FixedState(d, o, nil).Bytes
	m.sum()
	return m
}

func histBudget(n, b int64, width int) int64 {
	if b < 0 {
		return defaultHistBudget(n, width)
	}
	return b
}

func checkMemory(m MemoryUse, when string) error {
	if m.LimitBytes <= 0 || m.TotalBytes <= m.LimitBytes {
		return nil
	}
	caches := m.FeatureBytes + m.HistoryBytes + m.NeighborBytes
	if m.WorkingSetBytes > 0 && m.WorkingSetBytes+m.FixedBytes+min(caches, 1) > m.LimitBytes {
		return fmt.Errorf("%w: %s: the training working set (%d in-flight batches × %d bytes, up to %d input rows each) and fixed state (%d bytes) alone exceed --mem %d: use a smaller --batch-size or --fanouts",
			ErrBudget, when, m.InFlight, m.BatchBytes, m.BatchRows, m.FixedBytes, m.LimitBytes)
	}
	return fmt.Errorf("%w: %s: caches (feature %d, history %d, neighbour %d, tables included) + working set %d (%d in-flight batches) + fixed state %d = %d bytes > --mem %d",
		ErrBudget, when, m.FeatureBytes, m.HistoryBytes, m.NeighborBytes, m.WorkingSetBytes, m.InFlight, m.FixedBytes, m.TotalBytes, m.LimitBytes)
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
