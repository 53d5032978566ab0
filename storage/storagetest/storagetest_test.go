package storagetest

import "testing"

func TestWrite(t *testing.T) {
	g := Graph{
		Adj:     [][]int64{{2, 1}, {0}, {0}},
		FeatDim: 2, FeatDType: "float16",
		Feature:    func(v int64, row []float32) { row[0] = float32(v) },
		Labels:     []int32{0, 1, -1},
		NumClasses: 2,
		Train:      []int64{1, 0},
		Valid:      []int64{},
	}
	d := Write(t, t.TempDir(), g)
	if d.NumNodes() != 3 || d.NumEdges() != 4 || d.FeatDim() != 2 {
		t.Fatalf("%d nodes %d edges dim %d", d.NumNodes(), d.NumEdges(), d.FeatDim())
	}
	if nb := d.Neighbors(0).AppendTo(nil); nb[0] != 1 || nb[1] != 2 {
		t.Fatalf("neighbours of 0 not sorted: %v", nb)
	}
	if r := d.FeatureRow(2, nil); r[0] != 2 || r[1] != 0 {
		t.Fatalf("row 2: %v", r)
	}
	if tr := d.TrainIdx(); len(tr) != 2 || tr[0] != 0 || len(d.ValidIdx()) != 0 || d.TestIdx() != nil {
		t.Fatalf("splits %v %v %v", tr, d.ValidIdx(), d.TestIdx())
	}
}
