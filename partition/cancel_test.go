package partition

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
)

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
			rep := &progresstest.CancelAt{Prefix: tc.stage, Cancel: cancel}
			_, err := RunContext(ctx, d, &Options{Parts: 16, Name: "p", Force: true, Method: FennelExact, Refine: 2, Progress: rep})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if rep.At().IsZero() {
				t.Fatal("stage never reported progress")
			}
			if d := time.Since(rep.At()); d > progresstest.CancelBound {
				t.Errorf("returned %v after the cancellation, want < %v", d, progresstest.CancelBound)
			}
			if _, err := os.Stat(Dir(d.Dir(), "p")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("partition dir after cancel: %v, want removed", err)
			}
		})
	}
}
