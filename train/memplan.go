package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/planner"
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
// planner.Plan with MemBytes and Hidden = the model's layer-(L−1) width
// (history off: -1), and writes plan.json beside the profile. A budget that
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
			mp.MemBytes = mp.Plan.Memory.MemBytes
		}
		return mp, nil
	}
	name := mo.ProfileName
	if name == "" {
		name = DefaultProfileName
	}
	p, err := planner.RunProfile(ctx, d, o.Partitions, &planner.ProfileOptions{Name: name, Fanouts: o.Fanouts, BatchSize: o.BatchSize,
		Mode: o.Selection, PartsPerBatch: o.PartsPerBatch, Seed: o.Seed, Workers: o.Workers, Source: o.Source,
		Part: mo.Part, Partition: mo.Partition, Progress: o.Progress, Logger: o.Logger})
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
	res, err := planner.Plan(p, &planner.PlanOptions{MemBytes: mo.MemBytes, Hidden: hidden, Indptr: d.Indptr(), Cross: mo.Cross})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(planner.ProfilePath(d.Dir(), name), "plan.json")
	if err := res.Save(path); err != nil {
		return nil, err
	}
	o.Logger.Info("memory plan", "path", path, "alpha", res.Alpha, "feature_bytes", res.Feature.Bytes(),
		"history_bytes", res.History.Bytes(), "neighbor_bytes", res.Neighbor.Bytes())
	return &MemPlan{Plan: res, Profile: p, PlanPath: path, Created: true, MemBytes: mo.MemBytes}, nil
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
			mp.Profile = p
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

// MemoryUse is the caches' memory, tables included.
type MemoryUse struct {
	FeatureBytes  int64 `json:"feature_bytes"`
	HistoryBytes  int64 `json:"history_bytes"`
	NeighborBytes int64 `json:"neighbor_bytes"`
	TotalBytes    int64 `json:"total_bytes"`
	// LimitBytes is Options.MemBytes (0: none).
	LimitBytes int64 `json:"limit_bytes,omitempty"`
}

func (m *MemoryUse) sum() { m.TotalBytes = m.FeatureBytes + m.HistoryBytes + m.NeighborBytes }

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
	return fmt.Errorf("%w: %s: caches need %d bytes (feature %d, history %d, neighbour %d, tables included) > --mem %d",
		ErrBudget, when, m.TotalBytes, m.FeatureBytes, m.HistoryBytes, m.NeighborBytes, m.LimitBytes)
}
