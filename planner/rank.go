package planner

import (
	"cmp"
	"slices"
)

// cacheRanking is the scores the caches select their nodes by: Feat, the
// feature cache's counts (the profile's saved_IO_feat), and Hist, the
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
	r := cacheRanking{Feat: p.Feat, Hist: p.HistScores}
	if p.HistSample != nil {
		r.Hist = p.ComputeHistScores(beta)
	}
	return r
}

// rank returns the nodes a cache selecting by scores admits, in order:
// positive scores only (never NaN), largest first, ties towards the
// smaller id. That is internal/topk's rule, which featurecache and
// histcache select by, so a cache of capacity k holds exactly the first k
// of rank (all of it when shorter).
func rank[S cmp.Ordered](scores []S) []int64 {
	var zero S
	var order []int64
	for v, s := range scores {
		if s > zero {
			order = append(order, int64(v))
		}
	}
	slices.SortFunc(order, func(a, b int64) int {
		if c := cmp.Compare(scores[b], scores[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}
