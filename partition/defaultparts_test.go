package partition

import (
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestDefaultParts: without Parts, a partitioning takes one part per
// TrainNodesPerPart training nodes. Before, it took 10,000 whatever the
// graph: Cora (2,708 nodes) was refused ("at least 7292 parts would be
// empty"), and a 50,000-node graph got parts of 5 nodes, whose partition
// batches read as much as random ones.
func TestDefaultParts(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "cora")
	if _, err := importer.ImportOGB("../testdata/cora", src, nil); err != nil {
		t.Fatal(err)
	}
	cora := openDataset(t, src)
	defer cora.Close()
	g := storagetest.Generate(t, synth.Config{Nodes: 50000, FeatDim: 4, Classes: 4, Seed: 1}, nil)
	for _, c := range []struct {
		name string
		run  func() (Stats, error)
		want int
	}{
		{"cora", func() (Stats, error) { return Run(cora, &Options{Seed: 1}) }, 3},    // 140 training nodes
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
