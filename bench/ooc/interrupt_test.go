package ooc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInterruptedLastConfig: Ctrl-C while the last configuration trains
// (the harness asks the child to stop, and train writes its checkpoint
// and exits 0 with "interrupted": true in its report) ends the run with
// the context's error and writes no report, as an interrupt during an
// earlier configuration does. Before, the loop had ended, so the harness
// went on to write report.md with that configuration's row "FAILED: "
// (no reason) and exited 0: a half report presented as complete
// (bench ooc --configs ssdgnn, SIGINT 30 s in).
func TestInterruptedLastConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	real := ssdgnnBin(t)
	tmp := t.TempDir()
	started := filepath.Join(tmp, "train-started")
	// Every command but train is the real one; train waits to be
	// interrupted and then answers as train does.
	wrapper := filepath.Join(tmp, "ssdgnn-wrapper")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = train ]; then
	trap 'echo "{\"epochs\": [], \"interrupted\": true}"; exit 0' INT
	touch %q
	sleep 60 &
	wait
	exit 3
fi
exec %q "$@"
`, started, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := &Options{
		Bin: wrapper, Dir: filepath.Join(tmp, "data"), OutDir: filepath.Join(tmp, "out"),
		DataSize: int64(20000 * BytesPerNode(16, 8)), FeatDim: 16, AvgDegree: 8, TrainFrac: 0.2,
		MemLimit: 384 << 20, CacheBudget: 4 << 20, Epochs: 1, Hidden: 8, BatchSize: 500,
		Configs: []string{"ssdgnn"}, Uncapped: true, NoDropCaches: true, NoDiskCheck: true,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	rep, err := Run(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted during the last configuration: report %v, error %v; want context.Canceled", rep != nil, err)
	}
	for _, f := range []string{"report.md", "report.json"} {
		if _, err := os.Stat(filepath.Join(o.OutDir, f)); err == nil {
			t.Errorf("%s written for an interrupted run", f)
		}
	}
	// A child stopped by a signal from elsewhere (Ctrl-C reaches the
	// whole process group) reports "interrupted": its row fails, saying
	// so (before: "FAILED: " with no reason, or OK with the epochs it
	// had finished).
	script = fmt.Sprintf(`#!/bin/sh
if [ "$1" = train ]; then
	echo '{"epochs": [], "interrupted": true, "checkpoint": "ck"}'
	exit 0
fi
exec %q "$@"
`, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o.OutDir = filepath.Join(tmp, "out2")
	rep, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Configs[0]; c.OK() || !strings.Contains(c.Error, "interrupted after 0 of 1 epochs") {
		t.Errorf("a child that reported an interrupt: ok %v, error %q", c.OK(), c.Error)
	}
}
