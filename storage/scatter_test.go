package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
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

// openReader opens d's features for pread with mode and engine eng,
// closed with the test; it skips where the file system refuses O_DIRECT
// or the kernel io_uring.
func openReader(t *testing.T, d *storage.Dataset, mode storage.ReadMode, eng storage.IOEngine, st *storage.StageCounters) *storage.RowReader {
	t.Helper()
	r, err := d.OpenRowReader(storage.FileFeatures, mode, st)
	if errors.Is(err, storage.ErrDirectUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.SetEngine(eng); err != nil {
		t.Skip(err) // a kernel without io_uring
	}
	return r
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
						r := openReader(t, d, mode, eng, storage.NewAccounting().Stage(storage.StageGather))
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
							if err := r.ReadScattered(reqs, got, storage.ScatterOptions{GapRows: gap, MaxReadBytes: 8 << 10, Depth: 4, Chunk: 1 + int(gap)*50}); err != nil {
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

// TestReadRanges checks ReadRanges against the mapped rows for every
// engine, read mode and gap, with overlapping ranges and ranges longer
// than one read slot, and its accounting of requests.
func TestReadRanges(t *testing.T) {
	const n, dim = 3000, 3 // 12-byte rows: ranges start and end mid-block
	d := scatterDataset(t, n, dim)
	for _, mode := range []storage.ReadMode{storage.ReadBuffered, storage.ReadDirect} {
		for _, eng := range []storage.IOEngine{storage.IOPread, storage.IOUring} {
			for _, gap := range []int64{0, 1, 100} {
				t.Run(fmt.Sprintf("%s/%s/gap%d", mode, eng, gap), func(t *testing.T) {
					acc := storage.NewAccounting()
					r := openReader(t, d, mode, eng, acc.Stage(storage.StageSample))
					rb := r.RowBytes()
					rng := rand.New(rand.NewPCG(uint64(gap), 7))
					reqs := make([]storage.RangeReq, 300)
					var pos, rows int64
					for k := range reqs {
						cnt := 1 + rng.Int64N(20)
						if k%50 == 0 {
							cnt = 200 + rng.Int64N(400) // several 1 KiB slots
						}
						row := rng.Int64N(n - cnt + 1)
						reqs[k] = storage.RangeReq{Row: row, N: cnt, Pos: pos}
						pos += cnt
					}
					want := make([]byte, pos*rb)
					for _, q := range reqs {
						rows += q.N
						for i := range q.N {
							copy(want[(q.Pos+i)*rb:], d.FeatureBytes(q.Row+i))
						}
					}
					before := acc.Snapshot()[0]
					got := make([]byte, len(want))
					for range 2 { // the second call reuses the session
						clear(got)
						if err := r.ReadRanges(reqs, got, storage.ScatterOptions{GapRows: gap, MaxReadBytes: 1 << 10, Depth: 4, Chunk: 37}); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatal("ranges differ from the mapping")
						}
					}
					s := acc.Snapshot()[0]
					if dr, db := s.Rows-before.Rows, s.BytesRequested-before.BytesRequested; dr != 2*int64(len(reqs)) || db != 2*rows*rb {
						t.Fatalf("requests counted %d items, %d bytes; want %d, %d", dr, db, 2*len(reqs), 2*rows*rb)
					}
				})
			}
		}
	}
}

func TestReadRangesOutOfRange(t *testing.T) {
	d := scatterDataset(t, 10, 4)
	r, err := d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := make([]byte, 64)
	for _, q := range []storage.RangeReq{{Row: 9, N: 2}, {Row: -1, N: 1}, {Row: 0, N: 0}, {Row: 0, N: 3, Pos: 2}, {Row: 0, N: 1, Pos: -1}} {
		if err := r.ReadRanges([]storage.RangeReq{q}, dst, storage.ScatterOptions{}); err == nil {
			t.Fatalf("%+v accepted", q)
		}
	}
}

// TestScatterSessionCounted: a read session's slots and per-item state
// are counted in memacct.BatchBuffers where they are allocated, within
// ScratchBytesFor plus SessionItemBytes per item, and uncounted on Close.
func TestScatterSessionCounted(t *testing.T) {
	const n, dim = 20000, 3
	d := scatterDataset(t, n, dim)
	base := memacct.Read().Bytes[memacct.BatchBuffers]
	r, err := d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := storage.ScatterOptions{GapRows: 4, MaxAmplification: 2, MaxReadBytes: 4 << 10, Depth: 4}
	reqs := make([]storage.RangeReq, 0, n/3)
	for row := int64(0); row+2 <= n; row += 3 {
		reqs = append(reqs, storage.RangeReq{Row: row, N: 2, Pos: int64(len(reqs)) * 2})
	}
	dst := make([]byte, int64(len(reqs))*2*r.RowBytes())
	if err := r.ReadRanges(reqs, dst, o); err != nil {
		t.Fatal(err)
	}
	got := memacct.Read().Bytes[memacct.BatchBuffers] - base
	items := int64(len(reqs))
	lo := r.ScratchBytesFor(o) + items*(24+32) // a request and an extent per item
	hi := r.ScratchBytesFor(o) + items*storage.SessionItemBytes
	if got < lo || got > hi {
		t.Fatalf("%d items: counted %d bytes, want in [%d, %d]", items, got, lo, hi)
	}
	// ReadScattered's session within the bound planners use before a
	// reader is open, for one chunk and for several.
	for _, k := range []int64{100, n} {
		rows := make([]storage.RowReq, k)
		for i := range rows {
			rows[i] = storage.RowReq{ID: int64(i), Pos: int64(i)}
		}
		rr, err := d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := memacct.Read().Bytes[memacct.BatchBuffers]
		co := storage.ScatterOptions{MaxReadBytes: 10000, Depth: 4, Chunk: 5000} // not a multiple of any alignment
		if err := rr.ReadScattered(rows, make([]byte, k*rr.RowBytes()), co); err != nil {
			t.Fatal(err)
		}
		held := memacct.Read().Bytes[memacct.BatchBuffers] - before
		if bound := storage.SessionBytesBound(rr.RowBytes(), k, co); held <= 0 || held > bound {
			t.Errorf("ReadScattered of %d rows: counted %d bytes, bound %d", k, held, bound)
		}
		rr.Close()
	}
	r.Close()
	if left := memacct.Read().Bytes[memacct.BatchBuffers] - base; left != 0 {
		t.Fatalf("%d bytes still counted after Close", left)
	}
}

// TestReadModelChunks: ReadModel plans in ReadScattered's chunks, so its
// reads and bytes are the calls' own, chunk boundaries included.
func TestReadModelChunks(t *testing.T) {
	d := scatterDataset(t, 5000, 3)
	for _, chunk := range []int{1, 7, 100, 0} {
		acc := storage.NewAccounting()
		r := openReader(t, d, storage.ReadBuffered, storage.IOPread, acc.Stage(storage.StageGather))
		o := storage.ScatterOptions{GapRows: 20, MaxReadBytes: 2 << 10, Chunk: chunk}
		rng := rand.New(rand.NewPCG(uint64(chunk), 3))
		ids := make([]int64, 600)
		for i := range ids {
			ids[i] = rng.Int64N(5000)
		}
		slices.Sort(ids)
		m, err := r.ReadModel(o)
		if err != nil {
			t.Fatal(err)
		}
		var reads, bytes int64
		next := 0
		m.Walk(ids, func(first, n int, b int64) {
			if first != next {
				t.Fatalf("chunk %d: read covers from %d, want %d", chunk, first, next)
			}
			next += n
			reads++
			bytes += b
		})
		reqs := make([]storage.RowReq, len(ids))
		for i, id := range ids {
			reqs[i] = storage.RowReq{ID: id, Pos: int64(i)}
		}
		before := acc.Snapshot()[0]
		if err := r.ReadScattered(reqs, make([]byte, int64(len(ids))*r.RowBytes()), o); err != nil {
			t.Fatal(err)
		}
		got := acc.Snapshot()[0]
		if next != len(ids) || got.ReadCalls-before.ReadCalls != reads || got.BytesRead-before.BytesRead != bytes {
			t.Fatalf("chunk %d: model %d reads, %d bytes over %d ids; ReadScattered %d reads, %d bytes",
				chunk, reads, bytes, next, got.ReadCalls-before.ReadCalls, got.BytesRead-before.BytesRead)
		}
	}
}

// TestReadModelSetChunk: a model of the gather's own chunk, told to plan
// in smaller pieces (SetChunk), walks as a model made with that chunk; a
// larger or non-positive one changes nothing.
func TestReadModelSetChunk(t *testing.T) {
	d := scatterDataset(t, 5000, 3)
	r := openReader(t, d, storage.ReadBuffered, storage.IOPread, nil)
	rng := rand.New(rand.NewPCG(9, 3))
	ids := make([]int64, 600)
	for i := range ids {
		ids[i] = rng.Int64N(5000)
	}
	slices.Sort(ids)
	walk := func(m *storage.ReadModel) (reads [][3]int64) {
		m.Walk(ids, func(first, n int, b int64) { reads = append(reads, [3]int64{int64(first), int64(n), b}) })
		return reads
	}
	model := func(chunk int) *storage.ReadModel {
		m, err := r.ReadModel(storage.ScatterOptions{GapRows: 20, MaxReadBytes: 2 << 10, Chunk: chunk})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct{ own, set, want int }{{100, 7, 7}, {100, 1, 1}, {100, 500, 100}, {100, 0, 100}, {100, -3, 100}} {
		m := model(tc.own)
		m.SetChunk(tc.set)
		if got, want := walk(m), walk(model(tc.want)); !slices.Equal(got, want) {
			t.Errorf("chunk %d, SetChunk(%d): %d reads, want those of chunk %d (%d)", tc.own, tc.set, len(got), tc.want, len(want))
		}
	}
	if a, b := walk(model(7)), walk(model(100)); slices.Equal(a, b) {
		t.Fatal("chunks 7 and 100 plan the same reads: the test needs ids that tell them apart")
	}
}

// TestScatterCredit: CreditRows widens the cap of every read plan of a
// call by that plan's share. 100 misses one row apart (the rows between
// are the caller's, say a cache's hits), 10 to a plan, cap 1.5: without
// credit no one-row gap fits (a plan's 10 rows allow 5 rows of gap, and
// its 9 equal gaps merge together or not at all), so every miss is its
// own read; with the 99 rows between them credited (about 10 a plan)
// each plan is one read. ReadRanges splits the credit the same way.
func TestScatterCredit(t *testing.T) {
	d := scatterDataset(t, 200, 128)
	for _, tc := range []struct {
		credit int64
		calls  int64
	}{{0, 100}, {99, 10}} {
		st := storage.NewAccounting()
		r := openReader(t, d, storage.ReadBuffered, storage.IOPread, st.Stage("gather"))
		reqs := make([]storage.RowReq, 100)
		ranges := make([]storage.RangeReq, 100)
		for k := range reqs {
			reqs[k] = storage.RowReq{ID: int64(2 * k), Pos: int64(k)}
			ranges[k] = storage.RangeReq{Row: int64(2 * k), N: 1, Pos: int64(k)}
		}
		dst := make([]byte, 100*512)
		o := storage.ScatterOptions{GapRows: 4, MaxAmplification: 1.5, Chunk: 10, CreditRows: tc.credit}
		if err := r.ReadScattered(reqs, dst, o); err != nil {
			t.Fatal(err)
		}
		if s := st.Snapshot()[0]; s.ReadCalls != tc.calls {
			t.Errorf("ReadScattered, credit %d rows: %d read calls, want %d", tc.credit, s.ReadCalls, tc.calls)
		}
		for k := range reqs {
			if got := dst[k*512 : (k+1)*512]; !bytes.Equal(got, d.FeatureBytes(int64(2*k))) {
				t.Fatalf("credit %d: row %d differs", tc.credit, 2*k)
			}
		}
		before := st.Snapshot()[0].ReadCalls
		if err := r.ReadRanges(ranges, dst, o); err != nil {
			t.Fatal(err)
		}
		if got := st.Snapshot()[0].ReadCalls - before; got != tc.calls {
			t.Errorf("ReadRanges, credit %d rows: %d read calls, want %d", tc.credit, got, tc.calls)
		}
	}
}
