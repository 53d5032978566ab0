package planner

import (
	"context"
	"fmt"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// BuildOptions configures BuildCaches: how the budget is split among the
// feature, history and neighbour caches (a plan, explicit sizes or the
// defaults) and what ranks their nodes (a profile, else the degree).
type BuildOptions struct {
	// Plan sizes every cache whose byte field is 0 (nil: no plan).
	Plan *PlanResult
	// Profile ranks the caches' nodes by the rule Plan predicted with:
	// Feat is the feature cache's counts under featurecache.PolicyAuto
	// and PolicyProfiled, and the history candidates are the nodes of
	// largest HistScore (HistScores in a ForTraining profile). nil: both
	// caches select by degree. BuildCaches reads it only while building.
	Profile *Profile
	// FeatureBytes, HistoryBytes and NeighborBytes are the caches'
	// budgets, tables included: a positive value overrides the plan's, a
	// negative one means no cache even with a plan, and 0 takes the
	// plan's. Without a plan 0 means no feature or neighbour cache and a
	// history cache with room for sample.DefaultHistFrac of the nodes.
	FeatureBytes, HistoryBytes, NeighborBytes int64
	// HistWidth is the width of a historical embedding (float32); below
	// 1 there is no history cache.
	HistWidth int
	// Feature configures the feature cache (nil: the defaults); Counts
	// is taken from Profile, never from here.
	Feature *featurecache.Options
	// History configures the history cache (nil: the defaults).
	History *histcache.Options
	// Cross, when set, builds the neighbour cache with
	// neighborcache.PolicyCross over these counts, as PlanOptions.Cross
	// models it; otherwise by degree.
	Cross []int32
}

// Sizes are the budgets BuildCaches hands the caches' constructors,
// resolved from BuildOptions: explicit sizes, then the plan's, then the
// defaults.
type Sizes struct {
	Feature, History, Neighbor int64
	// HistoryOn says a history cache is built (History is its budget).
	HistoryOn bool
}

// CacheBytes is the caches' memory, tables included.
type CacheBytes struct {
	Feature, History, Neighbor int64
}

// TableBytes is the memory the caches' address tables need over n nodes
// whatever they hold: the feature cache's (featurecache.BytesFor of no
// rows) and, with history, the history cache's slot table
// (histcache.BytesFor of no candidates). Plan refuses a budget below it;
// the neighbour cache is not counted, as a budget below its table gives
// an empty cache.
func TableBytes(n int64, history bool) int64 {
	t := featurecache.BytesFor(0, 0, n)
	if history {
		t += histcache.BytesFor(n, 0, 1)
	}
	return t
}

// defaultHistBytes is the history cache's budget without a plan or an
// explicit size: room for sample.DefaultHistFrac of the n nodes.
func defaultHistBytes(n int64, width int) int64 {
	return histcache.BytesFor(n, int64(float64(n)*sample.DefaultHistFrac), width)
}

// pick resolves one cache's budget: an explicit size, else the plan's.
func pick(explicit, planned int64, hasPlan bool) int64 {
	switch {
	case explicit > 0:
		return explicit
	case explicit < 0 || !hasPlan:
		return 0
	}
	return planned
}

// Sizes resolves the caches' budgets for n nodes.
func (o *BuildOptions) Sizes(n int64) Sizes {
	pl := o.Plan
	var s Sizes
	var pf, ph, pn int64
	if pl != nil {
		pf, ph, pn = pl.Feature.BudgetBytes, pl.History.BudgetBytes, pl.Neighbor.BudgetBytes
	}
	s.Feature = pick(o.FeatureBytes, pf, pl != nil)
	s.Neighbor = pick(o.NeighborBytes, pn, pl != nil)
	s.HistoryOn = o.HistWidth >= 1 && o.HistoryBytes >= 0
	if s.HistoryOn {
		switch {
		case o.HistoryBytes > 0:
			s.History = o.HistoryBytes
		case pl != nil && pl.History.Entries > 0:
			s.History = ph
		case pl != nil:
			s.HistoryOn = false // the plan gives history nothing
		default:
			s.History = defaultHistBytes(n, o.HistWidth)
		}
	}
	return s
}

// Estimate is the most memory the caches BuildCaches builds over d with o
// take, tables included, known before anything is built. The static
// feature cache and the history cache take at most their BytesFor at
// their capacity (fewer when fewer nodes have a positive score); the
// dynamic feature cache and the neighbour cache at most their budgets.
func (o *BuildOptions) Estimate(d *storage.Dataset) CacheBytes {
	n := d.NumNodes()
	s := o.Sizes(n)
	var b CacheBytes
	if s.Feature > 0 {
		if o.Feature != nil && o.Feature.Policy == featurecache.PolicyDynamic {
			b.Feature = s.Feature
		} else {
			rb := d.FeatRowBytes()
			b.Feature = featurecache.BytesFor(featurecache.CapacityFor(s.Feature, rb, n), rb, n)
			if s.Feature < featurecache.BytesFor(0, rb, n) {
				b.Feature = s.Feature // featurecache.New refuses it
			}
		}
	}
	if s.HistoryOn {
		b.History = histcache.BytesFor(n, histcache.CapacityFor(s.History, n, o.HistWidth), o.HistWidth)
	}
	// The neighbour cache allocates what it selects: at most every list.
	whole := neighborcache.FixedTableBytes(n) + 8*n + int64(storage.IndicesDType(n).Size())*d.NumEdges()
	b.Neighbor = min(s.Neighbor, whole)
	return b
}

// Caches are the caches BuildCaches built. Close releases them.
type Caches struct {
	// Feature is never nil (a zero budget caches nothing and reads every
	// row from storage).
	Feature *featurecache.Cache
	// History is nil when there is no history cache; Neighbor is nil
	// when there is no neighbour cache.
	History  *histcache.Cache
	Neighbor *neighborcache.Cache
	// Counted is what the caches' constructors counted in memacct as they
	// allocated (its FeatureCache, HistoryCache and NeighborCache
	// purposes): their real size, to check against a budget.
	Counted CacheBytes
}

// Close releases the caches; c must not be used afterwards.
func (c *Caches) Close() error {
	if c == nil {
		return nil
	}
	var err error
	if c.Feature != nil {
		err = c.Feature.Close()
	}
	if c.History != nil {
		c.History.Close()
	}
	c.Neighbor.Close()
	*c = Caches{}
	return err
}

// BuildCaches builds the feature, history and neighbour caches over d,
// sized by o.Sizes and ranked by o.Profile: the feature cache selects by
// the profile's counts under featurecache.PolicyAuto or PolicyProfiled,
// the history cache by the scores Plan ranked with (β from o.Plan, else
// the profile's), the neighbour cache as Plan modelled it (PolicyCross
// with o.Cross). Without a profile both select by degree. A plan or
// profile for another node count is ErrMismatch. Counted is measured from
// memacct around the constructors, so it is exact only while nothing else
// allocates under those purposes. On error nothing stays built.
func BuildCaches(ctx context.Context, d *storage.Dataset, o *BuildOptions) (_ *Caches, err error) {
	if o == nil {
		o = &BuildOptions{}
	}
	n := d.NumNodes()
	if o.Plan != nil && o.Plan.NumNodes > 0 && o.Plan.NumNodes != n {
		return nil, fmt.Errorf("%w: plan for %d nodes, the dataset has %d", ErrMismatch, o.Plan.NumNodes, n)
	}
	s := o.Sizes(n)
	fo := featurecache.Options{}
	if o.Feature != nil {
		fo = *o.Feature
	}
	fo.Counts = nil
	var hist []float32
	if p := o.Profile; p != nil {
		beta := p.Meta.Beta
		if o.Plan != nil && o.Plan.Beta > 0 {
			beta = o.Plan.Beta
		}
		r := cacheRanking{Feat: p.featScores()}
		if s.HistoryOn {
			r = p.ranking(beta) // the history scores take 4·N bytes: only when used
		}
		if fo.Policy == featurecache.PolicyAuto || fo.Policy == featurecache.PolicyProfiled {
			fo.Counts = r.Feat
		}
		hist = r.Hist
		if s.HistoryOn && int64(len(hist)) != n {
			return nil, fmt.Errorf("%w: profile %q has %d history scores, the dataset %d nodes", ErrMismatch, p.Meta.Name, len(hist), n)
		}
	}
	if s.HistoryOn && hist == nil {
		hist = make([]float32, n)
		ip := d.Indptr()
		for v := range n {
			hist[v] = float32(ip[v+1] - ip[v])
		}
	}

	c := &Caches{}
	defer func() {
		if err != nil {
			_ = c.Close() // err is what the caller needs
		}
	}()
	before := memacct.Read()
	if s.Neighbor > 0 {
		no := &neighborcache.Options{Budget: s.Neighbor}
		if o.Cross != nil {
			no.Policy, no.Cross = neighborcache.PolicyCross, o.Cross
		}
		if c.Neighbor, err = neighborcache.Build(d, no); err != nil {
			return nil, err
		}
	}
	if c.Feature, err = featurecache.New(ctx, d, s.Feature, &fo); err != nil {
		return nil, err
	}
	if s.HistoryOn {
		hc := histcache.Config{Scores: hist, Hidden: o.HistWidth, BudgetBytes: s.History}
		if m := d.IDMap(); m != nil {
			hc.Ties = m.OrigIDs() // equal scores (degrees) pick the original's nodes
		}
		if c.History, err = histcache.New(hc, o.History); err != nil {
			return nil, err
		}
	}
	after := memacct.Read()
	delta := func(p memacct.Purpose) int64 { return after.Bytes[p] - before.Bytes[p] }
	c.Counted = CacheBytes{Feature: delta(memacct.FeatureCache), History: delta(memacct.HistoryCache), Neighbor: delta(memacct.NeighborCache)}
	return c, nil
}
