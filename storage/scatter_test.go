package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

func scatterDataset(t *testing.T, n, dim int) *storage.Dataset {
	adj := make([][]int64, n)
	return storagetest.Write(t, t.TempDir(), storagetest.Graph{Adj: adj, FeatDim: dim,
		Feature: func(v int64, row []float32) {
			for j := range row {
				row[j] = float32(v*1000 + int64(j))
			}
		}})
}

// TestReadScattered checks every engine, read mode and gap against the
// mapped rows, with duplicates, on aligned 512-byte rows and on unaligned
// 12-byte rows.
func TestReadScattered(t *testing.T) {
	for _, dim := range []int{128, 3} {
		d := scatterDataset(t, 3000, dim)
		for _, mode := range []storage.ReadMode{storage.ReadBuffered, storage.ReadDirect} {
			for _, eng := range []storage.IOEngine{storage.IOPread, storage.IOUring} {
				for _, gap := range []int64{0, 1, 30} {
					t.Run(fmt.Sprintf("dim%d/%s/%s/gap%d", dim, mode, eng, gap), func(t *testing.T) {
						st := storage.NewAccounting().Stage(storage.StageGather)
						r, err := d.OpenRowReader(storage.FileFeatures, mode, st)
						if errors.Is(err, storage.ErrDirectUnsupported) {
							t.Skip(err)
						}
						if err != nil {
							t.Fatal(err)
						}
						defer r.Close()
						if err := r.SetEngine(eng); err != nil {
							t.Skip(err) // a kernel without io_uring
						}
						rng := rand.New(rand.NewPCG(uint64(dim), uint64(gap)))
						reqs := make([]storage.RowReq, 700)
						want := make([]byte, int64(len(reqs))*r.RowBytes())
						for k := range reqs {
							id := rng.Int64N(3000)
							if k > 0 && k%7 == 0 {
								id = reqs[k-1].ID // a duplicate
							}
							reqs[k] = storage.RowReq{ID: id, Pos: int64(k)}
							copy(want[int64(k)*r.RowBytes():], d.FeatureBytes(id))
						}
						got := make([]byte, len(want))
						for range 2 { // the second call reuses the session
							clear(got)
							if err := r.ReadScattered(reqs, got, storage.ScatterOptions{GapRows: gap, MaxReadBytes: 8 << 10, Depth: 4}); err != nil {
								t.Fatal(err)
							}
							if !bytes.Equal(got, want) {
								t.Fatal("rows differ from the mapping")
							}
						}
					})
				}
			}
		}
	}
}

// TestReadScatteredAccounting: 1000 consecutive 512-byte rows after the
// 4096-byte .npy header, merged into 64 KiB reads, are 8 reads (7 of 128
// rows and one of 104) of exactly the rows' bytes; one read per row
// without merging.
func TestReadScatteredAccounting(t *testing.T) {
	d := scatterDataset(t, 1000, 128)
	for _, tc := range []struct {
		gap         int64
		calls, read int64
	}{{0, 1000, 512000}, {2, 8, 512000}} {
		for _, eng := range []storage.IOEngine{storage.IOPread, storage.IOUring} {
			st := storage.NewAccounting()
			r, err := d.OpenRowReader(storage.FileFeatures, storage.ReadAuto, st.Stage("gather"))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.SetEngine(eng); err != nil {
				r.Close()
				t.Logf("%s: %v", eng, err)
				continue
			}
			reqs := make([]storage.RowReq, 1000)
			for k := range reqs {
				reqs[k] = storage.RowReq{ID: int64(999 - k), Pos: int64(k)}
			}
			dst := make([]byte, 1000*512)
			before := st.Snapshot()[0] // OpenRowReader's O_DIRECT probe read
			if err := r.ReadScattered(reqs, dst, storage.ScatterOptions{GapRows: tc.gap, MaxReadBytes: 64 << 10}); err != nil {
				t.Fatal(err)
			}
			r.Close()
			s := st.Snapshot()[0]
			s.BytesRead -= before.BytesRead
			s.ReadCalls -= before.ReadCalls
			if s.Rows != 1000 || s.BytesRequested != 512000 || s.ReadCalls != tc.calls || s.BytesRead != tc.read {
				t.Fatalf("gap %d %s (%s): %+v, want %d calls, %d bytes read", tc.gap, eng, r.Mode(), s, tc.calls, tc.read)
			}
		}
	}
}

func TestReadScatteredRange(t *testing.T) {
	d := scatterDataset(t, 10, 4)
	r, err := d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := make([]byte, 32)
	for _, q := range []storage.RowReq{{ID: 10, Pos: 0}, {ID: -1, Pos: 0}, {ID: 0, Pos: 2}} {
		if err := r.ReadScattered([]storage.RowReq{q}, dst, storage.ScatterOptions{}); err == nil {
			t.Fatalf("%+v accepted", q)
		}
	}
}
