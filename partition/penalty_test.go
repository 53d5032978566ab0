package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExtremePenalties: a penalty that overflows float64 (a huge but finite
// Lambda or Gamma, which Validate accepts) must not read as a full part.
// Before, the tournaments took an infinite penalty for "full": --lambda
// 1e308 failed on the 50k-node graph with ErrInfeasible ("every partition
// is full", which errors.go says cannot happen with Epsilon > 0), and
// --gamma 1e10 (α·γ·|P|^(γ−1) = 0·∞, NaN) left 3–4 of 100 parts empty.
func TestExtremePenalties(t *testing.T) {
	g, _ := planted(3000, 30, 6, 0.9, 0.1, testSeed(t))
	dir := t.TempDir()
	d := g.write(t, dir)
	defer d.Close()
	capN := int(math.Ceil(1.1 * 3000 / 100))
	capT := int(math.Ceil(1.1 * float64(len(g.train)) / 100))
	for _, o := range []Options{{Lambda: 1e308}, {Gamma: 1e10}, {Gamma: 1e300, Lambda: 1e308}, {Gamma: 700}} {
		for _, m := range []Method{Fennel, FennelExact} {
			for _, refine := range []int{-1, 0} {
				t.Run(fmt.Sprintf("lambda%g-gamma%g-%s-refine%d", o.Lambda, o.Gamma, m, refine), func(t *testing.T) {
					o.Parts, o.Method, o.Name, o.Force, o.Seed, o.Refine = 100, m, "x", true, 1, refine
					if _, err := Run(d, &o); err != nil {
						t.Fatal(err)
					}
					p, err := Open(dir, "x")
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					maxN, maxT, empty := 0, 0, 0
					for q := range p.K() {
						maxN, maxT = max(maxN, len(p.Members(q))), max(maxT, len(p.TrainMembers(q)))
						if len(p.Members(q)) == 0 {
							empty++
						}
					}
					// Refinement may in principle empty a part (package doc,
					// Caveats); the streams themselves must not.
					if maxN > capN || maxT > capT || refine < 0 && empty > 0 {
						t.Errorf("largest part %d nodes, %d training nodes (caps %d, %d); %d empty parts", maxN, maxT, capN, capT, empty)
					}
				})
			}
		}
	}
}

// TestWorkersBounded: --workers is at most four per core, and MinMemory
// counts the second-level workers' scratch. Before, --workers 100000 was
// taken, ran min(100000, k1) = 100 workers at once and was OOM-killed in a
// 100 MiB memory cgroup that MinMemory (94 MiB, 1M nodes, k 10,000) had
// passed; the default workers finished there.
func TestWorkersBounded(t *testing.T) {
	g, _ := planted(2000, 20, 6, 0.9, 0.1, testSeed(t))
	d := g.write(t, t.TempDir())
	defer d.Close()
	_, err := Run(d, &Options{Parts: 100, Workers: 100000, Name: "w"})
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "four per core") {
		t.Fatalf("Workers 100000: %v", err)
	}
	if _, err := Run(d, &Options{Parts: 100, Workers: MaxWorkers(), Name: "w"}); err != nil {
		t.Fatalf("Workers %d (MaxWorkers): %v", MaxWorkers(), err)
	}
	base := MinMemory(d, &Options{Parts: 10000, Workers: 2})
	for _, w := range []int{3, 8} {
		// 10,000 parts are refused for 2,000 nodes, but the estimate
		// only reads the options: k1 = 100 workers' worth may run.
		got := MinMemory(d, &Options{Parts: 10000, Workers: w})
		if want := base + int64(w-2)*workerBytes(d.NumNodes(), 100); got != want {
			t.Errorf("MinMemory with %d workers = %d, want %d (+%d a worker beyond 2)", w, got, want, workerBytes(d.NumNodes(), 100))
		}
	}
	if got := MinMemory(d, &Options{Parts: 10000, FirstLevel: 2, Workers: 8}); got != base {
		t.Errorf("MinMemory with 8 workers and k1 = 2 = %d, want the 2-worker %d (at most k1 run)", got, base)
	}
}

// TestRelabelOtherSplit: a partitioning of the same graph made for another
// training split (same count, other ids) is refused by Relabel before it
// writes anything. Before, relabel reported success and committed a copy
// whose partitioning validate and rr refused ("train_members.npy: element
// 322: node 550 listed in part 0, but part.npy puts it in 1"), and with
// another count it failed only after writing the whole copy.
func TestRelabelOtherSplit(t *testing.T) {
	g, _ := planted(600, 6, 6, 0.9, 0.2, testSeed(t))
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src := g.write(t, srcDir)
	defer src.Close()
	if _, err := Run(src, &Options{Parts: 6, Method: FennelExact, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	other := *g
	other.train = nil
	for _, v := range g.train {
		if v+1 < 600 && !slices.Contains(g.train, v+1) && !slices.Contains(other.train, v+1) {
			other.train = append(other.train, v+1)
		} else {
			other.train = append(other.train, v)
		}
	}
	slices.Sort(other.train)
	d := other.write(t, dstDir)
	defer d.Close()
	if err := os.CopyFS(Dir(dstDir, string(FennelExact)), os.DirFS(Dir(srcDir, string(FennelExact)))); err != nil {
		t.Fatal(err)
	}
	p, err := Open(dstDir, string(FennelExact))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := filepath.Join(t.TempDir(), "out")
	_, err = Relabel(context.Background(), d, p, out, nil)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "another training split") {
		t.Fatalf("relabel with a partitioning of another split: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("relabel refused but left %s (%v)", out, err)
	}
}

// TestFitWorkers: default workers (one per core) shrink to what a memory
// limit holds, never below the 2 the per-node figure was measured with,
// since MinMemory now counts each worker's scratch (on a 16-core machine
// the default would otherwise be refused where 2 workers fit).
func TestFitWorkers(t *testing.T) {
	g, _ := planted(2000, 20, 6, 0.9, 0.1, testSeed(t))
	d := g.write(t, t.TempDir())
	defer d.Close()
	o := (&Options{Parts: 10000, Workers: 16}).withDefaults()
	at := func(w int) int64 { c := o; c.Workers = w; return MinMemory(d, &c) }
	for _, c := range []struct {
		lim  int64
		want int
	}{{at(16), 16}, {at(16) + 1, 16}, {at(16) - 1, 15}, {at(5), 5}, {at(5) - 1, 4}, {at(2), 2}, {at(2) - 1, 2}, {1, 2}} {
		if got := fitWorkers(d, &o, c.lim); got != c.want {
			t.Errorf("fitWorkers(limit %d) = %d, want %d", c.lim, got, c.want)
		}
	}
	one := o
	one.Workers = 1
	if got := fitWorkers(d, &one, 1); got != 1 {
		t.Errorf("fitWorkers with 1 worker = %d", got)
	}
}
