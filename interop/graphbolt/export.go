package graphbolt

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/interop/internal/csrstream"
	"github.com/ssdgnn/ssdgnn/interop/internal/exportdir"
	"github.com/ssdgnn/ssdgnn/interop/internal/intarray"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Paths of the export, relative to its directory.
const (
	PathEdges  = "edges/edges.npy"
	PathFeat   = "node_data/feat.npy"
	PathLabel  = "node_data/label.npy"
	PathOrigID = "node_data/orig_id.npy"
	setDir     = "set"
	labelDType = npy.Int64 // PyTorch's cross-entropy wants int64 targets
)

// SetPaths returns the seeds and labels files of set k (0 train, 1
// validation, 2 test).
func SetPaths(k int) (seeds, labels string) {
	n := [3]string{"train", "validation", "test"}[k]
	return setDir + "/" + n + "_seeds.npy", setDir + "/" + n + "_labels.npy"
}

// owned are the entries of an export directory besides metadata.yaml.
var owned = []string{"edges", "node_data", setDir, "preprocessed"}

// Export writes the dataset in dir as a GraphBolt on-disk dataset in out.
func Export(dir, out string, opts *Options) (Report, error) {
	return ExportContext(context.Background(), dir, out, opts)
}

// ExportContext is Export, stopped by ctx within a chunk: it then returns
// ctx's error and leaves no metadata.yaml (the export does not look
// complete).
func ExportContext(ctx context.Context, dir, out string, opts *Options) (_ Report, err error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	o := opts.withDefaults()
	defer membudget.Of(o.MemBytes).Hold()()
	m, msum, err := storage.LoadManifestChecksum(dir)
	if err != nil {
		return Report{}, err
	}
	if o.IDDType == npy.Int32 && m.NumNodes > math.MaxInt32 {
		return Report{}, fmt.Errorf("%w: IDDType int32 cannot hold %d node ids", ErrInvalidOptions, m.NumNodes)
	}
	if err := exportdir.Prepare(dir, out, MetadataName, owned, o.Force); err != nil {
		return Report{}, err
	}
	defer func() {
		if err != nil { // nothing of a failed export is left behind
			exportdir.Abandon(out, MetadataName, owned)
		}
	}()
	for _, d := range []string{"edges", "node_data", setDir} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return Report{}, fmt.Errorf("graphbolt: %w", err)
		}
	}
	x := &exporter{ctx: ctx, o: o, dir: dir, out: out, m: m}
	rep := Report{Dir: out, Nodes: m.NumNodes, Edges: m.NumEdges, FeatDim: m.FeatDim}
	meta := Metadata{
		DatasetName: m.Name,
		Graph: &Graph{
			Nodes: []NodeSpec{{Num: Int(m.NumNodes)}},
			Edges: []EdgeSpec{{Format: "numpy", Path: PathEdges}},
		},
	}
	if err := x.edges(); err != nil {
		return Report{}, err
	}
	notInMemory := false
	if m.FeatDim > 0 {
		if rep.FeaturesLinked, err = x.features(); err != nil {
			return Report{}, err
		}
		meta.FeatureData = append(meta.FeatureData, Feature{Domain: "node", Name: FeatureFeat, Format: "numpy", InMemory: &notInMemory, Path: PathFeat})
	}
	hasLabels := m.File(storage.FileLabels) != nil
	if hasLabels {
		if err := x.labels(); err != nil {
			return Report{}, err
		}
		rep.Labels = true
		meta.FeatureData = append(meta.FeatureData, Feature{Domain: "node", Name: FeatureLabel, Format: "numpy", InMemory: &notInMemory, Path: PathLabel})
	}
	if m.RelabelledFrom != nil {
		// The export speaks the copy's ids; each node's id in the
		// original dataset travels with it as node feature orig_id.
		if _, err := x.linkArray(storage.FileOrigIDs, PathOrigID); err != nil {
			return Report{}, err
		}
		rep.OrigIDs = true
		meta.FeatureData = append(meta.FeatureData, Feature{Domain: "node", Name: FeatureOrigID, Format: "numpy", InMemory: &notInMemory, Path: PathOrigID})
	}
	task := Task{Name: TaskNodeClassification, NumClasses: Int(m.NumClasses)}
	sets := [3]*[]TVTSet{&task.TrainSet, &task.ValidationSet, &task.TestSet}
	counts := [3]*int64{&rep.Train, &rep.Valid, &rep.Test}
	anySet := false
	for k, name := range []string{storage.FileTrain, storage.FileValid, storage.FileTest} {
		e := m.File(name)
		if e == nil {
			continue
		}
		anySet = true
		n, err := x.set(k, e, hasLabels)
		if err != nil {
			return Report{}, err
		}
		*counts[k] = n
		seeds, labels := SetPaths(k)
		data := []TVTData{{Name: DataSeeds, Format: "numpy", Path: seeds}}
		if hasLabels {
			data = append(data, TVTData{Name: DataLabels, Format: "numpy", Path: labels})
		}
		*sets[k] = []TVTSet{{Data: data}}
	}
	if rep.UnlabelledSeeds = x.unlabelled; rep.UnlabelledSeeds != [3]int64{} {
		u := rep.UnlabelledSeeds
		x.o.Logger.Info("set seeds without a label are exported with label -1: DGL's cross_entropy fails on a -1 target (ssdgnn's training skips them); drop them in DGL (labels >= 0)",
			"train", u[0], "validation", u[1], "test", u[2])
	}
	if anySet || m.NumClasses > 0 { // a task with no sets still carries num_classes
		meta.Tasks = []Task{task}
		rep.Task = true
	}
	// Directories that got no file (no features, labels or splits) go:
	// GraphBolt lists what metadata.yaml names, an empty directory is
	// litter.
	for _, d := range []string{"node_data", setDir} {
		_ = os.Remove(filepath.Join(out, d)) // fails, harmlessly, when not empty
	}
	// The dataset's files were opened by path one after another (and
	// features linked): a dataset replaced meanwhile gave some of them.
	if err := storage.ManifestUnchanged(dir, msum); err != nil {
		return Report{}, err
	}
	yml, err := meta.Marshal()
	if err != nil {
		return Report{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(out, MetadataName), yml); err != nil {
		return Report{}, err
	}
	rep.BytesWritten = x.written + int64(len(yml))
	rep.Wall = time.Since(start)
	o.Logger.Info("graphbolt export finished", "out", out, "nodes", rep.Nodes, "edges", rep.Edges, "wall", rep.Wall)
	return rep, nil
}

