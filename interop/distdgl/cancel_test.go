package distdgl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// ringGraph is the exporters' test graph: 400 nodes, all training, each
// with edges to v+1+shift and v+7 (mod 400); shift gives a dataset of the
// same shapes with other edges.
func ringGraph(shift int) storagetest.Graph {
	g := storagetest.Graph{Adj: make([][]int64, 400), FeatDim: 3, Labels: make([]int32, 400), NumClasses: 2}
	for v := range g.Adj {
		g.Adj[v] = []int64{int64((v + 1 + shift) % 400), int64((v + 7) % 400)}
		g.Train = append(g.Train, int64(v))
	}
	return g
}

// TestExportCancel: both exporters, cancelled when their first task
// reports progress, return context.Canceled and leave no metadata file,
// so nothing looks like a complete export.
func TestExportCancel(t *testing.T) {
	dir := t.TempDir()
	storagetest.Write(t, dir, ringGraph(0))
	partitionIt(t, dir, 4, partition.Random)
	for _, tc := range []struct {
		name, meta string
		export     func(ctx context.Context, out string, rep *progresstest.CancelAt) error
	}{
		{"distdgl", MetadataName, func(ctx context.Context, out string, rep *progresstest.CancelAt) error {
			_, err := ExportContext(ctx, dir, out, &Options{Partition: "random", NumChunks: 4, MemBytes: MinMemBytes, Progress: rep})
			return err
		}},
		{"graphbolt", graphbolt.MetadataName, func(ctx context.Context, out string, rep *progresstest.CancelAt) error {
			_, err := graphbolt.ExportContext(ctx, dir, out, &graphbolt.Options{Progress: rep})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &progresstest.CancelAt{Prefix: "", Cancel: cancel}
			out := filepath.Join(t.TempDir(), "out")
			err := tc.export(ctx, out, rep)
			if rep.At().IsZero() {
				t.Fatal("the export reported no progress: the test cancelled nothing")
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled export: %v, want context.Canceled", err)
			}
			if _, err := os.Stat(filepath.Join(out, tc.meta)); !os.IsNotExist(err) {
				t.Errorf("%s exists after a cancelled export (%v)", tc.meta, err)
			}
		})
	}
}

// TestExportCancelLeavesNothing: both exporters, cancelled after every
// amount of progress until one run completes, leave OUT with none of the
// entries an export writes (an interrupted DistDGL export of a 1M-node
// graph left 91 MiB of edge files; GraphBolt its empty directories).
func TestExportCancelLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	storagetest.Write(t, dir, ringGraph(0))
	partitionIt(t, dir, 4, partition.Random)
	for _, tc := range []struct {
		name   string
		owned  []string
		export func(ctx context.Context, out string, rep *progresstest.CancelAt) error
	}{
		{"distdgl", owned, func(ctx context.Context, out string, rep *progresstest.CancelAt) error {
			_, err := ExportContext(ctx, dir, out, &Options{Partition: "random", NumChunks: 4, MemBytes: MinMemBytes, Progress: rep})
			return err
		}},
		{"graphbolt", []string{"edges", "node_data", "set"}, func(ctx context.Context, out string, rep *progresstest.CancelAt) error {
			_, err := graphbolt.ExportContext(ctx, dir, out, &graphbolt.Options{Progress: rep})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := 0
			for after := int64(0); ; after += 50 {
				ctx, cancel := context.WithCancel(context.Background())
				rep := &progresstest.CancelAt{Cancel: cancel, After: after}
				out := filepath.Join(t.TempDir(), "out")
				err := tc.export(ctx, out, rep)
				cancel()
				if rep.At().IsZero() || err == nil {
					if err != nil {
						t.Fatal(err)
					}
					break // the export completed before the cancel point
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled after %d: %v, want context.Canceled", after, err)
				}
				cancelled++
				ents, _ := os.ReadDir(out)
				for _, e := range ents {
					t.Errorf("cancelled after %d: %s left in OUT", after, e.Name())
				}
				if after > 1<<20 {
					t.Fatal("the export never completed")
				}
			}
			if cancelled < 3 {
				t.Errorf("only %d cancel points before the export completed: the test cancels too late to see files", cancelled)
			}
		})
	}
}

