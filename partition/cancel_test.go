package partition

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress"
)

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

// A cancelled partition returns context.Canceled within a second and
// leaves no partition directory, even over an older one with Force.
func TestRunCancel(t *testing.T) {
	g, _ := planted(40000, 20, 8, 0.8, 0.2, 1)
	d := g.write(t, t.TempDir())
	defer d.Close()
	for _, tc := range []struct{ stage string }{{"partition level 1"}, {"partition level 2"}, {"partition refine"}} {
		t.Run(tc.stage, func(t *testing.T) {
			if _, err := Run(d, &Options{Parts: 16, Name: "p", Force: true, Method: FennelExact}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &cancelAt{prefix: tc.stage, cancel: cancel}
			_, err := RunContext(ctx, d, &Options{Parts: 16, Name: "p", Force: true, Method: FennelExact, Refine: 2, Progress: rep})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if rep.at.IsZero() {
				t.Fatal("stage never reported progress")
			}
			if d := time.Since(rep.at); d > time.Second {
				t.Errorf("returned %v after the cancellation", d)
			}
			if _, err := os.Stat(Dir(d.Dir(), "p")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("partition dir after cancel: %v, want removed", err)
			}
		})
	}
}
