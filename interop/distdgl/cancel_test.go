package distdgl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestExportCancel: both exporters, cancelled when their first task
// reports progress, return context.Canceled and leave no metadata file,
// so nothing looks like a complete export.
func TestExportCancel(t *testing.T) {
	dir := t.TempDir()
	g := storagetest.Graph{Adj: make([][]int64, 400), FeatDim: 3, Labels: make([]int32, 400), NumClasses: 2}
	for v := range g.Adj {
		g.Adj[v] = []int64{int64((v + 1) % 400), int64((v + 7) % 400)}
		g.Train = append(g.Train, int64(v))
	}
	storagetest.Write(t, dir, g)
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
