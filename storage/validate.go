package storage

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// ValidateOptions configures Validate.
type ValidateOptions struct {
	// MaxProblems caps how many problems are listed (all are counted).
	// Default 20.
	MaxProblems int
	Progress    progress.Reporter
}

// ValidateReport is the outcome of a full scan.
type ValidateReport struct {
	Dir          string   `json:"dir"`
	BytesScanned int64    `json:"bytes_scanned"`
	NumProblems  int64    `json:"num_problems"`
	Problems     []string `json:"problems"`
	FeatureNaN   int64    `json:"feature_nan"`
	FeatureInf   int64    `json:"feature_inf"`
	Unlabelled   int64    `json:"unlabelled"`
	IsolatedNode int64    `json:"isolated_nodes"`
	// SplitUnlabelled counts the split nodes (train, valid, test) whose
	// label is -1. They are a warning, not a problem: the dataset is
	// consistent (-1 is a legal label, and a source may list such nodes),
	// but training skips them, so a split trains or scores on fewer nodes
	// than it lists, and a GraphBolt export writes -1 as their target.
	SplitUnlabelled [3]int64 `json:"split_unlabelled"`
	// Warnings describe findings that do not make the dataset bad (they
	// do not change OK or the exit status of ssdgnn validate).
	Warnings []string `json:"warnings"`
}

// OK reports whether the scan found no problem.
func (r *ValidateReport) OK() bool { return r.NumProblems == 0 }

type validator struct {
	ctx  context.Context
	err  error // ctx.Err() once seen; the scan stops
	d    *Dataset
	rep  *ValidateReport
	max  int
	task progress.Task
}

func (v *validator) problem(err error) {
	v.rep.NumProblems++
	if len(v.rep.Problems) < v.max {
		v.rep.Problems = append(v.rep.Problems, err.Error())
	}
}

// chunk is the scan granularity: large enough for sequential throughput,
// small enough to keep progress fluid.
const chunk = 4 << 20

// scan feeds the data section of name to fn in chunks of whole elements,
// verifies its checksum and returns the element count seen.
func (v *validator) scan(name string, elem int, fn func(first int64, b []byte)) {
	e := v.d.m.File(name)
	if e == nil || v.err != nil {
		return
	}
	data := v.d.data(name)
	_ = v.d.Advise(name, AdviceSequential)
	defer v.d.Advise(name, AdviceRandom)
	h := xxhash.New()
	step := chunk - chunk%elem
	for off := 0; off < len(data); off += step {
		if v.err = v.ctx.Err(); v.err != nil {
			return
		}
		end := min(off+step, len(data))
		b := data[off:end]
		h.Write(b)
		if fn != nil {
			fn(int64(off/elem), b)
		}
		v.task.Add(int64(len(b)))
		v.rep.BytesScanned += int64(len(b))
	}
	if got := FormatChecksum(h.Sum64()); got != e.Checksum {
		v.problem(&CorruptError{File: v.d.path(name), Index: -1, Offset: e.DataOffset,
			Msg: fmt.Sprintf("checksum %s, manifest says %s", got, e.Checksum)})
	}
}

func (d *Dataset) path(name string) string { return d.dir + "/" + name }

// Validate opens the dataset in dir and scans every byte: CSR structure,
// id ranges, label ranges, split order, range and disjointness, feature
// NaN/Inf, and every checksum. Split nodes without a label are counted
// and reported as a warning (ValidateReport.SplitUnlabelled), not as a
// problem. It returns an error only when the dataset
// cannot be opened; problems found by the scan are in the report.
func Validate(dir string, opts *ValidateOptions) (*ValidateReport, error) {
	return ValidateContext(context.Background(), dir, opts)
}

