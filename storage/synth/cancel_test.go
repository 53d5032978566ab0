package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
	"github.com/ssdgnn/ssdgnn/storage"
)

// A cancelled Generate returns context.Canceled within a second, leaves
// no manifest and removes its temporary files.
func TestGenerateCancel(t *testing.T) {
	for _, stage := range []string{"edges", "features"} {
		t.Run(stage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep := &progresstest.CancelAt{Prefix: stage, Cancel: cancel}
			cfg := Config{Nodes: 400000, FeatDim: 32, Seed: 1}
			_, err := GenerateContext(ctx, dir, cfg, &Options{Progress: rep, MemBytes: MinMemBytes})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if rep.At().IsZero() {
				t.Fatal("stage never reported progress")
			}
			if d := time.Since(rep.At()); d > progresstest.CancelBound {
				t.Errorf("returned %v after the cancellation, want < %v", d, progresstest.CancelBound)
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
