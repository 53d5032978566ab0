package sample_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
)

// TestTopDegreeRelabelled: on a relabelled copy of Cora, in either
// within-part order, TopDegree selects the nodes it selects on the
// source (mapped through orig_ids), so rr's partition+hist row reuses the
// nodes training's history cache does. Cora has many nodes of equal
// degree at the cut-off; before ties went by original id, the copies
// selected other nodes.
func TestTopDegreeRelabelled(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "cora")
	if _, err := importer.ImportOGB("../testdata/cora", src, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := partition.Run(d, &partition.Options{Parts: 20, Seed: 1, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	p, err := partition.Open(src, string(partition.Fennel))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, frac := range []float64{0.05, 0.2, 0.5} {
		want := sample.TopDegree(d, frac)
		for _, order := range []partition.RelabelOrder{partition.RelabelByID, partition.RelabelByDegree} {
			out := filepath.Join(dir, string(order))
			c, err := storage.Open(out, nil)
			if err != nil {
				if _, err := partition.Relabel(context.Background(), d, p, out, &partition.RelabelOptions{Order: order}); err != nil {
					t.Fatal(err)
				}
				if c, err = storage.Open(out, nil); err != nil {
					t.Fatal(err)
				}
			}
			got := sample.TopDegree(c, frac)
			orig := c.IDMap().OrigIDs()
			var n, differ int64
			for v := range c.NumNodes() {
				if got.Contains(v) {
					n++
					if !want.Contains(orig[v]) {
						differ++
					}
				}
			}
			c.Close()
			if n == 0 || differ != 0 {
				t.Errorf("frac %g, order %s: %d of the copy's %d top nodes are not the source's", frac, order, differ, n)
			}
		}
	}
}