// ValidateContext is Validate, stopped by ctx: it checks ctx between
// chunks of 4 MiB and returns an error wrapping ctx.Err() (and no report)
// once it is cancelled.
func ValidateContext(ctx context.Context, dir string, opts *ValidateOptions) (*ValidateReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ValidateOptions{}
	}
	// Open's own checks stop at the first problem; the scan below lists them all.
	d, err := Open(dir, &OpenOptions{Advice: AdviceRandom, SkipChecks: true})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var total int64
	for _, f := range d.m.Files {
		total += f.Bytes - f.DataOffset
	}
	v := &validator{ctx: ctx, d: d, rep: &ValidateReport{Dir: dir, Problems: []string{}, Warnings: []string{}}, max: opts.MaxProblems}
	if v.max <= 0 {
		v.max = 20
	}
	v.task = progress.Or(opts.Progress).Start("validate", total, progress.Bytes)
	defer v.task.Done()
	n, m := d.m.NumNodes, d.m.NumEdges

	// indptr: starts at 0, monotone, ends at num_edges.
	prev := int64(0)
	v.scan(FileIndptr, 8, func(first int64, b []byte) {
		for i, x := range npy.AsInt64(b) {
			idx := first + int64(i)
			switch {
			case idx == 0 && x != 0:
				v.problem(corruptAt(d.path(FileIndptr), "indptr", 0, "first offset is %d, want 0", x))
			case idx > 0 && x < prev:
				v.problem(corruptAt(d.path(FileIndptr), "indptr", idx, "offset %d decreases (previous %d)", x, prev))
			case idx > 0 && x == prev:
				v.rep.IsolatedNode++
			}
			if idx == n && x != m {
				v.problem(corruptAt(d.path(FileIndptr), "indptr", idx, "last offset is %d, want num_edges %d", x, m))
			}
			prev = x
		}
	})

	// indices: every id in [0, N).
	inRange := func(idx, x int64) {
		if x < 0 || x >= n {
			v.problem(corruptAt(d.path(FileIndices), "indices", idx, "node id %d out of range [0,%d)", x, n))
		}
	}
	if d.idx32 != nil || IndicesDType(n).Size() == 4 {
		v.scan(FileIndices, 4, func(first int64, b []byte) {
			for i, x := range npy.AsInt32(b) {
				inRange(first+int64(i), int64(x))
			}
		})
	} else {
		v.scan(FileIndices, 8, func(first int64, b []byte) {
			for i, x := range npy.AsInt64(b) {
				inRange(first+int64(i), x)
			}
		})
	}

	// features: count NaN and Inf.
	if d.m.FeatDim > 0 {
		dim := d.m.FeatDim
		count := func(idx int64, f float32) {
			switch {
			case f != f:
				if v.rep.FeatureNaN == 0 {
					v.problem(corruptAt(d.path(FileFeatures), "features", idx/dim, "NaN at column %d (all NaN/Inf are counted in the report)", idx%dim))
				}
				v.rep.FeatureNaN++
			case math.IsInf(float64(f), 0):
				if v.rep.FeatureInf == 0 {
					v.problem(corruptAt(d.path(FileFeatures), "features", idx/dim, "Inf at column %d (all NaN/Inf are counted in the report)", idx%dim))
				}
				v.rep.FeatureInf++
			}
		}
		if d.m.FeatDType == "float16" {
			v.scan(FileFeatures, 2, func(first int64, b []byte) {
				for i := 0; i+1 < len(b); i += 2 {
					h := float16.Frombits(uint16(b[i]) | uint16(b[i+1])<<8)
					if h.IsNaN() || h.IsInf(0) {
						count(first+int64(i/2), h.Float32())
					}
				}
			})
		} else {
			v.scan(FileFeatures, 4, func(first int64, b []byte) {
				fs := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
				for i, f := range fs {
					if f != f || f > math.MaxFloat32 || f < -math.MaxFloat32 {
						count(first+int64(i), f)
					}
				}
			})
		}
	}

	// labels: -1 or in [0, num_classes). unlab marks the -1 nodes, for
	// the splits' check below.
	var unlab []uint64
	v.scan(FileLabels, 4, func(first int64, b []byte) {
		for i, l := range npy.AsInt32(b) {
			switch {
			case l == -1:
				if unlab == nil {
					unlab = make([]uint64, (n+63)/64)
				}
				if x := first + int64(i); x < n {
					unlab[x/64] |= 1 << (x % 64)
				}
				v.rep.Unlabelled++
			case l < -1 || int64(l) >= d.m.NumClasses:
				v.problem(corruptAt(d.path(FileLabels), "labels", first+int64(i), "label %d out of range [-1,%d)", l, d.m.NumClasses))
			}
		}
	})

	// splits: strictly ascending, in range, pairwise disjoint.
	seen := make([]uint64, (n+63)/64)
	for k, name := range []string{FileTrain, FileValid, FileTest} {
		last := int64(-1)
		firstUnlab, firstUnlabAt := int64(-1), int64(-1)
		v.scan(name, 8, func(first int64, b []byte) {
			for i, x := range npy.AsInt64(b) {
				idx := first + int64(i)
				if x < 0 || x >= n {
					v.problem(corruptAt(d.path(name), name[:len(name)-4], idx, "node id %d out of range [0,%d)", x, n))
					continue
				}
				if unlab != nil && unlab[x/64]&(1<<(x%64)) != 0 {
					if v.rep.SplitUnlabelled[k] == 0 {
						firstUnlab, firstUnlabAt = x, idx
					}
					v.rep.SplitUnlabelled[k]++
				}
				if x <= last {
					v.problem(corruptAt(d.path(name), name[:len(name)-4], idx, "id %d not strictly ascending (previous %d)", x, last))
				}
				last = x
				if seen[x/64]&(1<<(x%64)) != 0 {
					v.problem(corruptAt(d.path(name), name[:len(name)-4], idx, "node %d is also in an earlier split (or repeated)", x))
				}
				seen[x/64] |= 1 << (x % 64)
			}
		})
		if c := v.rep.SplitUnlabelled[k]; c > 0 {
			v.rep.Warnings = append(v.rep.Warnings, fmt.Sprintf("%s: %d of its nodes have no label (-1 in %s), first node %d at element %d; training skips them",
				d.path(name), c, FileLabels, firstUnlab, firstUnlabAt))
		}
	}
	v.idMaps()
	if v.err != nil {
		return nil, v.err
	}
	return v.rep, nil
}

// idMaps checks a relabelled dataset's maps: every id in range, and
// new_ids[orig_ids[i]] = i for every i, which makes both permutations
// and each the other's inverse.
func (v *validator) idMaps() {
	d := v.d
	if d.m.RelabelledFrom == nil {
		return
	}
	n := d.m.NumNodes
	ok := true
	for _, name := range []string{FileOrigIDs, FileNewIDs} {
		v.scan(name, 8, func(first int64, b []byte) {
			for i, x := range npy.AsInt64(b) {
				if x < 0 || x >= n {
					ok = false
					v.problem(corruptAt(d.path(name), name[:len(name)-4], first+int64(i), "node id %d out of range [0,%d)", x, n))
				}
			}
		})
	}
	if !ok || v.err != nil {
		return
	}
	orig, nw := npy.AsInt64(d.data(FileOrigIDs)), npy.AsInt64(d.data(FileNewIDs))
	for i, u := range orig {
		if nw[u] != int64(i) {
			v.problem(corruptAt(d.path(FileNewIDs), "new_ids", u, "is %d, but orig_ids[%d] = %d (the maps are not inverse permutations)", nw[u], i, u))
		}
	}
}
