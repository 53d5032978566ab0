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
			if d := time.Since(rep.at); d > cancelBound {
				t.Errorf("returned %v after the cancellation, want < %v", d, cancelBound)
			}
			if _, err := os.Stat(Dir(d.Dir(), "p")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("partition dir after cancel: %v, want removed", err)
			}
		})
	}
}
