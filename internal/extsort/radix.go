package extsort

import (
	"slices"
)

// dedupKeys removes adjacent duplicates from a sorted slice and returns the
// shortened slice and the number removed.
func dedupKeys(a []uint64) ([]uint64, int64) {
	n := len(a)
	a = slices.Compact(a)
	return a, int64(n - len(a))
}

func cmpEdge(a, b Edge) int {
	switch {
	case a.Src < b.Src:
		return -1
	case a.Src > b.Src:
		return 1
	case a.Dst < b.Dst:
		return -1
	case a.Dst > b.Dst:
		return 1
	}
	return 0
}

func lessEdge(a, b Edge) bool {
	return a.Src < b.Src || (a.Src == b.Src && a.Dst < b.Dst)
}

func sortEdges(a []Edge) { slices.SortFunc(a, cmpEdge) }

// sortEdgesByRow sorts a by Src only, keeping the order of equal Src.
func sortEdgesByRow(a []Edge) {
	slices.SortStableFunc(a, func(x, y Edge) int {
		switch {
		case x.Src < y.Src:
			return -1
		case x.Src > y.Src:
			return 1
		}
		return 0
	})
}

func dedupEdges(a []Edge) ([]Edge, int64) {
	n := len(a)
	a = slices.Compact(a)
	return a, int64(n - len(a))
}
