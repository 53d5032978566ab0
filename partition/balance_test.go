package partition

import (
	"fmt"
	"math"
	"testing"
)

// TestBalancePromise: whatever the levels and refinement, no final part
// holds more than ceil((1+ε)·n/k) nodes or ceil((1+ε)·t/k) training
// nodes, counted from part.npy. Before, two levels reached
// ceil((1+ε)·ceil((1+ε)·n/k1)/k2) (33 of a promised 30 on Cora at k =
// 100), and refinement pushed a one-level-balanced stream (k1 = 1) up to
// that bound.
func TestBalancePromise(t *testing.T) {
	g, _ := planted(2708, 40, 4, 0.9, 0.05, testSeed(t))
	dir := t.TempDir()
	d := g.write(t, dir)
	defer d.Close()
	for _, eps := range []float64{0.1, 0.03} {
		capN := int(math.Ceil((1 + eps) * 2708 / 100))
		capT := int(math.Ceil((1 + eps) * float64(len(g.train)) / 100))
		for _, k1 := range []int{1, 4, 10, 100} {
			for _, m := range []Method{Fennel, FennelExact} {
				for _, refine := range []int{-1, 3} {
					t.Run(fmt.Sprintf("eps%v-k1-%d-%s-refine%d", eps, k1, m, refine), func(t *testing.T) {
						if _, err := Run(d, &Options{Parts: 100, FirstLevel: k1, Method: m, Epsilon: eps, Refine: refine,
							Name: "b", Force: true, Seed: 1}); err != nil {
							t.Fatal(err)
						}
						p, err := Open(dir, "b")
						if err != nil {
							t.Fatal(err)
						}
						defer p.Close()
						maxN, maxT := 0, 0
						for q := range p.K() {
							maxN, maxT = max(maxN, len(p.Members(q))), max(maxT, len(p.TrainMembers(q)))
						}
						if maxN > capN || maxT > capT {
							t.Errorf("largest part %d nodes, %d training nodes; promised at most %d, %d", maxN, maxT, capN, capT)
						}
					})
				}
			}
		}
	}
}
