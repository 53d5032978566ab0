package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestStreamerMatchesAggregate: the streamed input layer's host
// aggregate and own rows equal the CPU kernel's Aggregate and GatherRows
// over the whole input (with hostDropout's mask), within float summation
// tolerance, for both operators, with more sources than one chunk, with
// duplicate edges, isolated destinations and sources no destination
// reads; and the same inputs give bit-identical outputs.
func TestStreamerMatchesAggregate(t *testing.T) {
	seed := *seedFlag
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	const dim = 3
	nd, ns := 3000, 12000 // several chunks of 5000
	b := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: make([]int32, nd+1)}
	for i := range nd {
		if i%97 != 0 { // every 97th destination has no in-edges
			for range 1 + r.IntN(8) {
				j := int32(r.IntN(ns - 100)) // the last 100 sources feed nothing
				b.Indices = append(b.Indices, j)
				if r.IntN(10) == 0 {
					b.Indices = append(b.Indices, j) // a duplicate edge
				}
			}
		}
		b.Indptr[i+1] = int32(len(b.Indices))
	}
	// Global ids: a permutation of a larger id space, so the id order is
	// not the local order.
	ids := r.Perm(4 * ns)[:ns]
	nodes := make([]int64, ns)
	rows := map[int64][]float32{}
	x := make([]float32, ns*dim)
	for j := range nodes {
		nodes[j] = int64(ids[j])
		row := x[j*dim : (j+1)*dim]
		for c := range row {
			row[c] = float32(r.NormFloat64())
		}
		rows[nodes[j]] = slices.Clone(row)
	}
	gather := func(ids []int64, dst []float32) error {
		if !slices.IsSorted(ids) {
			return errors.New("chunk ids not sorted")
		}
		for k, v := range ids {
			copy(dst[k*dim:], rows[v])
		}
		return nil
	}
	be, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const drop, dseed = 0.3, 99
	xd := slices.Clone(x)
	hostDropout(xd, drop, dseed)
	// The block sampled from a larger graph, as GCN's training blocks are
	// (kernels.Block.DstDegrees and SrcDegrees): the destinations without
	// in-edges keep neighbours in the graph.
	bg := *b
	bg.DstDegrees, bg.SrcDegrees = make([]int32, nd), b.OutDegrees()
	for i := range nd {
		bg.DstDegrees[i] = b.Indptr[i+1] - b.Indptr[i] + int32(r.IntN(20))
	}
	for j := range bg.SrcDegrees {
		bg.SrcDegrees[j] += int32(r.IntN(20))
	}
	for _, tc := range []struct {
		op  kernels.AggOp
		own bool
		b   *kernels.Block
	}{{kernels.AggMean, true, b}, {kernels.AggGCN, false, b}, {kernels.AggGCN, false, &bg}} {
		b := tc.b
		name := fmt.Sprint(tc.op)
		if b.DstDegrees != nil {
			name += "/graph-degrees"
		}
		t.Run(name, func(t *testing.T) {
			before := memacct.Read().Bytes[memacct.BatchBuffers]
			s := newStreamer(tc.op, tc.own, dim, 5000)
			out := make([]float32, s.outputs(nd))
			if err := s.run(nodes, b, out, gather, nil, drop, dseed); err != nil {
				t.Fatal(err)
			}
			again := make([]float32, len(out))
			if err := s.run(nodes, b, again, gather, nil, drop, dseed); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out, again) {
				t.Error("two runs over the same batch differ")
			}
			if got := memacct.Read().Bytes[memacct.BatchBuffers] - before; got < streamChunkBytes(dim, 5000)+4*int64(ns+1+len(b.Indices)+ns) {
				t.Errorf("scratch counted %d bytes, want at least the chunk and the order and edges", got)
			}
			s.close()
			if got := memacct.Read().Bytes[memacct.BatchBuffers]; got != before {
				t.Errorf("after close %d bytes counted, before %d", got, before)
			}

			db, err := be.UploadBlock(b)
			if err != nil {
				t.Fatal(err)
			}
			defer be.FreeBlock(db)
			xt, _ := be.Alloc(ns, dim)
			agg, _ := be.Alloc(nd, dim)
			defer be.Free(xt)
			defer be.Free(agg)
			be.Upload(xt, xd)
			be.Aggregate(db, tc.op, agg, xt)
			want := make([]float32, nd*dim)
			if err := be.Download(want, agg); err != nil {
				t.Fatal(err)
			}
			near32(t, "aggregate", out[:nd*dim], want, 1e-5)
			if tc.own {
				if !slices.Equal(out[nd*dim:], xd[:nd*dim]) {
					t.Error("own rows differ from the dropped input's first rows")
				}
			} else if len(out) != nd*dim {
				t.Errorf("%d outputs without own rows, want %d", len(out), nd*dim)
			}
		})
	}
	s := newStreamer(kernels.AggMean, true, dim, 5000)
	defer s.close()
	if err := s.run(nodes, b, make([]float32, 5), gather, nil, 0, 0); err == nil {
		t.Error("a short output buffer was accepted")
	}
	// A read that fails on any chunk fails the run (its reader stopped:
	// TestMain checks for leaked goroutines), and the streamer's slots
	// serve the next run.
	want := make([]float32, s.outputs(nd))
	if err := s.run(nodes, b, want, gather, nil, drop, dseed); err != nil {
		t.Fatal(err)
	}
	errRead := errors.New("read failed")
	for fail := range 3 {
		calls := 0
		failing := func(ids []int64, dst []float32) error {
			if calls++; calls > fail {
				return errRead
			}
			return gather(ids, dst)
		}
		if err := s.run(nodes, b, make([]float32, len(want)), failing, nil, drop, dseed); !errors.Is(err, errRead) {
			t.Errorf("read failing on chunk %d: %v", fail, err)
		}
		got := make([]float32, len(want))
		if err := s.run(nodes, b, got, gather, nil, drop, dseed); err != nil || !slices.Equal(got, want) {
			t.Errorf("after a read failed on chunk %d: %v, equal %v", fail, err, slices.Equal(got, want))
		}
	}
	// Started and abandoned (the gather stage cancelled while waiting for
	// a buffer), with the reader blocked on full slots: abort stops it,
	// and the next batch folds as before. A second start before fold or
	// abort, and a fold without start, are refused.
	if err := s.start(nodes, b, gather); err != nil {
		t.Fatal(err)
	}
	if err := s.start(nodes, b, gather); err == nil {
		t.Error("a second start was accepted")
	}
	s.abort()
	if err := s.fold(make([]float32, len(want)), nil, drop, dseed); err == nil {
		t.Error("fold without start was accepted")
	}
	got := make([]float32, len(want))
	if err := s.start(nodes, b, gather); err != nil {
		t.Fatal(err)
	}
	if err := s.fold(got, nil, drop, dseed); err != nil || !slices.Equal(got, want) {
		t.Errorf("after an abort: %v, equal %v", err, slices.Equal(got, want))
	}
}