// liveHeap records, at every progress report, the largest heap left live
// after a collection.
type liveHeap struct{ most uint64 }

func (c *liveHeap) Start(string, int64, progress.Unit) progress.Task { return c }
func (c *liveHeap) Add(int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.most = max(c.most, ms.HeapAlloc)
}
func (c *liveHeap) Describe(string) {}
func (c *liveHeap) Done()           {}

// The node data of one chunk is open at a time: an export of many chunks
// does not keep every chunk's writer (a 1 MiB buffer each) until it ends.
// Before, 100 chunks of 5 node data arrays kept 500 MiB of buffers live
// (RssAnon 125 MiB at --mem 16MiB on a 1M-node graph, the buffers' pages
// partly touched; OOM-killed in a memory cgroup of 64 MiB).
func TestExportChunksNotHeld(t *testing.T) {
	dir := t.TempDir()
	const n = 400
	g := storagetest.Graph{Adj: make([][]int64, n), FeatDim: 3, Labels: make([]int32, n), NumClasses: 2}
	for v := range g.Adj {
		g.Adj[v] = []int64{int64((v + 1) % n)}
		g.Train = append(g.Train, int64(v))
	}
	storagetest.Write(t, dir, g)
	partitionIt(t, dir, 4, partition.Random)
	c := &liveHeap{}
	if _, err := Export(dir, filepath.Join(t.TempDir(), "out"), &Options{Partition: "random", NumChunks: 100, Progress: c}); err != nil {
		t.Fatal(err)
	}
	if c.most > 64<<20 {
		t.Errorf("%d MiB live during the export: the chunks' writers are held", c.most>>20)
	}
}

// TestExportPartitioningReplaced: a 'partition --force' that replaces the
// partitioning (another K) while the export runs must fail the export,
// with no metadata written, never an export whose partition_meta.json
// gives the old K beside the new partitioning's assignment in _N.txt.
func TestExportPartitioningReplaced(t *testing.T) {
	dir := t.TempDir()
	storagetest.Write(t, dir, ringGraph(0))
	partitionIt(t, dir, 8, partition.Random)
	out := filepath.Join(t.TempDir(), "out")
	rep := &progresstest.OnFirstAdd{Fn: func() { partitionIt(t, dir, 4, partition.Random) }}
	_, err := ExportContext(context.Background(), dir, out, &Options{Partition: "random", NumChunks: 2, MemBytes: MinMemBytes, Progress: rep})
	if !errors.Is(err, partition.ErrMismatch) {
		t.Fatalf("export with its partitioning replaced: %v, want partition.ErrMismatch", err)
	}
	if _, err := os.Stat(filepath.Join(out, MetadataName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused export wrote %s (%v)", MetadataName, err)
	}
}

// TestExportDatasetReplaced: both exporters, with the dataset replaced
// (same shapes, other contents, as a gen or relabel --force does) when
// they first report progress, fail with storage.ErrMismatch and write no
// metadata, never an export whose files come from two datasets.
func TestExportDatasetReplaced(t *testing.T) {
	for _, tc := range []struct {
		name, meta string
		export     func(dir, out string, rep progress.Reporter) error
	}{
		{"distdgl", MetadataName, func(dir, out string, rep progress.Reporter) error {
			_, err := ExportContext(context.Background(), dir, out, &Options{Partition: "random", NumChunks: 2, MemBytes: MinMemBytes, Progress: rep})
			return err
		}},
		{"graphbolt", graphbolt.MetadataName, func(dir, out string, rep progress.Reporter) error {
			_, err := graphbolt.ExportContext(context.Background(), dir, out, &graphbolt.Options{Progress: rep})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			storagetest.Write(t, dir, ringGraph(0)).Close()
			partitionIt(t, dir, 4, partition.Random)
			out := filepath.Join(t.TempDir(), "out")
			rep := &progresstest.OnFirstAdd{Fn: func() { storagetest.Write(t, dir, ringGraph(5)).Close() }}
			if err := tc.export(dir, out, rep); !errors.Is(err, storage.ErrMismatch) {
				t.Fatalf("export with its dataset replaced: %v, want storage.ErrMismatch", err)
			}
			if _, err := os.Stat(filepath.Join(out, tc.meta)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused export wrote %s (%v)", tc.meta, err)
			}
		})
	}
}
