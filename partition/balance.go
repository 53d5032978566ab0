package partition

import "math"

// Balance. The promise (Options.Epsilon, --epsilon) is about the final
// parts: every one holds at most ceil((1+ε)·n/k) of the n nodes and
// ceil((1+ε)·t/k) of the t training nodes (finalCaps). A two-level run
// keeps it by construction:
//
//   - level 1 caps its k1 parts with the slack ε1 = sqrt(1+ε)−1, so that
//     (1+ε1)² = 1+ε, and never above k2 final caps (level1Caps);
//   - level 2 caps every part at the final cap itself (level2Caps), so a
//     first-level part smaller than the largest leaves its second-level
//     parts more room, the largest leaves them about ε1;
//   - refinement moves a node only into a part below the final caps
//     (refineCaps).
//
// Each level is feasible: k1 level-1 caps hold n because k·ceil((1+ε)·n/k)
// ≥ n, and the k2 final caps of a first-level part hold the at most k2
// final caps it was given. Before 2026-11-27 each level had the whole ε, so
// the final parts reached (1+ε)² × the average (1.22× at ε = 0.1), and
// refinement enforced that looser bound even on a one-level stream that
// had kept the tighter one.

// finalCaps are the caps every final part keeps: ceil((1+ε)·n/k) nodes
// and ceil((1+ε)·t/k) training nodes.
func finalCaps(n, t int64, k int, eps float64) (capN, capT int64) {
	return partCap(n, k, eps), partCap(t, k, eps)
}

// levelEps is the slack of level 1 when it is followed by a second level
// of k2 > 1 parts per first-level part: sqrt(1+ε)−1; with one level (k2
// == 1), ε itself.
func levelEps(eps float64, k2 int) float64 {
	if k2 == 1 {
		return eps
	}
	return math.Sqrt(1+eps) - 1
}

// level1Caps are the caps of the k1 = k/k2 first-level parts of n nodes
// and t training nodes: ceil((1+ε1)·n/k1), at most k2 final caps (and
// likewise for training nodes).
func level1Caps(n, t int64, k, k2 int, eps float64) (capN, capT int64) {
	k1 := k / k2
	fn, ft := finalCaps(n, t, k, eps)
	e1 := levelEps(eps, k2)
	return min(partCap(n, k1, e1), int64(k2)*fn), min(partCap(t, k1, e1), int64(k2)*ft)
}

// level2Caps are the caps of the k2 second-level parts of a first-level
// part of nP nodes and tP training nodes, out of n and t over k final
// parts: the final caps (no more than the part holds).
func level2Caps(nP, tP, n, t int64, k int, eps float64) (capN, capT int64) {
	fn, ft := finalCaps(n, t, k, eps)
	return min(nP, fn), min(tP, ft)
}