func near32(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestStreamInputTrains: training with the streamed input layer ends
// with the weights of the unstreamed run within float tolerance (the same
// dropout masks, another summation order), for SAGE and GCN, whole and
// cut into micro-batches, with history on and off, and on a
// partition-major dataset whose rows partly come from the feature block;
// and two streamed runs are bit-identical.
func TestStreamInputTrains(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	for _, tc := range []struct {
		model  string
		noHist bool
		micro  int
		block  bool
	}{
		{ModelSAGE, false, 0, false},
		{ModelSAGE, true, 2, false},
		{ModelGCN, true, 0, false},
		{ModelGCN, false, 2, false},
		{ModelSAGE, false, 2, true},
	} {
		t.Run(fmt.Sprintf("%s-nohist=%v-micro=%d-block=%v", tc.model, tc.noHist, tc.micro, tc.block), func(t *testing.T) {
			d := smallSynth(t)
			var pf *sample.PartitionFiles
			if tc.block {
				d, pf = relabelledSynth(t)
			}
			opts := func(stream string) *Options {
				o := synthOpts()
				o.Model, o.NoHist, o.Epochs, o.MicroBatches, o.StreamInput = tc.model, tc.noHist, 2, tc.micro, stream
				o.Layers, o.Fanouts, o.Dropout, o.NormalizeFeatures = 3, []int{4, 4, 4}, 0.3, true
				if pf != nil {
					o.Selection, o.Partitions = sample.ModePartition, pf
				}
				return o
			}
			rep0, w0 := trainWeights(t, d, opts(StreamInputOff))
			rep1, w1 := trainWeights(t, d, opts(StreamInputOn))
			var blockRows int64
			rep2 := runThen(t, d, opts(StreamInputOn), func(tr *Trainer) {
				if tr.fb != nil {
					blockRows = tr.fb.hits.Load()
				}
			})
			if tc.block && blockRows == 0 {
				t.Error("no input row came from the feature block")
			}
			if rep0.StreamInput || !rep1.StreamInput {
				t.Fatalf("reports say streamed %v (off) and %v (on)", rep0.StreamInput, rep1.StreamInput)
			}
			sameCurves(t, curves(rep1), curves(rep2), "two streamed runs")
			e0, e1 := rep0.Epochs[0], rep1.Epochs[0]
			if e0.Batches != e1.Batches || e0.MicroBatches != e1.MicroBatches || e0.InputNodes != e1.InputNodes {
				t.Fatalf("streamed epoch %+v, unstreamed %+v", e1, e0)
			}
			if math.Abs(e1.Loss-e0.Loss) > 1e-4*math.Abs(e0.Loss) {
				t.Errorf("epoch loss %v streamed, %v not", e1.Loss, e0.Loss)
			}
			var worst float64
			for i := range w0 {
				for j := range w0[i] {
					worst = max(worst, math.Abs(float64(w1[i][j]-w0[i][j]))/(1e-3+math.Abs(float64(w0[i][j]))))
				}
			}
			t.Logf("largest relative weight difference %.2g", worst)
			if worst > 5e-4 {
				t.Errorf("weights differ from the unstreamed run by up to %.2g (relative)", worst)
			}
		})
	}
}

// TestStreamInputOption: the option's values; GAT, a full-neighbourhood
// input layer and zero-copy on refused with on; and auto without a memory
// plan not streaming.
func TestStreamInputOption(t *testing.T) {
	for _, tc := range []struct {
		stream, model, zc string
		f0                int
		ok                bool
	}{
		{"", ModelSAGE, "", 5, true},
		{StreamInputAuto, ModelGAT, "", 5, true},
		{StreamInputOff, ModelGAT, "", 5, true},
		{StreamInputOn, ModelGCN, ZeroCopyOff, 5, true},
		{StreamInputOn, ModelGAT, "", 5, false},
		{StreamInputOn, ModelSAGE, ZeroCopyOn, 5, false},
		{StreamInputOn, ModelSAGE, "", -1, false},
		{"yes", ModelSAGE, "", 5, false},
	} {
		o := synthOpts()
		o.StreamInput, o.Model, o.ZeroCopy, o.Fanouts = tc.stream, tc.model, tc.zc, []int{tc.f0, 5}
		if err := o.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("stream %q model %s zero-copy %q fanout %d: %v", tc.stream, tc.model, tc.zc, tc.f0, err)
		}
	}
	d := smallSynth(t)
	o := synthOpts()
	o.Epochs = 1
	if rep := run(t, d, o); rep.StreamInput {
		t.Error("auto streamed without a memory plan")
	}
}