type exporter struct {
	ctx     context.Context
	o       Options
	dir     string
	out     string
	m       *storage.Manifest
	written int64
	enc     []byte
	// unlabelled counts, per set, the seeds whose label is -1.
	unlabelled [3]int64
}

// create starts out/rel with dtype d and trailing dimensions tail. An
// array whose trailing dimensions hold no element is written whole by
// writeEmpty instead.
func (x *exporter) create(rel string, d npy.DType, tail []int64) (*npy.File, error) {
	f, err := npy.Create(filepath.Join(x.out, rel), d, tail)
	if err != nil {
		return nil, fmt.Errorf("graphbolt: %s: %w", rel, err)
	}
	return f, nil
}

// commit finishes f and counts its bytes.
func (x *exporter) commit(f *npy.File) error {
	h, err := f.Commit()
	if err != nil {
		return fmt.Errorf("graphbolt: %s: %w", f.Name(), err)
	}
	x.written += h.DataOffset + h.DataBytes()
	return nil
}

// writeEmpty writes an array with no elements of the given shape.
func (x *exporter) writeEmpty(rel string, d npy.DType, shape []int64) error {
	n, err := npy.WriteFile(filepath.Join(x.out, rel), d, shape, nil)
	if err != nil {
		return fmt.Errorf("graphbolt: %s: %w", rel, err)
	}
	x.written += n
	return nil
}

// put encodes v as dtype d (int32 or int64) and appends it to a.
func (x *exporter) put(a *npy.File, d npy.DType, v []int64) error {
	if err := x.ctx.Err(); err != nil {
		return err
	}
	b := EncodeInts(d, v, &x.enc)
	if _, err := a.Write(b); err != nil {
		return fmt.Errorf("graphbolt: write %s: %w", a.Name(), err)
	}
	return nil
}

// EncodeInts encodes v as little-endian int32 or int64 elements in *buf
// (grown as needed) and returns the bytes. The caller guarantees that
// values fit.
func EncodeInts(d npy.DType, v []int64, buf *[]byte) []byte {
	n := len(v) * d.Size()
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if n == 0 {
		return b
	}
	if d == npy.Int64 {
		copy(unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(v)), v)
		return b
	}
	out := unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return b
}

// edges writes the (2, E) edge array: row 0 the sources (ssdgnn's
// neighbours), row 1 the destinations (ssdgnn's CSR rows), in CSR order.
// It reads the CSR twice, once per row.
func (x *exporter) edges() error {
	e := x.m.NumEdges
	if e == 0 {
		return x.writeEmpty(PathEdges, x.o.IDDType, []int64{2, 0})
	}
	r, err := csrstream.Open(x.dir, x.m)
	if err != nil {
		return err
	}
	defer r.Close()
	a, err := x.create(PathEdges, x.o.IDDType, []int64{e})
	if err != nil {
		return err
	}
	defer a.Abort()
	bar := x.o.Progress.Start("edges", 2*e, progress.Items)
	defer bar.Done()
	chunk := x.o.chunkEdges()
	rows, nbrs := make([]int64, chunk), make([]int64, chunk)
	for pass := range 2 {
		r.Reset()
		for {
			n, err := r.Next(rows, nbrs)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			v := nbrs[:n]
			if pass == 1 {
				v = rows[:n]
			}
			if err := x.put(a, x.o.IDDType, v); err != nil {
				return err
			}
			bar.Add(int64(n))
		}
	}
	return x.commit(a)
}

// features links or copies features.npy after checking it against the
// manifest.
func (x *exporter) features() (bool, error) {
	if x.m.File(storage.FileFeatures) == nil {
		return false, fmt.Errorf("%w: %s: feat_dim %d but no %s", storage.ErrMismatch, x.dir, x.m.FeatDim, storage.FileFeatures)
	}
	return x.linkArray(storage.FileFeatures, PathFeat)
}

