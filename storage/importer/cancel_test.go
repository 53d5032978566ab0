package importer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// cancelBound is how long a cancelled run may take to return in tests.
// The target is under a second (measured 0.03-0.3s on an idle machine);
// the bound is looser so that the race detector on a loaded, shared
// 2-core machine does not make the test flaky.
const cancelBound = 3 * time.Second

// cancelAt is a progress.Reporter that cancels when a task whose name
// starts with prefix first reports progress.
type cancelAt struct {
	prefix string
	cancel context.CancelFunc
	once   sync.Once
	at     time.Time
}

func (c *cancelAt) Start(desc string, _ int64, _ progress.Unit) progress.Task {
	return &cancelTask{c: c, hit: strings.HasPrefix(desc, c.prefix)}
}

type cancelTask struct {
	c   *cancelAt
	hit bool
}

func (t *cancelTask) Add(int64) {
	if t.hit {
		t.c.once.Do(func() { t.c.at = time.Now(); t.c.cancel() })
	}
}
func (t *cancelTask) Describe(string) {}
func (t *cancelTask) Done()           {}

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
			rep := &cancelAt{prefix: stage, cancel: cancel}
			if stage == "never" {
				cancel() // cancelled before the start
			}
			_, err := ImportEdgeListContext(ctx, filepath.Join(src, "e.txt"), out, &Options{
				FeatFile: filepath.Join(src, "f.csv"), LabelFile: filepath.Join(src, "l.txt"), Progress: rep,
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if !rep.at.IsZero() {
				if d := time.Since(rep.at); d > cancelBound {
					t.Errorf("returned %v after the cancellation, want < %v", d, cancelBound)
				}
			}
			assertNoDataset(t, out)
		})
	}
}
