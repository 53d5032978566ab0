// Package topk selects the k nodes of largest score, the operation behind
// every cache's candidate selection (feature, neighbour and history caches,
// and the planner).
//
// Selection is deterministic: ties go to the smaller node id, nodes whose
// score is not positive (including NaN) are never selected, and the result
// is in ascending id order. It keeps a heap of k entries: O(n log k) time
// and O(k) memory, so it works on node counts far above what a full sort
// could hold.
package topk

import (
	"cmp"
	"container/heap"
	"slices"
)

// Select returns the at most k ids in [0, n) with the largest positive
// score(v), ties towards the smaller id, in ascending id order.
func Select[S cmp.Ordered](n, k int64, score func(v int64) S) []int64 {
	return SelectTies(n, k, score, nil)
}

// SelectTies is Select with ties towards the smaller tie(v) (nil: v):
// given a relabelled dataset's original ids, it selects the nodes Select
// selects on the original, whatever the numbering. tie must be one to one.
func SelectTies[S cmp.Ordered](n, k int64, score func(v int64) S, tie func(v int64) int64) []int64 {
	if k <= 0 {
		return nil
	}
	if tie == nil {
		tie = func(v int64) int64 { return v }
	}
	var zero S
	h := &worstFirst[S]{}
	for v := range n {
		s := score(v)
		if !(s > zero) { // also rejects NaN
			continue
		}
		if int64(len(h.e)) < k {
			heap.Push(h, entry[S]{s, v, tie(v)})
			continue
		}
		// A node displaces the worst entry with a larger score, or an
		// equal one and a smaller tie key.
		if w := h.e[0]; s > w.s || (s == w.s && tie(v) < w.t) {
			h.e[0] = entry[S]{s, v, tie(v)}
			heap.Fix(h, 0)
		}
	}
	out := make([]int64, len(h.e))
	for i, e := range h.e {
		out[i] = e.v
	}
	slices.Sort(out)
	return out
}

// Slice is Select over a score slice.
func Slice[S cmp.Ordered](scores []S, k int64) []int64 {
	return Select(int64(len(scores)), k, func(v int64) S { return scores[v] })
}

type entry[S cmp.Ordered] struct {
	s S
	v int64
	t int64 // tie key
}

// worstFirst is a heap whose root is the worst entry: the smallest score
// and, among equals, the largest tie key.
type worstFirst[S cmp.Ordered] struct{ e []entry[S] }

func (h *worstFirst[S]) Len() int { return len(h.e) }
func (h *worstFirst[S]) Less(i, j int) bool {
	if h.e[i].s != h.e[j].s {
		return h.e[i].s < h.e[j].s
	}
	return h.e[i].t > h.e[j].t
}
func (h *worstFirst[S]) Swap(i, j int) { h.e[i], h.e[j] = h.e[j], h.e[i] }
func (h *worstFirst[S]) Push(x any)    { h.e = append(h.e, x.(entry[S])) }
func (h *worstFirst[S]) Pop() any {
	x := h.e[len(h.e)-1]
	h.e = h.e[:len(h.e)-1]
	return x
}