// TestStreamInputBudget: under a budget that cuts whole batches into
// micro-batches, auto streams the input layer, and its working set lets
// micro-batches of more rows fit, so there are no more of them (on this
// small graph the batches' ids and the sampling workers dominate, and
// the cut is a power of two, so not necessarily fewer); training then
// stays inside the estimate, and the buffers it counts as it allocates
// them are no more than the unstreamed run's beside the stream's scratch. Where whole batches fit, auto does not
// stream.
func TestStreamInputBudget(t *testing.T) {
	// Rows as wide as the bench's (128 float32): the input rows, not the
	// ids, are then what a batch holds.
	d := dataset(t, "synth-wide", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 3000, FeatDim: 128, Classes: 4, Seed: 7}, nil)
		return err
	})
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	opts := func(stream string) *Options {
		o := synthOpts()
		o.BatchSize, o.Epochs, o.StreamInput = 400, 1, stream
		// One read slot: at this budget the gather session's default 16
		// slots of 256 KiB would leave no room for either choice.
		o.FeatIODepth = 1
		return o
	}
	small := MinimumBudget(d, opts(StreamInputOff)) + 512<<10
	plan := func(stream, name string) (*MemPlan, *Options) {
		o := opts(stream)
		mo := &MemPlanOptions{MemBytes: small, ProfileName: name}
		mp, err := PlanMemory(context.Background(), d, o, mo)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		mp.Apply(o, mo)
		return mp, o
	}
	off, oo := plan(StreamInputOff, "stream-off")
	auto, oa := plan(StreamInputAuto, "stream-auto")
	if off.Budget.StreamInput || oo.StreamInput != StreamInputOff || off.Budget.MicroBatches < 2 {
		t.Fatalf("off: budget %+v, option %q", off.Budget, oo.StreamInput)
	}
	if !auto.Budget.StreamInput || oa.StreamInput != StreamInputOn || !auto.Budget.WorkingSet.Streamed ||
		auto.Budget.MaxBatchRows <= off.Budget.MaxBatchRows || auto.Budget.MicroBatches > off.Budget.MicroBatches {
		t.Fatalf("auto under %d bytes: budget %+v (unstreamed %+v)", small, auto.Budget, off.Budget)
	}
	t.Logf("unstreamed: ≥%d micro-batches of ≤%d rows; streamed: ≥%d of ≤%d", off.Budget.MicroBatches, off.Budget.MaxBatchRows,
		auto.Budget.MicroBatches, auto.Budget.MaxBatchRows)
	ro, ra := run(t, d, oo), run(t, d, oa)
	if !ra.StreamInput || ra.Memory.TotalBytes > small || ra.Epochs[0].MicroBatches > ro.Epochs[0].MicroBatches {
		t.Errorf("streamed run: %+v micro-batches %d (unstreamed %d), memory %d of %d", ra.StreamInput, ra.Epochs[0].MicroBatches,
			ro.Epochs[0].MicroBatches, ra.Memory.TotalBytes, small)
	}
	// What was allocated, counted where it was (memacct), each run's
	// batch buffers at their own largest (MaxByPurpose): per input row of
	// a micro-batch, streaming holds no more than gathering does, beside
	// the stream's scratch, although its micro-batches hold more rows.
	// (The counts when the sum peaked, ByPurpose, compare moments that
	// may fall in training for one run and in evaluation for the other.
	// On this tiny graph, with the reserve floor lowered, both runs'
	// counted peaks may exceed the budget less its reserve: evaluation is
	// a fixed cost that the real floor of 24 MiB absorbs.)
	const buffers = "batch buffers"
	sb, ub := ra.Counted.MaxByPurpose[buffers], ro.Counted.MaxByPurpose[buffers]
	// The chunk slots, and the order and by-source edges of one batch
	// (at most Fanouts[0] edges per input row).
	extra := auto.Budget.WorkingSet.StreamBytes + auto.Budget.MaxBatchRows*(streamRowBytes+streamEdgeBytes*int64(oa.Fanouts[0]))
	perRow := float64(ub) / float64(off.Budget.MaxBatchRows)
	t.Logf("counted %s, largest: streamed %d bytes for micro-batches of ≤ %d rows, unstreamed %d for ≤ %d (%.0f a row), stream scratch at most %d",
		buffers, sb, auto.Budget.MaxBatchRows, ub, off.Budget.MaxBatchRows, perRow, extra)
	if sb <= 0 || float64(sb) > perRow*float64(auto.Budget.MaxBatchRows)+float64(extra) {
		t.Errorf("streamed %s at most %d bytes, more than unstreamed's %.0f a row × %d rows plus stream scratch %d",
			buffers, sb, perRow, auto.Budget.MaxBatchRows, extra)
	}
	// A roomy budget streams for scans of two batches in flight, and
	// keeps whole batches unstreamed when each is scanned alone.
	for _, scan := range []int{0, 1} {
		o := opts(StreamInputAuto)
		o.ScanBatches = scan
		mo := &MemPlanOptions{MemBytes: 64 << 20, ProfileName: "stream-roomy"}
		mp, err := PlanMemory(context.Background(), d, o, mo)
		if err != nil {
			t.Fatal(err)
		}
		if mp.Budget.StreamInput != (scan == 0) || mp.Budget.MicroBatches != 1 || mp.Budget.WorkingSet.InFlight != 2 {
			t.Errorf("roomy budget, scan-batches %d: %+v", scan, mp.Budget)
		}
	}
}

