package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// relabelledSynth is smallSynth relabelled by a 30-part partitioning,
// with that partitioning opened as sample.PartitionFiles.
func relabelledSynth(t *testing.T) (*storage.Dataset, *sample.PartitionFiles) {
	t.Helper()
	const name = "fb"
	d := dataset(t, "synth-pm", func(dir string) error {
		src := smallSynth(t)
		if !partition.Exists(src.Dir(), name) {
			if _, err := partition.Run(src, &partition.Options{Parts: 30, Name: name, Seed: 1, Workers: 2}); err != nil {
				return err
			}
		}
		pt, err := partition.Open(src.Dir(), name)
		if err != nil {
			return err
		}
		defer pt.Close()
		_, err = partition.Relabel(context.Background(), src, pt, dir, nil)
		return err
	})
	pt, err := partition.Open(d.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Close(); pt.Close() })
	return d, pf
}

// TestFeatureBlock: the block changes where input rows come from, never
// what they are, so training with and without it gives the same losses;
// with it, fewer rows reach the gather stage's storage reads; its memory
// stays within FeatureBlockBytes and is released on Close.
func TestFeatureBlock(t *testing.T) {
	d, pf := relabelledSynth(t)
	if _, _, ok := pf.PartRange(0); !ok {
		t.Fatal("the relabelled dataset's partitioning is not seen as contiguous")
	}
	dyn0 := memacct.Read().Bytes[memacct.DynamicCache]
	var reps [2]*Report
	for i, off := range []bool{false, true} {
		o := &Options{Model: ModelSAGE, Layers: 2, Hidden: 8, Epochs: 2, EvalEvery: 100, BatchSize: 100, Fanouts: []int{4, 4},
			Seed: *seedFlag, NoHist: true, Selection: sample.ModePartition, Partitions: pf, PartsPerBatch: 5, NoFeatureBlock: off}
		tr, err := New(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		if (tr.fb == nil) != off {
			t.Fatalf("NoFeatureBlock=%v: block %v", off, tr.fb != nil)
		}
		rep, err := tr.Run(context.Background())
		if err == nil && !off {
			if got, bound := int64(cap(tr.fb.buf)), FeatureBlockBytes(d, &tr.o); got > bound || got == 0 {
				t.Errorf("block buffer %d bytes, FeatureBlockBytes %d", got, bound)
			}
			if ws := WorkingSet(d, &tr.o, nil); ws.FeatureBlockBytes != FeatureBlockBytes(d, &tr.o) {
				t.Errorf("working set reserves %d for the block, want %d", ws.FeatureBlockBytes, FeatureBlockBytes(d, &tr.o))
			}
		}
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = rep
	}
	if got := memacct.Read().Bytes[memacct.DynamicCache]; got != dyn0 {
		t.Errorf("dynamic cache memory %d after Close, %d before", got, dyn0)
	}
	gatherRead := func(e EpochStats) int64 {
		for _, s := range e.Storage {
			if s.Stage == storage.StageGather {
				return s.BytesRead
			}
		}
		return 0
	}
	for k := range reps[0].Epochs {
		on, off := reps[0].Epochs[k], reps[1].Epochs[k]
		if on.Loss != off.Loss || on.TrainAcc != off.TrainAcc {
			t.Errorf("epoch %d: loss %v / acc %v with the block, %v / %v without", k, on.Loss, on.TrainAcc, off.Loss, off.TrainAcc)
		}
		if on.FeatureBlockRows == 0 || on.FeatureBlockLoads == 0 || off.FeatureBlockRows != 0 {
			t.Errorf("epoch %d: block rows %d (loads %d), without %d", k, on.FeatureBlockRows, on.FeatureBlockLoads, off.FeatureBlockRows)
		}
		if gatherRead(on) >= gatherRead(off) {
			t.Errorf("epoch %d: gather read %d bytes with the block, %d without", k, gatherRead(on), gatherRead(off))
		}
	}
}

// TestFeatureBlockGather checks the in-place expansion of gatherF32
// against row-by-row decoding, for ids in and out of the block, repeats
// included.
func TestFeatureBlockGather(t *testing.T) {
	d, pf := relabelledSynth(t)
	o := &Options{Selection: sample.ModePartition, Partitions: pf}
	fb, err := newFeatBlock(d, o)
	if err != nil || fb == nil {
		t.Fatalf("newFeatBlock: %v %v", fb, err)
	}
	defer fb.close()
	if err := fb.load(0, []int{3, 1, 2, 7}); err != nil {
		t.Fatal(err)
	}
	lo1, _, _ := pf.PartRange(1)
	_, hi3, _ := pf.PartRange(3)
	lo7, _, _ := pf.PartRange(7)
	ids := []int64{0, lo1, hi3 - 1, hi3, lo7, lo1, d.NumNodes() - 1, lo7 + 1, 5}
	dim := d.FeatDim()
	got := make([]float32, len(ids)*dim)
	var missed []int64
	err = fb.gatherF32(ids, got, dim, func(m []int64, dst []float32) error {
		missed = append(missed, m...)
		for i, v := range m {
			d.FeatureRow(v, dst[i*dim:(i+1)*dim])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, dim)
	for i, v := range ids {
		d.FeatureRow(v, want)
		for c := range dim {
			if got[i*dim+c] != want[c] {
				t.Fatalf("row %d (node %d) column %d: %v, want %v", i, v, c, got[i*dim+c], want[c])
			}
		}
	}
	for _, v := range missed {
		if fb.offset(v) >= 0 {
			t.Errorf("node %d is in the block but was read as a miss", v)
		}
	}
	if len(missed) == 0 || len(missed) == len(ids) {
		t.Errorf("missed %v: want a mix of hits and misses", missed)
	}
}

// TestFeatureBlockAdapts: a budget that holds the working set but not the
// partition-major feature block beside it turns the block off (Budget,
// MemPlan.Apply, the trainer) instead of refusing; a larger one keeps the
// block; one too small even without it still refuses, naming the block.
func TestFeatureBlockAdapts(t *testing.T) {
	d, pf := relabelledSynth(t)
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	o := blockOpts(pf, 0).withDefaults()
	block := FeatureBlockBytes(d, &o)
	if block <= 0 {
		t.Fatal("no feature block on the relabelled dataset")
	}
	withBlock := leastBudget(d, &o, func(b *Budget) bool { return !b.NoFeatureBlock })
	without := leastBudget(d, &o, func(*Budget) bool { return true })
	if without >= withBlock {
		t.Fatalf("the least budget is %d with the block and %d without", withBlock, without)
	}
	mem := without + (withBlock-without)/2
	b, err := divide(d, &o, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	if !b.NoFeatureBlock || b.BlockBytes != block || b.WorkingSet.FeatureBlockBytes != 0 || b.Caches < 0 {
		t.Fatalf("--mem %d (block on from %d, off from %d): %+v", mem, withBlock, without, b)
	}
	why := " did not fit"
	if b.BlockMicroBatches > 0 {
		why = fmt.Sprintf(" would cut batches into %d micro-batches", b.BlockMicroBatches)
	}
	var sb strings.Builder
	if err := WriteBudget(&sb, b); err != nil || !strings.Contains(sb.String(), "feature block off: its "+ibytes(block)+why) {
		t.Errorf("budget print %q (%v), want the reason %q", sb.String(), err, why)
	}
	if kept, err := divide(d, &o, nil, withBlock); err != nil || kept.NoFeatureBlock || kept.WorkingSet.FeatureBlockBytes != block {
		t.Errorf("--mem %d keeps the block: %+v, %v", withBlock, kept, err)
	}
	if _, err := divide(d, &o, nil, without-64<<10); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "feature block of "+ibytes(block)) {
		t.Errorf("--mem below both: %v", err)
	}
	// Apply carries the decision to training, which runs without the block.
	to := blockOpts(pf, 0)
	e := trainWithoutBlock(t, d, b, to)
	if !to.NoFeatureBlock || to.MaxBatchRows != b.MaxBatchRows {
		t.Fatalf("Apply: NoFeatureBlock %v, MaxBatchRows %d (budget %d)", to.NoFeatureBlock, to.MaxBatchRows, b.MaxBatchRows)
	}
	if e.FeatureBlockRows != 0 || e.Batches == 0 {
		t.Errorf("epoch without the block: %d block rows, %d batches", e.FeatureBlockRows, e.Batches)
	}
}

// TestFeatureBlockGivesWay: where the partition-major feature block fits
// but cuts batches that would be whole without it, the budget turns the
// block off and keeps them whole (the block's sequential loads save less
// than the cuts' extra reads); with room for both it keeps the block, and
// the trainer follows the budget.
func TestFeatureBlockGivesWay(t *testing.T) {
	d, pf := relabelledSynth(t)
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	o := blockOpts(pf, 1).withDefaults()
	block := FeatureBlockBytes(d, &o)
	noBlock := o
	noBlock.NoFeatureBlock = true
	whole := func(b *Budget) bool { return b.MicroBatches == 1 }
	wholeWithout := leastBudget(d, &noBlock, whole)
	wholeWith := leastBudget(d, &o, func(b *Budget) bool { return whole(b) && !b.NoFeatureBlock })
	if wholeWith <= wholeWithout {
		t.Fatalf("whole batches from %d with the block, %d without: the block costs nothing", wholeWith, wholeWithout)
	}
	b, err := divide(d, &o, nil, wholeWithout)
	if err != nil {
		t.Fatal(err)
	}
	if !b.NoFeatureBlock || b.MicroBatches != 1 || b.BlockMicroBatches <= 1 || b.BlockBytes != block || b.WorkingSet.FeatureBlockBytes != 0 {
		t.Fatalf("--mem %d (whole without the block from there, with it from %d): %+v", wholeWithout, wholeWith, b)
	}
	var sb strings.Builder
	want := fmt.Sprintf("feature block off: its %s would cut batches into %d micro-batches", ibytes(block), b.BlockMicroBatches)
	if err := WriteBudget(&sb, b); err != nil || !strings.Contains(sb.String(), want) {
		t.Errorf("budget print %q (%v), want %q", sb.String(), err, want)
	}
	if kept, err := divide(d, &o, nil, wholeWith); err != nil || kept.NoFeatureBlock || kept.MicroBatches != 1 {
		t.Errorf("--mem %d: room for the block and whole batches, got %+v, %v", wholeWith, kept, err)
	}
	if e := trainWithoutBlock(t, d, b, blockOpts(pf, 1)); e.FeatureBlockRows != 0 || e.MicroBatches != 0 || e.Batches == 0 {
		t.Errorf("epoch: %d block rows, %d micro-batches, %d batches; want whole batches without the block", e.FeatureBlockRows, e.MicroBatches, e.Batches)
	}
}

// trainWithoutBlock applies budget b (which turned the feature block off)
// to to, trains with it, checks that the trainer built no block, and
// returns the first epoch.
func trainWithoutBlock(t *testing.T, d *storage.Dataset, b *Budget, to *Options) EpochStats {
	t.Helper()
	(&MemPlan{Budget: b}).Apply(to, nil)
	tr, err := New(context.Background(), d, to)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.fb != nil {
		t.Fatal("the trainer built a feature block the budget turned off")
	}
	rep, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep.Epochs[0]
}

// blockOpts are the options the feature-block budget tests train with on
// relabelledSynth's partitions, inFlight batches in flight (0: auto).
func blockOpts(pf sample.Partitions, inFlight int) *Options {
	return &Options{Model: ModelSAGE, Layers: 2, Hidden: 8, Epochs: 1, EvalEvery: 100, BatchSize: 100, Fanouts: []int{4, 4},
		Seed: *seedFlag, NoHist: true, Selection: sample.ModePartition, Partitions: pf, PartsPerBatch: 5, InFlight: inFlight}
}

// leastBudget is the smallest budget (to 4 KiB, between 1 MiB and 4 GiB)
// whose division of o satisfies ok.
func leastBudget(d *storage.Dataset, o *Options, ok func(*Budget) bool) int64 {
	lo, hi := int64(1<<20), int64(1<<32)
	for hi-lo > 4<<10 {
		mid := lo + (hi-lo)/2
		if b, err := divide(d, o, nil, mid); err == nil && ok(b) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
