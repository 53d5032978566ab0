package planner

import (
	"math"
	"slices"
	"testing"
)

// TestRankHand: the admission order on a hand-made score array.
func TestRankHand(t *testing.T) {
	got := rank([]float32{1, 3, 3, 0, 2, float32(math.NaN()), -1, 3}, 8)
	if want := []int64{1, 2, 7, 4, 0}; !slices.Equal(got, want) {
		t.Errorf("rank = %v, want %v (largest first, ties to the smaller id, no zero, NaN or negative)", got, want)
	}
	// The first k only: a prefix of the whole order.
	if got := rank([]float32{1, 3, 3, 0, 2, float32(math.NaN()), -1, 3}, 3); !slices.Equal(got, []int64{1, 2, 7}) {
		t.Errorf("rank k=3 = %v, want [1 2 7]", got)
	}
	if got := rank([]uint32{0, 0}, 2); len(got) != 0 {
		t.Errorf("rank of zeros = %v", got)
	}
}