// TestStreamInputEvaluates: a trainer that streams its input layer still
// evaluates and predicts by sampling (which gathers whole input rows,
// cut to the working set the streamed batches were planned), and its
// checkpoint predicts the same without building a streamer, for SAGE and
// GCN (whose streamed batches have no own rows).
func TestStreamInputEvaluates(t *testing.T) {
	d := smallSynth(t)
	for _, model := range []string{ModelSAGE, ModelGCN} {
		t.Run(model, func(t *testing.T) {
			o := synthOpts()
			o.Model, o.Epochs, o.StreamInput, o.EvalMode = model, 1, StreamInputOn, EvalSampled
			o.CheckpointDir, o.MaxBatchRows = t.TempDir(), 300
			var inTrainer []float32
			rep := runThen(t, d, o, func(tr *Trainer) {
				if tr.stream == nil || tr.bound.dst <= 0 || tr.evalBound.rows <= 0 || tr.evalBound.rows >= tr.bound.rows {
					t.Errorf("streamer %v, training cut %+v, evaluation cut %+v", tr.stream != nil, tr.bound, tr.evalBound)
				}
				var err error
				if inTrainer, err = tr.Predict(context.Background(), d.ValidIdx(), o.Fanouts); err != nil {
					t.Fatal(err)
				}
			})
			if e := rep.Epochs[0]; !rep.StreamInput || !e.Evaluated || e.ValidAcc <= 0 {
				t.Fatalf("streamed %v, epoch %+v", rep.StreamInput, e)
			}
			ck, err := NewFromCheckpoint(context.Background(), d, o.CheckpointDir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if ck.stream != nil {
				t.Error("inference from a checkpoint built a streamer")
			}
			got, err := ck.Predict(context.Background(), d.ValidIdx(), o.Fanouts)
			if err != nil {
				t.Fatal(err)
			}
			near32(t, "checkpoint's predictions", got, inTrainer, 1e-4)
		})
	}
}

// BenchmarkStreamerFold measures the streamed input layer's host side
// alone: a batch shaped like the 3 GiB benchmark's (fanout 10, 128
// float32 columns, 18 % of the input rows destinations), its rows served
// from memory, folded with dropout into SAGE's aggregate and own rows.
// Reported in input rows folded per second, to compare with the rows per
// second the device delivers (docs/train.md, "Streamed input layer").
func BenchmarkStreamerFold(b *testing.B) {
	const dim, ns, f0 = 128, 200_000, 10
	nd := ns * 2 / (1 + f0)
	r := rand.New(rand.NewPCG(1, 2))
	blk := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: make([]int32, nd+1)}
	for i := range nd {
		for range f0 {
			blk.Indices = append(blk.Indices, int32(r.IntN(ns)))
		}
		blk.Indptr[i+1] = int32(len(blk.Indices))
	}
	nodes := make([]int64, ns)
	for j, v := range r.Perm(ns) {
		nodes[j] = int64(v)
	}
	feats := make([]float32, ns*dim)
	for i := range feats {
		feats[i] = r.Float32()
	}
	gather := func(ids []int64, dst []float32) error {
		for k, v := range ids {
			copy(dst[k*dim:(k+1)*dim], feats[v*dim:(v+1)*dim])
		}
		return nil
	}
	s := newStreamer(kernels.AggMean, true, dim, streamChunkRows)
	defer s.close()
	out := make([]float32, s.outputs(nd))
	b.ResetTimer()
	for b.Loop() {
		if err := s.run(nodes, blk, out, gather, nil, 0.1, 7); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ns)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// run is start then fold: the tests' one-call streamer.
func (s *streamer) run(nodes []int64, b0 *kernels.Block, out []float32, gather func(ids []int64, dst []float32) error,
	prep func([]float32), drop float32, seed uint64) error {
	if err := s.start(nodes, b0, gather); err != nil {
		return err
	}
	return s.fold(out, prep, drop, seed)
}

// TestSortByID: the streamed order is the ids' ascending order, ties by
// index, whether the ids fit the packed radix keys or not, and its keys
// are counted while held.
func TestSortByID(t *testing.T) {
	r := rand.New(rand.NewPCG(*seedFlag, 9))
	for _, tc := range []struct {
		n     int
		maxID int64
	}{{0, 1}, {1, 1}, {7, 3}, {1000, 100}, {50000, 1 << 23}, {50000, 1 << 32}, {3000, 1 << 40}, {3000, 1<<32 + 5}} {
		nodes := make([]int64, tc.n)
		for i := range nodes {
			nodes[i] = r.Int64N(tc.maxID)
		}
		want := make([]int32, tc.n)
		for j := range want {
			want[j] = int32(j)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(nodes[a], nodes[b]) })
		var s streamer
		got := make([]int32, tc.n)
		s.sortByID(got, nodes)
		if !slices.Equal(got, want) {
			t.Fatalf("%d ids below %d: order differs from a stable sort", tc.n, tc.maxID)
		}
		if s.counted < 8*int64(cap(s.keys)) {
			t.Errorf("%d ids: %d bytes counted for %d keys", tc.n, s.counted, cap(s.keys))
		}
		s.close()
	}
}

