package planner

import (
	"cmp"
	"math"
	"slices"

	"github.com/ssdgnn/ssdgnn/internal/topk"
)

// cacheRanking is the scores the caches select their nodes by: Feat, the
// feature cache's counts (featScores: the profile's saved_IO_feat,
// weighted by the read model where the profile has one), and Hist, the
// history cache's candidate scores (HistScore for β, as float32). It is
// the one rule both sides use: Plan orders its predictions by it (rank)
// and BuildCaches hands the same arrays to featurecache.New and
// histcache.New, which take the nodes of largest positive score, ties
// towards the smaller id; so the cache built is the cache planned.
type cacheRanking struct {
	Feat []uint32
	Hist []float32
}

// ranking returns p's ranking for β: Hist is HistScore of every node for
// beta, or, in a profile without the arrays it derives from (ForTraining's,
// which computed them for the plan's β), p.HistScores.
func (p *Profile) ranking(beta float64) cacheRanking {
	r := cacheRanking{Feat: p.featScores(), Hist: p.HistScores}
	if p.HistSample != nil {
		r.Hist = p.ComputeHistScores(beta)
	}
	return r
}

// rank returns the first k nodes a cache selecting by scores admits, in
// order: positive scores only (never NaN), largest first, ties towards the
// smaller id. The selection is internal/topk's, which featurecache and
// histcache select by, so a cache of capacity c <= k holds exactly the
// first c of rank (all of it when shorter). Its memory is O(k), not
// O(len(scores)): Plan asks only for as many nodes as its budget could
// ever hold.
func rank[S cmp.Ordered](scores []S, k int64) []int64 {
	order := topk.Slice(scores, k)
	slices.SortFunc(order, func(a, b int64) int {
		if c := cmp.Compare(scores[b], scores[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// costed reports whether p has the read model Plan prices reads with.
func (p *Profile) costed() bool {
	return p.FeatSingle != nil && len(p.FeatSingle) == len(p.Feat) && p.Meta.Reads.usable() && p.Meta.FeatRowBytes > 0
}

// featScores is the feature cache's selection order. Without the read
// model it is Feat. With it, Feat + x·FeatSingle, rounded and saturating,
// where x = ReadModel.extraUnits: each node's read cost in units of a row
// read inside a merged read, so a row that the gather reads on its own
// (a whole random read) outranks one that rides along in a merged read
// as often. It takes 4·N bytes then, freed with the ranking.
func (p *Profile) featScores() []uint32 {
	if !p.costed() {
		return p.Feat
	}
	x := p.Meta.Reads.extraUnits(p.Meta.FeatRowBytes)
	s := make([]uint32, len(p.Feat))
	for i, f := range p.Feat {
		one := p.single(int64(i))
		s[i] = uint32(min(math.Round(float64(f)+x*float64(one)), math.MaxUint32))
	}
	return s
}

// single is FeatSingle[v], at most Feat[v] (both saturate
// independently).
func (p *Profile) single(v int64) uint32 { return min(p.FeatSingle[v], p.Feat[v]) }
