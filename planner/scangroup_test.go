package planner

import (
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

// TestScanGroup: (micro-)batches are counted in groups of n as the
// ascending union of their rows, a partial group on flush, each alone
// with n = 1, and the scratch is counted while held.
func TestScanGroup(t *testing.T) {
	before := memacct.Read().Bytes[memacct.BatchBuffers]
	for _, tc := range []struct {
		n    int
		want [][]int64
	}{
		{1, [][]int64{{3, 1}, {1, 2}, {9}, {2, 2, 5}}},
		{2, [][]int64{{1, 2, 3}, {2, 5, 9}}},
		{3, [][]int64{{1, 2, 3, 9}, {2, 5}}},
		{5, [][]int64{{1, 2, 3, 5, 9}}},
	} {
		var got [][]int64
		g := &scanGroup{n: tc.n, count: func(rows []int64) { got = append(got, slices.Clone(rows)) }}
		for _, rows := range [][]int64{{3, 1}, {1, 2}, {9}, {2, 2, 5}} {
			g.visit(rows)
		}
		g.flush()
		g.flush() // nothing left: no empty scan
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("n %d: scans %v, want %v", tc.n, got, tc.want)
		}
		if tc.n > 1 && memacct.Read().Bytes[memacct.BatchBuffers]-before < 8*int64(cap(g.rows)) {
			t.Errorf("n %d: scratch not counted", tc.n)
		}
		g.close()
		if got := memacct.Read().Bytes[memacct.BatchBuffers]; got != before {
			t.Errorf("n %d: %d bytes counted after close, %d before", tc.n, got, before)
		}
	}
}