// BenchmarkSortByID orders one full streamed batch's input rows (555 k
// distinct ids out of 5.4 M, as at 3 GiB in docs/ooc.md): the packed radix
// keys against the comparison sort through the ids it replaced.
func BenchmarkSortByID(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := r.Perm(5368709)[:555000]
	nodes := make([]int64, len(ids))
	for i, v := range ids {
		nodes[i] = int64(v)
	}
	order := make([]int32, len(nodes))
	b.Run("radix", func(b *testing.B) {
		var s streamer
		defer s.close()
		for b.Loop() {
			s.sortByID(order, nodes)
		}
	})
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			for j := range order {
				order[j] = int32(j)
			}
			slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(nodes[a], nodes[b]), cmp.Compare(a, b)) })
		}
	})
}

// TestStreamerGroup: a scan of several batches whose sources overlap
// gives every batch bit-for-bit what it gets scanned alone (same order of
// sums, same dropout masks, whatever the chunk boundaries), for both
// operators, with and without dropout and normalisation; the group's reads
// ask for each id once, in ascending order; and a failed read, an abort
// and mismatched outputs leave the streamer usable.
func TestStreamerGroup(t *testing.T) {
	seed := *seedFlag
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 21))
	const dim, space = 4, 20000
	feat := func(id int64) []float32 {
		row := make([]float32, dim)
		for c := range row {
			row[c] = float32(math.Sin(float64(id*dim + int64(c))))
		}
		return row
	}
	var reads [][]int64
	gather := func(ids []int64, dst []float32) error {
		reads = append(reads, slices.Clone(ids))
		for k, v := range ids {
			copy(dst[k*dim:], feat(v))
		}
		return nil
	}
	prep := func(x []float32) {
		for i := range x {
			x[i] = x[i]*0.5 + 1
		}
	}
	// Batches drawing their sources from a shared pool of ids, so that
	// they overlap, and one with no overlap.
	mk := func(ns, nd int, pool []int) streamInput {
		b := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: make([]int32, nd+1)}
		for i := range nd {
			for range r.IntN(6) {
				b.Indices = append(b.Indices, int32(r.IntN(ns)))
			}
			b.Indptr[i+1] = int32(len(b.Indices))
		}
		nodes := make([]int64, ns)
		for j, k := range r.Perm(len(pool))[:ns] {
			nodes[j] = int64(pool[k])
		}
		return streamInput{nodes: nodes, b0: b}
	}
	pool := r.Perm(space)[:9000]
	in := []streamInput{mk(6000, 1500, pool), mk(7000, 900, pool), mk(50, 10, r.Perm(space)[:60]), mk(4000, 1000, pool[:5000])}
	for _, tc := range []struct {
		op   kernels.AggOp
		own  bool
		drop float32
		prep bool
	}{{kernels.AggMean, true, 0, false}, {kernels.AggMean, true, 0.4, true}, {kernels.AggGCN, false, 0.2, false}} {
		t.Run(fmt.Sprintf("%v/drop%v/prep%v", tc.op, tc.drop, tc.prep), func(t *testing.T) {
			var pf func([]float32)
			if tc.prep {
				pf = prep
			}
			before := memacct.Read().Bytes[memacct.BatchBuffers]
			s := newStreamer(tc.op, tc.own, dim, 1000)
			alone := make([][]float32, len(in))
			for m, x := range in {
				alone[m] = make([]float32, s.outputs(x.b0.NumDst))
				if err := s.run(x.nodes, x.b0, alone[m], gather, pf, tc.drop, uint64(m+5)); err != nil {
					t.Fatal(err)
				}
			}
			for _, g := range [][]int{{0, 1}, {1, 0}, {0, 1, 2, 3}, {2}, {3, 0}} {
				reads = nil
				var gin []streamInput
				var outs []streamOutput
				for _, m := range g {
					gin = append(gin, in[m])
					outs = append(outs, streamOutput{make([]float32, len(alone[m])), tc.drop, uint64(m + 5)})
				}
				if err := s.startGroup(gin, gather); err != nil {
					t.Fatal(err)
				}
				if err := s.foldGroup(outs, pf); err != nil {
					t.Fatal(err)
				}
				for k, m := range g {
					if !slices.Equal(outs[k].out, alone[m]) {
						t.Fatalf("group %v: batch %d differs from its scan alone", g, m)
					}
				}
				var all, want []int64
				for _, ch := range reads {
					all = append(all, ch...)
				}
				for _, x := range gin {
					want = append(want, x.nodes...)
				}
				slices.Sort(want)
				want = slices.Compact(want)
				if !slices.Equal(all, want) {
					t.Fatalf("group %v: reads asked for %d ids, want the %d of the union once each in order", g, len(all), len(want))
				}
			}
			// Mismatched outputs, a failed read and an abort.
			if err := s.startGroup(in[:2], gather); err != nil {
				t.Fatal(err)
			}
			if err := s.foldGroup([]streamOutput{{make([]float32, len(alone[0])), 0, 0}}, nil); err == nil {
				t.Error("one output for a scan of two was accepted")
			}
			errRead := errors.New("read failed")
			if err := s.startGroup(in[:2], func([]int64, []float32) error { return errRead }); err != nil {
				t.Fatal(err)
			}
			o2 := []streamOutput{{make([]float32, len(alone[0])), tc.drop, 5}, {make([]float32, len(alone[1])), tc.drop, 6}}
			if err := s.foldGroup(o2, pf); !errors.Is(err, errRead) {
				t.Errorf("failing read: %v", err)
			}
			if err := s.startGroup(in[:2], gather); err != nil {
				t.Fatal(err)
			}
			s.abort()
			if err := s.startGroup(nil, gather); err == nil {
				t.Error("an empty scan was accepted")
			}
			if err := s.startGroup(in[:2], gather); err != nil {
				t.Fatal(err)
			}
			if err := s.foldGroup(o2, pf); err != nil || !slices.Equal(o2[0].out, alone[0]) || !slices.Equal(o2[1].out, alone[1]) {
				t.Errorf("after a failure and an abort: %v", err)
			}
			s.close()
			if got := memacct.Read().Bytes[memacct.BatchBuffers]; got != before {
				t.Errorf("after close %d bytes counted, before %d", got, before)
			}
		})
	}
}

