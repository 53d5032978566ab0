package partition

import (
	"fmt"
	"math"
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
			t.Run(fmt.Sprintf("lambda%g-gamma%g-%s", o.Lambda, o.Gamma, m), func(t *testing.T) {
				o.Parts, o.Method, o.Name, o.Force, o.Seed = 100, m, "x", true, 1
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
				if maxN > capN || maxT > capT || empty > 0 {
					t.Errorf("largest part %d nodes, %d training nodes (caps %d, %d); %d empty parts", maxN, maxT, capN, capT, empty)
				}
			})
		}
	}
}