// linkArray links (or, with NoLink or across file systems, copies) the
// dataset's array name to out/rel after checking its header against the
// manifest: both are .npy files of the same layout.
func (x *exporter) linkArray(name, rel string) (bool, error) {
	e := x.m.File(name)
	if e == nil {
		return false, fmt.Errorf("%w: %s: the manifest lists no %s", storage.ErrMismatch, x.dir, name)
	}
	f, err := storage.OpenArrayFile(x.dir, e)
	if err != nil {
		return false, err
	}
	f.Close()
	src, dst := filepath.Join(x.dir, e.Name), filepath.Join(x.out, rel)
	if x.o.NoLink {
		x.written += e.Bytes
		return false, exportdir.Copy(x.ctx, src, dst)
	}
	linked, err := exportdir.LinkOrCopy(x.ctx, src, dst)
	if err == nil && !linked {
		x.written += e.Bytes
	}
	x.o.Logger.Info("array exported", "file", name, "linked", linked, "bytes", e.Bytes)
	return linked, err
}

// labels writes node_data/label.npy: every node's class as int64, -1 for
// unlabelled nodes.
func (x *exporter) labels() error {
	lr, err := intarray.Open(x.dir, x.m.File(storage.FileLabels))
	if err != nil {
		return err
	}
	defer lr.Close()
	n := x.m.NumNodes
	if n == 0 {
		return x.writeEmpty(PathLabel, labelDType, []int64{0})
	}
	a, err := x.create(PathLabel, labelDType, nil)
	if err != nil {
		return err
	}
	defer a.Abort()
	buf := make([]int64, x.o.chunkEdges())
	for done := int64(0); done < n; {
		k := int(min(int64(len(buf)), n-done))
		if err := lr.Read(buf[:k], done); err != nil {
			return err
		}
		for i, c := range buf[:k] {
			if c < -1 || (x.m.NumClasses > 0 && c >= x.m.NumClasses) {
				return &storage.CorruptError{File: lr.Path(), Field: "labels", Index: done + int64(i), Offset: -1,
					Msg: fmt.Sprintf("class %d out of range [-1,%d)", c, x.m.NumClasses)}
			}
		}
		if err := x.put(a, labelDType, buf[:k]); err != nil {
			return err
		}
		done += int64(k)
	}
	return x.commit(a)
}

// set writes set k's seeds and, with labels, the seeds' labels. Seeds are
// checked (in range, strictly ascending, as docs/format.md requires) and
// their labels found by one forward scan of labels.npy.
func (x *exporter) set(k int, e *storage.FileEntry, withLabels bool) (int64, error) {
	sr, err := intarray.Open(x.dir, e)
	if err != nil {
		return 0, err
	}
	defer sr.Close()
	var lr *intarray.Reader
	if withLabels {
		if lr, err = intarray.Open(x.dir, x.m.File(storage.FileLabels)); err != nil {
			return 0, err
		}
		defer lr.Close()
	}
	count := e.Shape[0]
	seedsRel, labelsRel := SetPaths(k)
	if count == 0 {
		if err := x.writeEmpty(seedsRel, x.o.IDDType, []int64{0}); err != nil {
			return 0, err
		}
		if withLabels {
			return 0, x.writeEmpty(labelsRel, labelDType, []int64{0})
		}
		return 0, nil
	}
	sa, err := x.create(seedsRel, x.o.IDDType, nil)
	if err != nil {
		return 0, err
	}
	defer sa.Abort()
	var la *npy.File
	if withLabels {
		if la, err = x.create(labelsRel, labelDType, nil); err != nil {
			return 0, err
		}
		defer la.Abort()
	}
	chunk := x.o.chunkEdges()
	seeds, labs := make([]int64, chunk), make([]int64, 0, chunk)
	prev := int64(-1)
	for done := int64(0); done < count; {
		n := int(min(int64(chunk), count-done))
		if err := sr.Read(seeds[:n], done); err != nil {
			return 0, err
		}
		labs = labs[:0]
		for i, v := range seeds[:n] {
			if v <= prev || v >= x.m.NumNodes {
				return 0, &storage.CorruptError{File: sr.Path(), Field: e.Name, Index: done + int64(i), Offset: -1,
					Msg: fmt.Sprintf("node %d not in (%d, %d): splits are strictly ascending node ids", v, prev, x.m.NumNodes)}
			}
			prev = v
			if withLabels {
				c, err := lr.At(v)
				if err != nil {
					return 0, err
				}
				if c == -1 {
					x.unlabelled[k]++
				}
				labs = append(labs, c)
			}
		}
		if err := x.put(sa, x.o.IDDType, seeds[:n]); err != nil {
			return 0, err
		}
		if withLabels {
			if err := x.put(la, labelDType, labs); err != nil {
				return 0, err
			}
		}
		done += int64(n)
	}
	if err := x.commit(sa); err != nil {
		return 0, err
	}
	if withLabels {
		if err := x.commit(la); err != nil {
			return 0, err
		}
	}
	return count, nil
}
