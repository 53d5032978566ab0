package planner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/namedir"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DefaultProfileName is the profile name used when none is given.
const DefaultProfileName = "default"

// ProfileOptions configures RunProfile. A nil *ProfileOptions means the
// defaults; zero fields take their defaults.
type ProfileOptions struct {
	// Name names the profile (its directory DIR/profile/<Name>). Default
	// DefaultProfileName. Only used by Save; recorded in the profile.
	Name string
	// Fanouts, BatchSize, Mode, PartsPerBatch, Seed, Workers and Source are
	// passed to the sampler (see sample.Options; same defaults).
	Fanouts       []int
	BatchSize     int
	Mode          sample.Mode
	PartsPerBatch int
	Seed          uint64
	Workers       int
	Source        sample.Source
	// PresampleEpochs is the number of epochs whose counts are summed
	// (GNNLab's PreSC#K); default 1. Only epoch 0 is timed and gathered.
	PresampleEpochs int
	// NeighborCache is the global neighbour cache active while profiling
	// (nil: none). Lists it serves do not count towards
	// saved_IO_hist_sample.
	NeighborCache *neighborcache.Cache
	// Part is the node → partition assignment, used in ModePartition to
	// tell which lists the macro batch's dynamic cache serves. When nil,
	// it is derived from parts if parts has a Members(p int) []int64
	// method; otherwise ModePartition is an error.
	Part []int32
	// Partition names the partitioning, recorded in the profile.
	Partition string
	// Staleness and ReuseDepth parameterise the history-cache validity
	// model (HistHits): an entry pushed at iteration t serves iteration i
	// iff ReuseDepth ≤ i−t < Staleness. Defaults: one epoch of batches
	// past ReuseDepth (histcache.EpochStaleness of the training nodes,
	// BatchSize and ReuseDepth; train.Options uses the same) and 1
	// (the decision for batch i sees every earlier push; the trainer
	// uses train.ReuseDepth). Plan must be given the same Staleness.
	Staleness  int64
	ReuseDepth int64
	// Gather is how training reads feature-cache misses: Mode, IODepth,
	// CoalesceGap, MaxReadAmplification, MaxReadBytes and IO are used
	// (Policy, Counts, the stages and Logger are not). The profile times
	// its gather with them and prices every batch's reads by the plan
	// they give (Meta.Reads). nil: featurecache's defaults.
	Gather *featurecache.Options
	// NoFeatureBlock says training will not use the dynamic feature
	// block. Otherwise, in ModePartition over parts that are id ranges
	// (a relabelled dataset), the rows of the macro batch's own parts are
	// served by the block, so they count in neither Feat nor the read
	// model.
	NoFeatureBlock bool
	// Progress receives one task per pass (nil: none).
	Progress progress.Reporter
	// Logger receives one Info line per profile (nil: none).
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *ProfileOptions) Validate() error {
	if o == nil {
		return nil
	}
	if o.Staleness < 0 || o.ReuseDepth < 0 {
		return opterr.Errorf(ErrInvalidOptions, "%s %d / %s %d, want >= 1 (0: default)", opterr.Field("Staleness"), o.Staleness, opterr.Field("ReuseDepth"), o.ReuseDepth)
	}
	if o.PresampleEpochs < 0 {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want >= 1", opterr.Field("PresampleEpochs"), o.PresampleEpochs)
	}
	if o.Name != "" && !validName(o.Name) {
		return opterr.Errorf(ErrInvalidOptions, "%s %q: want at most %d letters, digits, '-', '_' or '.', not starting with '.'", opterr.Field("Name"), o.Name, maxNameBytes)
	}
	so := o.samplerOptions()
	if err := so.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// maxNameBytes is the longest profile name (saving one stages it).
const maxNameBytes = namedir.MaxNameBytes

func validName(s string) bool {
	if s == "" || s[0] == '.' || len(s) > maxNameBytes { // ".", "..", the swap's ".NAME.new"/".NAME.old", and names those would not fit
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

func (o *ProfileOptions) samplerOptions() sample.Options {
	return sample.Options{Fanouts: o.Fanouts, BatchSize: o.BatchSize, Mode: o.Mode, PartsPerBatch: o.PartsPerBatch,
		Seed: o.Seed, Workers: o.Workers, Source: o.Source, NeighborCache: o.NeighborCache, Prefetch: profilePrefetch}
}

// profileGatherBytes bounds the profiling epoch's gather buffer.
const profileGatherBytes = 16 << 20

// profilePrefetch is the profiling samplers' Prefetch: one sampled batch
// waits while one is profiled.
const profilePrefetch = 1

// ProfileWorkingBytes bounds what a profiling epoch holds beside its
// counters (ProfileMemBytes) and beside its sampling workers' batches
// under construction (which the caller counts once for profiling and
// training alike): the gather buffer (at most profileGatherBytes, at most
// a batch's rows of rowBytes), the read model's scratch (a batch's sorted
// row ids, and as many merge-gap candidates: 16 bytes per row), and two
// sampled batches of batchBytes (sample.BatchBytesBound): the one waiting
// in the sampler's prefetch slot and the one being profiled. The feature
// cache's gather scratch is not in it (ProfileGatherRows).
func ProfileWorkingBytes(batchRows, rowBytes, batchBytes int64) int64 {
	return min(profileGatherBytes, batchRows*rowBytes) + 16*batchRows + (profilePrefetch+1)*batchBytes
}

// ProfileGatherRows is the most ids one of the profiling epoch's gathers
// asks for, at batches of at most batchRows rows of rowBytes: its gather
// scratch (featurecache.GatherCallBytes) is the caller's to count.
func ProfileGatherRows(batchRows, rowBytes int64) int64 {
	return min(batchRows, max(profileGatherBytes/max(rowBytes, 1), 1))
}

func (o *ProfileOptions) withDefaults() ProfileOptions {
	var c ProfileOptions
	if o != nil {
		c = *o
	}
	if c.Name == "" {
		c.Name = DefaultProfileName
	}
	if c.PresampleEpochs == 0 {
		c.PresampleEpochs = 1
	}
	if c.ReuseDepth == 0 {
		c.ReuseDepth = 1
	}
	if len(c.Fanouts) == 0 {
		c.Fanouts = sample.DefaultFanouts
	}
	if c.BatchSize == 0 {
		c.BatchSize = sample.DefaultBatchSize
	}
	if c.Mode == "" {
		c.Mode = sample.ModeRandom
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	c.Progress = progress.Or(c.Progress)
	return c
}

// Meta is a profile's scalar content, written as profile.json.
type Meta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// SamplePlan is the sample.PlanVersion the batches were constructed
	// by (0 in profiles written before it was recorded).
	SamplePlan int    `json:"sample_plan,omitempty"`
	Name       string `json:"name"`
	// RunID names the profiling run that made the profile (random, drawn
	// when it starts; empty in profiles written before 2026-11-27): a
	// plan records it (PlanResult.ProfileID), so a profile saved again
	// under the name since is told apart (ID).
	RunID string `json:"run_id,omitempty"`

	// The dataset profiled.
	Dataset         string `json:"dataset"`
	DatasetChecksum string `json:"dataset_checksum"`
	NumNodes        int64  `json:"num_nodes"`
	NumEdges        int64  `json:"num_edges"`
	FeatDim         int    `json:"feat_dim"`
	FeatRowBytes    int64  `json:"feat_row_bytes"`
	// IDBytes is the width of one neighbour id on storage (4 or 8).
	IDBytes int64 `json:"id_bytes"`

	// The options used.
	Mode          string `json:"mode"`
	Fanouts       []int  `json:"fanouts"`
	BatchSize     int    `json:"batch_size"`
	PartsPerBatch int    `json:"parts_per_batch"`
	Partition     string `json:"partition,omitempty"`
	// PartChecksum identifies the partition assignment the batches were
	// drawn from in partition mode (PartChecksum; empty otherwise, and in
	// profiles written before it existed).
	PartChecksum        string `json:"part_checksum,omitempty"`
	Seed                uint64 `json:"seed"`
	PresampleEpochs     int    `json:"presample_epochs"`
	NeighborCacheBytes  int64  `json:"neighbor_cache_bytes"`
	NeighborCachePolicy string `json:"neighbor_cache_policy,omitempty"`
	// Staleness and ReuseDepth of the history validity model (0 in
	// profiles written before it existed: they have no HistAppear and
	// HistHits, and Plan assumes every appearance hits).
	Staleness  int64 `json:"staleness,omitempty"`
	ReuseDepth int64 `json:"reuse_depth,omitempty"`
	// Iterations is the number of batches over all PresampleEpochs: the
	// length of the sequence the validity model assumes repeats.
	Iterations int64 `json:"iterations,omitempty"`
	// HistRounds is the number of steady-state replays of those
	// iterations that HistHits counts the hits of (HistRounds, the
	// package doc's "History validity"); 0 in profiles written before:
	// their HistHits count one linear pass with the first appearance
	// wrapped, and Reusable refuses them.
	HistRounds int64 `json:"hist_rounds,omitempty"`
	// HistModel is the validity model's version: 2 replays every
	// possible hop-1 appearance with its sampling probability, so
	// HistAppear counts replayed appearances too; absent (0) before.
	HistModel int `json:"hist_model,omitempty"`
	// HeldOutEpoch is the sampler epoch whose feature counts are
	// Profile.FeatHeldOut: PresampleEpochs, the first epoch after the
	// counted ones (0 in profiles written before: they have no held-out
	// counts, Plan predicts hits from Feat, and Reusable refuses them).
	HeldOutEpoch int `json:"held_out_epoch,omitempty"`

	// Counts of the profiling epoch (epoch 0): the inputs of β.
	Batches          int64 `json:"batches"`
	SampledNeighbors int64 `json:"sampled_neighbors"`
	GatheredRows     int64 `json:"gathered_rows"`
	// MaxBatchRows is the largest batch's input-layer row count in epoch 0:
	// the trainer's per-batch working set is sized from it (0 in profiles
	// written before it existed).
	MaxBatchRows int64 `json:"max_batch_rows,omitempty"`
	// MaxDstPerRow is epoch 0's largest ratio, over its batches, of the
	// input layer's destinations to its input rows: the trainer estimates
	// a batch's destinations, whose activations its backend tensors scale
	// with, as this many per input row instead of the formula
	// 2/(1+fanout₀) (0 in profiles written before it existed: the
	// formula). Three layers of fanout 10 measured 0.15 against the
	// formula's 0.18; Cora at fanouts 10,10 (degrees below the fanout)
	// 0.45.
	MaxDstPerRow float64 `json:"max_dst_per_row,omitempty"`
	// MaxDynamicBytes is the largest macro batch's dynamic neighbour
	// cache in epoch 0 (sample.Batch.DynamicBytes; 0 in random mode and
	// in profiles written before it existed): the trainer reserves room
	// for those alive at once beside the batches in flight.
	MaxDynamicBytes int64 `json:"max_dynamic_bytes,omitempty"`
	// Lookups are epoch 0's neighbour-list lookups per level.
	Lookups sample.LookupStats `json:"lookups"`
	// Timings of epoch 0 (the only fields that vary between runs with the
	// same seed, together with Beta).
	SampleSeconds float64 `json:"sample_seconds"`
	GatherSeconds float64 `json:"gather_seconds"`
	// Beta is OUTRE Eq. 3: (SampleSeconds/SampledNeighbors) /
	// (GatherSeconds/GatheredRows); 1 when an input is zero.
	Beta float64 `json:"beta"`

	// Sums of the arrays over all PresampleEpochs epochs.
	SumFeat       uint64 `json:"sum_saved_io_feat"`
	SumHistSample uint64 `json:"sum_saved_io_hist_sample"`
	SumHistGather uint64 `json:"sum_saved_io_hist_gather"`
	SumNbr        uint64 `json:"sum_nbr_lookups"`
	SumHistAppear uint64 `json:"sum_hist_appear,omitempty"`
	SumHistHits   uint64 `json:"sum_hist_hits,omitempty"`
	SumFeatSingle uint64 `json:"sum_feat_single_reads,omitempty"`
	// SumFeatHeldOut is FeatHeldOut's sum, over the held-out epoch.
	SumFeatHeldOut uint64 `json:"sum_saved_io_feat_heldout,omitempty"`

	// Reads is the model of the storage reads, summed over
	// PresampleEpochs (nil in profiles written before it: they have no
	// FeatSingle, and Plan counts every row alike).
	Reads *ReadModel `json:"reads,omitempty"`

	Files []FileInfo `json:"files"`
}

// FileInfo describes one array file of a profile.
type FileInfo struct {
	Name     string  `json:"name"`
	DType    string  `json:"dtype"`
	Shape    []int64 `json:"shape"`
	Checksum string  `json:"checksum"` // "xxhash64:" + 16 hex digits of the data section
}

// Profile is the result of a profiling run: OUTRE's three N-length arrays
// plus the per-node neighbour-lookup benefit, the two arrays of the
// history validity model, the single-read counts of the read model and
// the held-out feature counts, and Meta. Arrays are uint32 (4·N bytes
// each, 32·N in all), saturating at 2^32−1.
type Profile struct {
	Meta Meta
	// Feat is saved_IO_feat: the number of batches whose input layer
	// contains v and reads it from storage (not from the dynamic feature
	// block).
	Feat []uint32
	// FeatSingle is the number of those batches whose modelled reads
	// (Meta.Reads) read v's row on its own rather than inside a merged
	// read. nil in old profiles.
	FeatSingle []uint32
	// FeatHeldOut counts as Feat does, over one more epoch of batches
	// (Meta.HeldOutEpoch) that no cache is ranked by. The caches hold the
	// nodes of largest Feat, and Feat over-states what those nodes are
	// gathered in a fresh epoch: a node is among them partly because its
	// sampled count ran high (on the 3 GiB bench dataset, the 173 k rows
	// of largest count were gathered 0.82 times as often in an epoch of
	// another seed). Plan predicts the feature cache's hits, and values
	// its rows, by FeatHeldOut. nil in old profiles.
	FeatHeldOut []uint32
	// HistSample is saved_IO_hist_sample: for v at hop 1 (not a target),
	// the size of v's sampled (L−1)-hop subtree counted as sampled edges
	// whose parent's list came from storage, summed over batches.
	HistSample []uint32
	// HistGather is saved_IO_hist_gather: v's unique contribution to the
	// batch's nodes below hop 1, summed over batches.
	HistGather []uint32
	// Nbr is the neighbour-cache benefit: the number of batches that
	// looked v's list up without the macro batch's dynamic cache serving
	// it (whether or not the global cache did).
	Nbr []uint32
	// HistAppear is the number of v's hop-1 (non-target) appearances, and
	// HistHits the hits among them, in Meta.HistRounds replays of the
	// profiled epochs in steady state (see the package doc, "History
	// validity"; profiles before Meta.HistModel 2 count the profiled
	// appearances in HistAppear). Both nil in old profiles.
	HistAppear []uint32
	HistHits   []uint32
	// HistScores, derived and never stored, is HistScore of every node
	// for a given β (see ForTraining); nil unless set.
	HistScores []float32 `json:"-"`
}

// HistScore is node i's history-cache score: the history I/O it saves per
// epoch, (β·saved_IO_hist_sample + saved_IO_hist_gather) × the fraction of
// its hop-1 appearances a usable entry would serve (1 for profiles without
// the validity arrays) ÷ the presampled epochs. Plan ranks history
// candidates by it and BuildCaches builds the history cache by it (both
// through the same ranking, as float32), so the cache built is the cache
// planned.
func (p *Profile) HistScore(beta float64, i int) float64 {
	return (beta*float64(p.HistSample[i]) + float64(p.HistGather[i])) * p.histHit(i) / float64(max(p.Meta.PresampleEpochs, 1))
}

// hasHeldOut reports whether p has the held-out feature counts.
func (p *Profile) hasHeldOut() bool { return p.FeatHeldOut != nil && len(p.FeatHeldOut) == len(p.Feat) }

// hasValidity reports whether p has the history validity arrays.
func (p *Profile) hasValidity() bool { return p.HistAppear != nil && p.HistHits != nil }

// histRounds is the replays HistHits counts (1 for profiles before
// Meta.HistRounds).
func (p *Profile) histRounds() float64 { return float64(max(p.Meta.HistRounds, 1)) }

// histHit is the fraction of node i's hop-1 appearances a usable history
// entry serves: 1 without the validity arrays (OUTRE's assumption), 0
// for a node that never appears.
func (p *Profile) histHit(i int) float64 {
	if !p.hasValidity() {
		return 1
	}
	if p.HistAppear[i] == 0 {
		return 0
	}
	if p.Meta.HistModel < histModel {
		return float64(p.HistHits[i]) / (p.histRounds() * float64(p.HistAppear[i]))
	}
	return float64(p.HistHits[i]) / float64(p.HistAppear[i])
}

// histHitsPerEpoch is node i's history hits per training epoch (0
// without the validity arrays).
func (p *Profile) histHitsPerEpoch(i int) float64 {
	if !p.hasValidity() {
		return 0
	}
	return float64(p.HistHits[i]) / (p.histRounds() * float64(max(p.Meta.PresampleEpochs, 1)))
}

// ComputeHistScores returns HistScore(beta, i) of every node as float32.
func (p *Profile) ComputeHistScores(beta float64) []float32 {
	s := make([]float32, len(p.HistSample))
	for i := range s {
		s[i] = float32(p.HistScore(beta, i))
	}
	return s
}

// ForTraining is what training reads of p, so the rest can be freed: Meta,
// Feat (the profiled feature cache's counts) and HistScores for beta (the
// history cache's candidate order). It holds 8 bytes per node.
// The kept arrays are added to memacct.Profile for the rest of the
// process.
func (p *Profile) ForTraining(beta float64) *Profile {
	r := p.ranking(beta)
	k := &Profile{Meta: p.Meta, Feat: r.Feat, HistScores: r.Hist}
	memacct.Add(memacct.Profile, 4*int64(len(k.Feat))+4*int64(len(k.HistScores)))
	return k
}

// Beta is the profile's β.
func (p *Profile) Beta() float64 { return p.Meta.Beta }

// ComputeBeta is OUTRE Eq. 3, (tSample/sampled) / (tGather/gathered), or 1
// when any input is not positive.
func ComputeBeta(tSample float64, sampled int64, tGather float64, gathered int64) float64 {
	if tSample <= 0 || tGather <= 0 || sampled <= 0 || gathered <= 0 {
		return 1
	}
	return (tSample / float64(sampled)) / (tGather / float64(gathered))
}

// OfDataset returns nil when the profile described by m was made on d
// (its DatasetChecksum), else an error wrapping ErrMismatch that names
// both.
func (m *Meta) OfDataset(d *storage.Dataset) error {
	if sum := DatasetChecksum(d); sum != m.DatasetChecksum {
		return fmt.Errorf("%w: profile %s was made on dataset %s, %s holds %s: run 'ssdgnn profile' again",
			ErrMismatch, m.Name, m.DatasetChecksum, d.Dir(), sum)
	}
	return nil
}

// OfPartition reports, as an ErrMismatch, a partition-batch profile whose
// partitioning (m.Partition) now assigns the nodes otherwise than when it
// was profiled: part is that partitioning's current assignment, nil when
// it is gone. The profile's counts are then those of other batches. A
// partition-batch profile written before part_checksum was recorded
// cannot be checked and is a mismatch too. A profile of random batches
// matches any. Reusable (train) and plan both judge by it.
func (m *Meta) OfPartition(part []int32) error {
	if m.Partition == "" {
		return nil
	}
	if m.PartChecksum == "" {
		return fmt.Errorf("%w: profile %s was made on partitioning %q before its assignment was recorded, so it cannot be matched: run 'ssdgnn profile' again", ErrMismatch, m.Name, m.Partition)
	}
	if part == nil {
		return fmt.Errorf("%w: profile %s was made on partitioning %q, which is gone: run 'ssdgnn profile' again", ErrMismatch, m.Name, m.Partition)
	}
	if sum := PartChecksum(part); sum != m.PartChecksum {
		return fmt.Errorf("%w: profile %s was made on partitioning %q as it was (assignment %s); its assignment is %s now, so the profile counts other batches: run 'ssdgnn profile' again",
			ErrMismatch, m.Name, m.Partition, m.PartChecksum, sum)
	}
	return nil
}

// DatasetChecksum identifies a dataset by the checksums of its files.
func DatasetChecksum(d *storage.Dataset) string {
	h := xxhash.New()
	for _, f := range d.Manifest().Files {
		fmt.Fprintf(h, "%s=%s;", f.Name, f.Checksum)
	}
	return storage.FormatChecksum(h.Sum64())
}

type memberser interface{ Members(p int) []int64 }

// RunProfile runs the profiling epoch(s) over d (OUTRE §4.4): sampling,
// then gathering with the feature and history caches disabled and the
// neighbour cache as configured. parts is needed in ModePartition.
//
// Epoch 0 is sampled twice: once with all workers and nothing else
// running, timed as t_sample, and once more with one sampling worker to
// collect the counts and gather every batch's input rows from storage,
// each Gather timed on its own as t_gather. Batches depend only on (Seed,
// epoch, index), so both passes see the same batches. Epochs 1..K−1 only
// add counts.
func RunProfile(ctx context.Context, d *storage.Dataset, parts sample.Partitions, opts *ProfileOptions) (*Profile, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if o.Staleness == 0 {
		o.Staleness = histcache.EpochStaleness(int64(len(d.TrainIdx())), o.BatchSize, o.ReuseDepth)
	}
	n := d.NumNodes()
	if n > math.MaxUint32 {
		// The validity model's appearance log holds ids as uint32.
		return nil, fmt.Errorf("%w: %d nodes, the profile supports at most %d", ErrInvalidOptions, n, uint64(math.MaxUint32))
	}
	an := &analyzer{}
	if o.NeighborCache != nil {
		an.global = o.NeighborCache.Contains
	}
	part, err := profilePart(d, parts, &o)
	if err != nil {
		return nil, err
	}
	so := o.samplerOptions()
	fast, err := sample.New(d, parts, &so)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	defer fast.Close()
	so1 := so
	so1.Workers = 1
	slow, err := sample.New(d, parts, &so1)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	defer slow.Close()
	eff := fast.Options()
	an.lists = func(v int64) idList { return d.Neighbors(v) }
	an.hop1Fanout = eff.Fanouts[len(eff.Fanouts)-1]

	idBytes := int64(4)
	if d.Indices32() == nil {
		idBytes = 8
	}
	m := Meta{Format: "ssdgnn-profile", Version: 1, SamplePlan: sample.PlanVersion, Name: o.Name, Dataset: d.Manifest().Name,
		DatasetChecksum: DatasetChecksum(d), NumNodes: n, NumEdges: d.NumEdges(), FeatDim: d.FeatDim(),
		FeatRowBytes: d.FeatRowBytes(), IDBytes: idBytes, Mode: string(eff.Mode), Fanouts: eff.Fanouts,
		BatchSize: eff.BatchSize, PartsPerBatch: eff.PartsPerBatch, Partition: o.Partition, Seed: eff.Seed,
		PresampleEpochs: o.PresampleEpochs, RunID: newRunID()}
	if eff.Mode != sample.ModePartition {
		m.PartsPerBatch = 0
		m.Partition = ""
	} else {
		m.PartChecksum = PartChecksum(part)
	}
	if o.NeighborCache != nil {
		st := o.NeighborCache.Stats()
		m.NeighborCacheBytes, m.NeighborCachePolicy = st.Bytes(), string(st.Policy)
	}

	// Pass A: the timed Sample stage.
	start := time.Now()
	if err := eachBatch(ctx, fast, 0, o.Progress, "profile: sample", func(*sample.Batch, *sample.Plan) error { return nil }); err != nil {
		return nil, err
	}
	m.SampleSeconds = time.Since(start).Seconds()

	// Pass B: counts and the timed Gather stage (caches disabled).
	fc, err := featurecache.New(ctx, d, 0, o.gatherOptions())
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	defer fc.Close()
	c := newCounters(n)
	rc, err := newReadCounter(fc, c.featSingle)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	defer rc.close()
	block := featureBlockOn(d, parts, &o) && part != nil
	// The counters are counted while the profiling epoch runs; the
	// returned Profile's arrays are the caller's (ForTraining counts what
	// training keeps).
	memacct.Add(memacct.Profile, counterBytes(n))
	defer memacct.Add(memacct.Profile, -counterBytes(n))
	c.staleness, c.depth = o.Staleness, o.ReuseDepth
	c.shuffle, c.seed = true, eff.Seed
	m.Staleness, m.ReuseDepth = o.Staleness, o.ReuseDepth
	var buf []byte
	defer func() { memacct.Add(memacct.BatchBuffers, -int64(cap(buf))) }()
	rb := d.FeatRowBytes()
	macro := newMacroSet(parts)
	if part != nil {
		an.dynamic = func(v int64) bool { return macro.In[part[v]] }
		if block {
			an.block = an.dynamic
		}
	}
	for epoch := 0; epoch < o.PresampleEpochs; epoch++ {
		s := fast
		if epoch == 0 {
			s = slow
		}
		c.startEpoch()
		err := eachBatch(ctx, s, epoch, o.Progress, fmt.Sprintf("profile: epoch %d", epoch), func(b *sample.Batch, plan *sample.Plan) error {
			macro.see(b, plan)
			tot := an.add(b, c)
			rc.add(b.Nodes(), an.block)
			if epoch != 0 {
				return nil
			}
			m.Batches++
			m.SampledNeighbors += tot.sampled
			m.GatheredRows += tot.gathered
			m.MaxBatchRows = max(m.MaxBatchRows, tot.gathered)
			if tot.gathered > 0 && len(b.Blocks) > 0 {
				m.MaxDstPerRow = max(m.MaxDstPerRow, float64(b.Blocks[0].NumDst)/float64(tot.gathered))
			}
			m.MaxDynamicBytes = max(m.MaxDynamicBytes, b.DynamicBytes)
			m.Lookups.Add(b.Stats)
			// Gathered in chunks of at most profileGatherBytes, so the
			// profiling epoch holds a bounded buffer, not a batch's
			// input rows (hundreds of MB at batch 1000).
			ids := b.Nodes()
			chunk := int(ProfileGatherRows(int64(len(ids)), rb))
			t0 := time.Now()
			for lo := 0; lo < len(ids); lo += chunk {
				hi := min(lo+chunk, len(ids))
				if int64(cap(buf)) < int64(hi-lo)*rb {
					memacct.Add(memacct.BatchBuffers, -int64(cap(buf)))
					buf = make([]byte, int64(hi-lo)*rb)
					memacct.Add(memacct.BatchBuffers, int64(cap(buf)))
				}
				if err := fc.Gather(ids[lo:hi], buf[:int64(hi-lo)*rb]); err != nil {
					return fmt.Errorf("planner: gather: %w", err)
				}
			}
			m.GatherSeconds += time.Since(t0).Seconds()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// The held-out epoch: sampled only, its input rows counted as Feat
	// counts them, into FeatHeldOut.
	m.HeldOutEpoch = o.PresampleEpochs
	err = eachBatch(ctx, fast, m.HeldOutEpoch, o.Progress, "profile: held-out epoch", func(b *sample.Batch, plan *sample.Plan) error {
		macro.see(b, plan)
		countFeat(c.featHeld, b.Nodes(), an.block)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.steady(c.iter); err != nil {
		return nil, err
	}
	m.Iterations, m.HistRounds, m.HistModel = c.iter, HistRounds, histModel
	m.Beta = ComputeBeta(m.SampleSeconds, m.SampledNeighbors, m.GatherSeconds, m.GatheredRows)
	m.Reads = &rc.m
	p := &Profile{Meta: m, Feat: c.feat, FeatSingle: c.featSingle, FeatHeldOut: c.featHeld, HistSample: c.histSample, HistGather: c.histGather, Nbr: c.nbr,
		HistAppear: c.histAppear, HistHits: c.histHits}
	p.Meta.SumFeat, p.Meta.SumHistSample, p.Meta.SumHistGather, p.Meta.SumNbr = sum(p.Feat), sum(p.HistSample), sum(p.HistGather), sum(p.Nbr)
	p.Meta.SumHistAppear, p.Meta.SumHistHits, p.Meta.SumFeatSingle = sum(p.HistAppear), sum(p.HistHits), sum(p.FeatSingle)
	p.Meta.SumFeatHeldOut = sum(p.FeatHeldOut)
	if o.Logger != nil {
		o.Logger.Info("profile done", "name", m.Name, "batches", m.Batches, "beta", m.Beta,
			"sample_s", m.SampleSeconds, "gather_s", m.GatherSeconds)
	}
	return p, nil
}

// profilePart is the node → partition assignment RunProfile needs in
// ModePartition (o.Part, or derived from parts' members); nil otherwise.
func profilePart(d *storage.Dataset, parts sample.Partitions, o *ProfileOptions) ([]int32, error) {
	if o.Mode != sample.ModePartition {
		return o.Part, nil
	}
	n := d.NumNodes()
	if parts == nil {
		return nil, fmt.Errorf("%w: partition mode needs partitions", ErrInvalidOptions)
	}
	part := o.Part
	if part == nil {
		m, ok := parts.(memberser)
		if !ok {
			return nil, fmt.Errorf("%w: partition mode needs ProfileOptions.Part", ErrInvalidOptions)
		}
		part = make([]int32, n)
		for q := 0; q < parts.K(); q++ {
			for _, v := range m.Members(q) {
				part[v] = int32(q)
			}
		}
	}
	if int64(len(part)) != n {
		return nil, fmt.Errorf("%w: Part has %d entries, dataset %d nodes", ErrInvalidOptions, len(part), n)
	}
	return part, nil
}

// gatherOptions is the cache-less feature cache the profile gathers and
// models reads with: o.Gather's read options.
func (o *ProfileOptions) gatherOptions() *featurecache.Options {
	var fo featurecache.Options
	if g := o.Gather; g != nil {
		fo = featurecache.Options{Mode: g.Mode, IODepth: g.IODepth, CoalesceGap: g.CoalesceGap,
			MaxReadAmplification: g.MaxReadAmplification, MaxReadBytes: g.MaxReadBytes, IO: g.IO}
	}
	fo.Policy = featurecache.PolicyDegree
	return &fo
}

func parts0K(p sample.Partitions) int {
	if p == nil {
		return 0
	}
	return p.K()
}

func sum(a []uint32) uint64 {
	var s uint64
	for _, x := range a {
		s += uint64(x)
	}
	return s
}

// ID names the run that made p (Meta.RunID): two profiles saved under one
// name by different runs differ, the same profile read back does not. ""
// for a profile that predates it.
func (p *Profile) ID() string { return p.Meta.RunID }

// newRunID is a fresh profiling run's RunID: 64 random bits in hex. It
// identifies the run and feeds no computation, so profiles stay a
// function of their seed.
func newRunID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ""
	}
	return hex.EncodeToString(b[:])
}
