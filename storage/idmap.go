package storage

import (
	"fmt"
	"slices"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// IDMap translates between the ids of a relabelled (partition-major)
// dataset and the ids of the dataset it was made from. It is a view of
// orig_ids.npy (new → old) and new_ids.npy (old → new).
//
// Every lookup checks the index it uses and that the two maps agree on
// the pair it returns, so a corrupt map gives a *CorruptError naming the
// file and the element, never a panic or a silently wrong id; Validate
// checks the whole maps once.
type IDMap struct {
	orig, new         []int64
	origPath, newPath string
}

// NewIDMap wraps orig (new → old) and new (old → new). The slices are
// kept, not copied. It checks only their lengths; lookups check the rest.
func NewIDMap(orig, new []int64) (*IDMap, error) {
	if len(orig) != len(new) {
		return nil, fmt.Errorf("%w: id maps of %d and %d entries", ErrMismatch, len(orig), len(new))
	}
	return &IDMap{orig: orig, new: new, origPath: FileOrigIDs, newPath: FileNewIDs}, nil
}

// IDMap is the dataset's map to its source's ids, or nil when the dataset
// is not relabelled.
func (d *Dataset) IDMap() *IDMap {
	if d.m.RelabelledFrom == nil {
		return nil
	}
	return &IDMap{orig: npy.AsInt64(d.data(FileOrigIDs)), new: npy.AsInt64(d.data(FileNewIDs)),
		origPath: d.path(FileOrigIDs), newPath: d.path(FileNewIDs)}
}

// OrigIDs is orig_ids.npy as it is mapped (new → old), unchecked: for
// orderings that must not depend on the numbering (ties between equal
// scores), where a damaged entry changes an order, never an id.
func (m *IDMap) OrigIDs() []int64 { return m.orig }

// Len is the number of nodes.
func (m *IDMap) Len() int64 { return int64(len(m.orig)) }

// Orig is the source id of node v of this dataset.
func (m *IDMap) Orig(v int64) (int64, error) {
	return m.through(v, "", m.orig, m.new, m.origPath, m.newPath, "orig_ids", "new_ids")
}

// New is the id in this dataset of source node u.
func (m *IDMap) New(u int64) (int64, error) {
	return m.through(u, "source ", m.new, m.orig, m.newPath, m.origPath, "new_ids", "orig_ids")
}

// through maps x by fwd and checks that inv maps the result back to x, so
// a damaged map is reported (file, array, element) rather than followed.
// what names x's id space in the out-of-range error.
func (m *IDMap) through(x int64, what string, fwd, inv []int64, fwdPath, invPath, fwdName, invName string) (int64, error) {
	n := m.Len()
	if x < 0 || x >= n {
		return 0, fmt.Errorf("storage: %snode %d out of range [0,%d)", what, x, n)
	}
	y := fwd[x]
	if y < 0 || y >= n {
		return 0, corruptAt(fwdPath, fwdName, x, "id %d out of range [0,%d)", y, n)
	}
	if inv[y] != x {
		return 0, corruptAt(invPath, invName, y, "maps to %d, but %s[%d] = %d", inv[y], fwdName, x, y)
	}
	return y, nil
}

// ToNew maps source ids to this dataset's ids, in place order: out[i] is
// the id of ids[i].
func (m *IDMap) ToNew(ids []int64) ([]int64, error) {
	out := make([]int64, len(ids))
	for i, u := range ids {
		v, err := m.New(u)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// InOrigOrder returns ids (this dataset's) reordered so that their source
// ids ascend: the order in which the source dataset lists the same
// nodes. ids is not modified.
func (m *IDMap) InOrigOrder(ids []int64) ([]int64, error) {
	type pair struct{ orig, id int64 }
	ps := make([]pair, len(ids))
	for i, v := range ids {
		u, err := m.Orig(v)
		if err != nil {
			return nil, err
		}
		ps[i] = pair{u, v}
	}
	slices.SortFunc(ps, func(a, b pair) int { return int(min(max(a.orig-b.orig, -1), 1)) })
	out := make([]int64, len(ids))
	for i, p := range ps {
		out[i] = p.id
	}
	return out, nil
}

// AllInOrigOrder is every node of this dataset in ascending source id:
// entry u is New(u).
func (m *IDMap) AllInOrigOrder() ([]int64, error) {
	out := make([]int64, m.Len())
	for u := range out {
		v, err := m.New(int64(u))
		if err != nil {
			return nil, err
		}
		out[u] = v
	}
	return out, nil
}
