package sample

import (
	"testing"
)

// trainParts is a Partitions with given training nodes per partition and
// no adjacency.
type trainParts [][]int64

func (p trainParts) K() int                                   { return len(p) }
func (p trainParts) TrainMembers(i int) []int64               { return p[i] }
func (p trainParts) LoadAdjacency([]int, *DynamicCache) error { return nil }
func (p trainParts) Cross() []int32                           { return nil }

func uniformParts(k, perPart int) trainParts {
	p := make(trainParts, k)
	for i := range p {
		p[i] = make([]int64, perPart)
	}
	return p
}

func TestPartsPerBatchFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts trainParts
		batch int
		want  int
	}{
		// The repro: 1000 parts of ~20 training nodes, batch 1000.
		{"20 per part", uniformParts(1000, 20), 1000, 50},
		{"rounds to nearest", uniformParts(100, 30), 1000, 33},
		{"at least one", uniformParts(10, 5000), 1000, 1},
		{"at most K", uniformParts(10, 1), 1000, 10},
		// Empty partitions count: macro batches draw them too.
		{"empty parts", append(uniformParts(50, 40), uniformParts(50, 0)...), 1000, 50},
		{"no training nodes", uniformParts(100, 0), 1000, DefaultPartsPerBatch},
		{"no training nodes, few parts", uniformParts(3, 0), 1000, 3},
	} {
		if got := PartsPerBatchFor(tc.parts, tc.batch); got != tc.want {
			t.Errorf("%s: PartsPerBatchFor = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestPartitionBatchesMatchBatchSize checks the derivation end to end: with
// PartsPerBatch left 0, the sampler's partition batches hold about
// BatchSize training nodes on average, as random batches do.
func TestPartitionBatchesMatchBatchSize(t *testing.T) {
	parts := uniformParts(400, 20)
	var id int64
	for _, p := range parts {
		for i := range p {
			p[i] = id
			id++
		}
	}
	s := &Sampler{parts: parts, o: Options{Mode: ModePartition, BatchSize: 1000, PartsPerBatch: PartsPerBatchFor(parts, 1000)}}
	pl, err := s.Plan(0)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, b := range pl.Batches {
		n += len(b)
	}
	if mean := float64(n) / float64(len(pl.Batches)); mean < 900 || mean > 1000 {
		t.Errorf("mean partition batch %.0f training nodes over %d batches, want about 1000", mean, len(pl.Batches))
	}
}

// TestIDMapBytesMeasured: IDMapBytes is what newIDMap allocates.
func TestIDMapBytesMeasured(t *testing.T) {
	for _, n := range []int64{1000, denseLimit, denseLimit + 1} {
		m := newIDMap(n)
		if got := int64(4 * len(m.local)); got != IDMapBytes(n) {
			t.Errorf("n=%d: newIDMap holds %d bytes of dense map, IDMapBytes says %d", n, got, IDMapBytes(n))
		}
	}
}
