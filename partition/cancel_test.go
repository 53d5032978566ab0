package partition

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
)

// A cancelled partition returns context.Canceled within a second; with
// Force over an older partitioning it leaves that one byte for byte as it
// was (the new one is written beside it and moved in only when complete),
// and no staging directory. Without an older one it leaves nothing.
func TestRunCancel(t *testing.T) {
	g, _ := planted(40000, 20, 8, 0.8, 0.2, 1)
	d := g.write(t, t.TempDir())
	defer d.Close()
	for _, tc := range []struct{ stage string }{{"partition level 1"}, {"partition level 2"}, {"partition refine"}} {
		t.Run(tc.stage, func(t *testing.T) {
			if _, err := Run(d, &Options{Parts: 16, Name: "p", Force: true, Method: FennelExact}); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(filepath.Join(Dir(d.Dir(), "p"), ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &progresstest.CancelAt{Prefix: tc.stage, Cancel: cancel}
			_, err = RunContext(ctx, d, &Options{Parts: 16, Name: "p", Force: true, Method: FennelExact, Refine: 2, Progress: rep})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if rep.At().IsZero() {
				t.Fatal("stage never reported progress")
			}
			if d := time.Since(rep.At()); d > progresstest.CancelBound {
				t.Errorf("returned %v after the cancellation, want < %v", d, progresstest.CancelBound)
			}
			after, err := os.ReadFile(filepath.Join(Dir(d.Dir(), "p"), ManifestName))
			if err != nil || !bytes.Equal(after, before) {
				t.Errorf("the older partitioning after a cancelled --force: %v", err)
			}
			p, err := Open(d.Dir(), "p") // every file's checksum
			if err != nil {
				t.Fatalf("the older partitioning after a cancelled --force: %v", err)
			}
			p.Close()
			if names, err := Names(d.Dir()); err != nil || len(names) != 1 {
				t.Errorf("partitionings after cancel: %v %v", names, err)
			}
			staged, old := replaceNames(Dir(d.Dir(), "p"))
			for _, x := range []string{staged, old} {
				if _, err := os.Stat(x); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after cancel: %v, want removed", x, err)
				}
			}
			// Cancelled where nothing was before: nothing is left.
			ctx2, cancel2 := context.WithCancel(context.Background())
			defer cancel2()
			rep2 := &progresstest.CancelAt{Prefix: tc.stage, Cancel: cancel2}
			if _, err := RunContext(ctx2, d, &Options{Parts: 16, Name: "fresh", Method: FennelExact, Refine: 2, Progress: rep2}); !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if _, err := os.Stat(Dir(d.Dir(), "fresh")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("partition dir after cancel: %v, want removed", err)
			}
		})
	}
}

// TestOpenRefusesPathNames: a partitioning name that is not one plain
// directory under DIR/partitions is refused by the readers as by the
// writer ('../x' read another dataset's partitioning).
func TestOpenRefusesPathNames(t *testing.T) {
	g, _ := planted(2000, 4, 4, 0.8, 0.2, 1)
	d := g.write(t, t.TempDir())
	defer d.Close()
	if _, err := Run(d, &Options{Parts: 4, Name: "p", Method: FennelExact}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../partitions/p", "p/../p", ".p", "", "a/b"} {
		if _, err := Open(d.Dir(), name); !errors.Is(err, ErrOptions) {
			t.Errorf("Open(%q): %v, want ErrOptions", name, err)
		}
		if Exists(d.Dir(), name) {
			t.Errorf("Exists(%q)", name)
		}
	}
	if p, err := Open(d.Dir(), "p"); err != nil {
		t.Fatal(err)
	} else {
		p.Close()
	}
}
