package importer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
)

// A cancelled import returns context.Canceled within a second and leaves
// nothing in the output directory: no manifest, arrays or temp files.
func TestImportCancel(t *testing.T) {
	const n = 50000
	var edges, feats, labels strings.Builder
	for i := range 4 * n {
		fmt.Fprintf(&edges, "%d %d\n", i%n, (i*7919+1)%n)
	}
	for i := range n {
		fmt.Fprintf(&feats, "%d,%d,0.5\n", i, -i)
		fmt.Fprintf(&labels, "%d\n", i%3)
	}
	src := t.TempDir()
	writeFiles(t, src, map[string]any{"e.txt": edges.String(), "f.csv": feats.String(), "l.txt": labels.String()})
	for _, stage := range []string{"edges", "features", "never"} {
		t.Run(stage, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &progresstest.CancelAt{Prefix: stage, Cancel: cancel}
			if stage == "never" {
				cancel() // cancelled before the start
			}
			_, err := ImportEdgeListContext(ctx, filepath.Join(src, "e.txt"), out, &Options{
				FeatFile: filepath.Join(src, "f.csv"), LabelFile: filepath.Join(src, "l.txt"), Progress: rep,
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if !rep.At().IsZero() {
				if d := time.Since(rep.At()); d > progresstest.CancelBound {
					t.Errorf("returned %v after the cancellation, want < %v", d, progresstest.CancelBound)
				}
			}
			assertNoDataset(t, out)
		})
	}
}
