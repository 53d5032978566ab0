package kernels

import (
	"slices"
	"testing"
)

// TestBySource: the transpose lists every edge once, under its source, in
// destination order, with its position in Indices; scratch given or not.
func TestBySource(t *testing.T) {
	// 3 destinations, 5 sources; source 4 feeds nothing, destination 1
	// has no edges, source 0 appears twice for destination 2.
	b := &Block{NumDst: 3, NumSrc: 5, Indptr: []int32{0, 3, 3, 6}, Indices: []int32{3, 0, 1, 0, 2, 0}}
	for _, next := range [][]int32{nil, make([]int32, b.NumSrc)} {
		tOff, tDst, tEdge := make([]int32, b.NumSrc+1), make([]int32, 6), make([]int32, 6)
		b.BySource(tOff, tDst, tEdge, next)
		if want := []int32{0, 3, 4, 5, 6, 6}; !slices.Equal(tOff, want) {
			t.Fatalf("tOff %v, want %v", tOff, want)
		}
		if want := []int32{0, 2, 2, 0, 2, 0}; !slices.Equal(tDst, want) {
			t.Errorf("tDst %v, want %v", tDst, want)
		}
		if want := []int32{1, 3, 5, 2, 4, 0}; !slices.Equal(tEdge, want) {
			t.Errorf("tEdge %v, want %v", tEdge, want)
		}
		for p, e := range tEdge {
			if b.Indices[e] < 0 || tOff[b.Indices[e]] > int32(p) || int32(p) >= tOff[b.Indices[e]+1] {
				t.Errorf("edge %d listed at %d, outside its source's range", e, p)
			}
		}
	}
}
