package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
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

// A cancelled Generate returns context.Canceled within a second, leaves
// no manifest and removes its temporary files.
func TestGenerateCancel(t *testing.T) {
	for _, stage := range []string{"edges", "features"} {
		t.Run(stage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &cancelAt{prefix: stage, cancel: cancel}
			cfg := Config{Nodes: 400000, FeatDim: 32, Seed: 1}
			_, err := GenerateContext(ctx, dir, cfg, &Options{Progress: rep, MemBytes: 16 << 20})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if rep.at.IsZero() {
				t.Fatal("stage never reported progress")
			}
			if d := time.Since(rep.at); d > cancelBound {
				t.Errorf("returned %v after the cancellation, want < %v", d, cancelBound)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() == storage.ManifestName || strings.Contains(e.Name(), ".tmp") || e.IsDir() {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}
