package partition

import "math"

// tourney is a tournament (segment) tree over k values that answers "which
// index has the smallest value" in O(1) and updates in O(log k). Ties go to
// the lower index; +Inf values are never returned.
type tourney struct {
	leaves int
	val    []float64
	win    []int32 // win[i] = index of the winning leaf under node i; -1 none
}

func newTourney(k int) *tourney {
	n := 1
	for n < k {
		n <<= 1
	}
	t := &tourney{leaves: n, val: make([]float64, k), win: make([]int32, 2*n)}
	for i := range t.win {
		t.win[i] = -1
	}
	for i := range k {
		t.win[n+i] = int32(i)
	}
	for i := n - 1; i >= 1; i-- {
		t.win[i] = t.better(t.win[2*i], t.win[2*i+1])
	}
	return t
}

func (t *tourney) better(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	case t.val[b] < t.val[a]:
		return b
	}
	return a // a < b by construction, so ties keep the lower index
}

// set changes value i.
func (t *tourney) set(i int, v float64) {
	t.val[i] = v
	n := t.leaves + i
	if math.IsInf(v, 1) {
		t.win[n] = -1
	} else {
		t.win[n] = int32(i)
	}
	for n >>= 1; n >= 1; n >>= 1 {
		t.win[n] = t.better(t.win[2*n], t.win[2*n+1])
	}
}

// min is the index with the smallest finite value, or -1.
func (t *tourney) min() int { return int(t.win[1]) }
