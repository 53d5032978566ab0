package train

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestLoadDegrees checks GCN's whole-graph degrees on a directed graph
// with a repeated edge (in from indptr, out counted over indices), that a
// symmetrised dataset shares one array, that the memory is counted until
// release, and that a cancelled load fails with the context's error and
// counts nothing.
func TestLoadDegrees(t *testing.T) {
	// Adj lists in-neighbours: 3 ← 0 twice, 3 ← 2, 0 ← 1, 0 ← 2, 1 ← 2.
	adj := [][]int64{{1, 2}, {2}, {}, {0, 0, 2}}
	for _, sym := range []bool{false, true} {
		d := storagetest.Write(t, t.TempDir(), storagetest.Graph{Name: "deg", Adj: adj, Symmetrized: sym})
		before := memacct.Read().Bytes[memacct.Degrees]
		g, err := loadDegrees(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		wantOut, wantBytes := []int32{2, 1, 3, 0}, int64(8*4)
		if sym { // the manifest's word: out is in
			wantOut, wantBytes = []int32{2, 1, 0, 3}, 4*4
		}
		if !slices.Equal(g.in, []int32{2, 1, 0, 3}) || !slices.Equal(g.out, wantOut) {
			t.Errorf("symmetrised %v: in %v out %v, want [2 1 0 3] %v", sym, g.in, g.out, wantOut)
		}
		if got := memacct.Read().Bytes[memacct.Degrees] - before; got != wantBytes || degreeBytes(d) != wantBytes {
			t.Errorf("symmetrised %v: counted %d bytes, degreeBytes %d, want %d", sym, got, degreeBytes(d), wantBytes)
		}
		in, out := make([]int32, 2), make([]int32, 3)
		g.of([]int64{3, 0, 2}, in, out)
		if !slices.Equal(in, []int32{3, 2}) || !slices.Equal(out, []int32{wantOut[3], wantOut[0], wantOut[2]}) {
			t.Errorf("symmetrised %v: of(3,0,2) = %v %v", sym, in, out)
		}
		g.release()
		g.release()
		if got := memacct.Read().Bytes[memacct.Degrees]; got != before {
			t.Errorf("after release %d bytes counted, want %d", got, before)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := loadDegrees(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled load: %v", err)
		}
		if got := memacct.Read().Bytes[memacct.Degrees]; got != before {
			t.Errorf("after a cancelled load %d bytes counted, want %d", got, before)
		}
	}
}
