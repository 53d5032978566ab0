package featurecache

import (
	"container/heap"
	"slices"
)

// topK returns the at most k nodes of [0, n) with the largest non-zero
// score, ties towards the smaller id, in ascending id order. It keeps a
// min-heap of k entries: O(n log k) time, O(k) memory.
func topK(n, k int64, score func(v int64) uint64) []int64 {
	if k <= 0 {
		return nil
	}
	h := &minHeap{}
	for v := range n {
		s := score(v)
		if s == 0 {
			continue
		}
		if int64(len(h.e)) < k {
			heap.Push(h, entry{s, v})
			continue
		}
		// Scanning in ascending id order, a later node replaces the
		// minimum only with a strictly larger score.
		if s > h.e[0].score {
			h.e[0] = entry{s, v}
			heap.Fix(h, 0)
		}
	}
	out := make([]int64, len(h.e))
	for i, e := range h.e {
		out[i] = e.node
	}
	slices.Sort(out)
	return out
}

type entry struct {
	score uint64
	node  int64
}

// minHeap orders by score, then by descending id, so that its root is the
// worst entry: the smallest score and, among equals, the largest id.
type minHeap struct{ e []entry }

func (h *minHeap) Len() int { return len(h.e) }
func (h *minHeap) Less(i, j int) bool {
	if h.e[i].score != h.e[j].score {
		return h.e[i].score < h.e[j].score
	}
	return h.e[i].node > h.e[j].node
}
func (h *minHeap) Swap(i, j int) { h.e[i], h.e[j] = h.e[j], h.e[i] }
func (h *minHeap) Push(x any)    { h.e = append(h.e, x.(entry)) }
func (h *minHeap) Pop() any {
	x := h.e[len(h.e)-1]
	h.e = h.e[:len(h.e)-1]
	return x
}