// TestScanBatchesTrains: training whose streamed scans read two batches
// (or micro-batches) at once ends bit-identical to scanning each alone,
// with history on and off, cut into micro-batches, and on a
// partition-major dataset whose scans keep to one macro batch; and the
// gather stage requests fewer rows, since rows the batches of a scan
// share are read once.
func TestScanBatchesTrains(t *testing.T) {
	for _, tc := range []struct {
		model  string
		noHist bool
		micro  int
		block  bool
	}{
		{ModelSAGE, false, 0, false},
		{ModelSAGE, true, 0, false},
		{ModelGCN, false, 2, false},
		{ModelSAGE, false, 0, true},
	} {
		t.Run(fmt.Sprintf("%s-nohist=%v-micro=%d-block=%v", tc.model, tc.noHist, tc.micro, tc.block), func(t *testing.T) {
			d := smallSynth(t)
			var pf *sample.PartitionFiles
			if tc.block {
				d, pf = relabelledSynth(t)
			}
			opts := func(scan int) *Options {
				o := synthOpts()
				o.Model, o.NoHist, o.Epochs, o.MicroBatches, o.StreamInput, o.ScanBatches = tc.model, tc.noHist, 2, tc.micro, StreamInputOn, scan
				o.Layers, o.Fanouts, o.Dropout, o.NormalizeFeatures, o.InFlight = 3, []int{4, 4, 4}, 0.3, true, 2
				if pf != nil {
					o.Selection, o.Partitions = sample.ModePartition, pf
				}
				return o
			}
			rep1, w1 := trainWeights(t, d, opts(1))
			rep2, w2 := trainWeights(t, d, opts(2))
			sameCurves(t, curves(rep1), curves(rep2), "scans of one and of two batches")
			for i := range w1 {
				if !slices.Equal(w1[i], w2[i]) {
					t.Fatalf("weights %d differ between scans of one and of two batches", i)
				}
			}
			g1, g2 := gatherStage(rep1.Epochs[0].Storage), gatherStage(rep2.Epochs[0].Storage)
			t.Logf("gather rows requested: %d alone, %d in scans of two", g1.Rows, g2.Rows)
			if tc.block {
				// The block serves a macro batch's own rows before the
				// cache sees them; only the misses are compared.
				if g2.Rows > g1.Rows {
					t.Errorf("scans of two requested %d rows, alone %d", g2.Rows, g1.Rows)
				}
			} else if g2.Rows >= g1.Rows {
				t.Errorf("scans of two requested %d rows, alone %d: shared rows were not read once", g2.Rows, g1.Rows)
			}
		})
	}
}

