package partition

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestDefaultParts: without Parts, a partitioning takes one part per
// TrainNodesPerPart training nodes. Before, it took 10,000 whatever the
// graph: Cora (2,708 nodes) was refused ("at least 7292 parts would be
// empty"), and a 50,000-node graph got parts of 5 nodes, whose partition
// batches read as much as random ones.
func TestDefaultParts(t *testing.T) {
	cora := importCora(t, t.TempDir(), "cora")
	defer cora.Close()
	g := storagetest.Generate(t, synth.Config{Nodes: 50000, FeatDim: 4, Classes: 4, Seed: 1}, nil)
	for _, c := range []struct {
		name string
		run  func() (Stats, error)
		want int
	}{
		{"cora", func() (Stats, error) { return Run(cora, &Options{Seed: 1}) }, 2},    // 140 training nodes: 3, in two levels 2
		{"synth50k", func() (Stats, error) { return Run(g, &Options{Seed: 1}) }, 100}, // 4,975
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := c.run()
			if err != nil {
				t.Fatal(err)
			}
			if st.K != c.want {
				t.Errorf("%d parts, want %d", st.K, c.want)
			}
		})
	}
	if got := DefaultPartsFor(g); got != (len(g.TrainIdx())+TrainNodesPerPart-1)/TrainNodesPerPart {
		t.Errorf("DefaultPartsFor %d for %d training nodes", got, len(g.TrainIdx()))
	}
}

// TestDefaultPartsTwoLevel: the default count splits into two levels of
// about its square root each, and its parts keep at least
// TrainNodesPerPart training nodes. Before, a prime count (401 for a
// 200,000-node generated graph's training nodes; 7 here) took the first
// level 1 × k: one first-level part, whose second level ran on one
// worker (1.7× the time and 1.8× the peak RSS of 400 = 20 × 20).
func TestDefaultPartsTwoLevel(t *testing.T) {
	for k := int64(1); k <= DefaultParts; k++ {
		got := twoLevelParts(k)
		if got < 1 || got > k || 2*(k-got) > 2*int64(math.Sqrt(float64(k)))+2 {
			t.Fatalf("twoLevelParts(%d) = %d: want at most k, less by at most its square root", k, got)
		}
		if f := int64(defaultFirstLevel(int(got))); k >= 4 && 4*f*f < got {
			t.Fatalf("twoLevelParts(%d) = %d splits as %d x %d", k, got, f, got/f)
		}
	}
	g := storagetest.Generate(t, synth.Config{Nodes: 2000, FeatDim: 4, Classes: 4, Seed: 1, TrainFrac: 0.17}, nil)
	plain := (len(g.TrainIdx()) + TrainNodesPerPart - 1) / TrainNodesPerPart
	k := DefaultPartsFor(g)
	t.Logf("%d training nodes: %d parts (%d before rounding)", len(g.TrainIdx()), k, plain)
	if f := defaultFirstLevel(k); 4*f*f < k || k > plain || len(g.TrainIdx()) < k*TrainNodesPerPart {
		t.Errorf("%d training nodes: %d parts, %d x %d; want at most %d, in two levels", len(g.TrainIdx()), k, f, k/f, plain)
	}
}

// TestDefaultPartsNamedInErrors: an option that does not fit the default
// part count says the count was the dataset's default, not given (the
// review's R5: "--first-level: 16 not in [1, --parts=3]" with no --parts).
func TestDefaultPartsNamedInErrors(t *testing.T) {
	cora := importCora(t, t.TempDir(), "cora")
	defer cora.Close()
	_, err := Run(cora, &Options{FirstLevel: 16, Seed: 1})
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "no part count was given: 2 is the default for this dataset's 140 training nodes") {
		t.Errorf("--first-level 16 on Cora's default parts: %v", err)
	}
	if _, err := Run(cora, &Options{Parts: 4, FirstLevel: 16, Seed: 1}); err == nil || strings.Contains(err.Error(), "no part count was given") {
		t.Errorf("--parts 4 --first-level 16: %v", err)
	}
}