// TestScanBatchesOption: the option's range.
func TestScanBatchesOption(t *testing.T) {
	for _, tc := range []struct {
		scan, inFlight int
		ok             bool
		want           int
	}{
		{0, 0, true, 2}, {1, 0, true, 1}, {2, 0, true, 2}, {0, 1, true, 1}, {0, 3, true, PipelineDepth},
		{2, 1, false, 0}, {3, 3, false, 0}, {-1, 0, false, 0},
	} {
		o := synthOpts()
		o.ScanBatches, o.InFlight = tc.scan, tc.inFlight
		err := o.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("scan %d in flight %d: %v", tc.scan, tc.inFlight, err)
			continue
		}
		if w := o.withDefaults(); tc.ok && scanBatches(&w) != tc.want {
			t.Errorf("scan %d in flight %d: scans of %d, want %d", tc.scan, tc.inFlight, scanBatches(&w), tc.want)
		}
	}
}

// TestWholeShareForScans: where two whole streamed batches take more than
// two thirds of what the reserve, the fixed state and the tables leave
// but less than seven eighths, scans of two keep them whole (and in
// flight), while batches scanned alone are cut into micro-batches.
func TestWholeShareForScans(t *testing.T) {
	d := smallSynth(t)
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	opts := func(scan int) *Options {
		o := synthOpts()
		o.StreamInput, o.InFlight, o.ScanBatches, o.FeatIODepth = StreamInputOn, 2, scan, 1
		w := o.withDefaults()
		return &w
	}
	o := opts(2)
	ws := WorkingSet(d, o, nil).Bytes
	tables := planner.TableBytes(d.NumNodes(), true)
	avail := func(mem int64) int64 { return mem - RuntimeReserve(mem) - FixedState(d, o, nil).Bytes - tables }
	// The least budget whose avail holds ws in seven eighths.
	lo, hi := int64(1), int64(1)<<40
	for lo < hi {
		mid := lo + (hi-lo)/2
		if wholeShare(avail(mid), true) >= ws {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	mem := lo
	if wholeShare(avail(mem), false) >= ws {
		t.Fatalf("at %d bytes two thirds already hold the working set %d", mem, ws)
	}
	for _, tc := range []struct {
		scan  int
		whole bool
	}{{2, true}, {1, false}} {
		b, err := divide(d, opts(tc.scan), nil, mem)
		if err != nil {
			t.Fatalf("scan %d: %v", tc.scan, err)
		}
		if (b.MicroBatches == 1) != tc.whole || !b.StreamInput {
			t.Errorf("scan %d at %d bytes: %d micro-batches, streamed %v", tc.scan, mem, b.MicroBatches, b.StreamInput)
		}
	}
}
