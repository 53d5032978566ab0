package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
)

// TestValidateNumbers: every float option refuses NaN and infinities (a
// NaN compares false with any bound, so a range check alone passes it),
// and an evaluation bound below the least chunk is refused rather than
// silently raised.
func TestValidateNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		ok   bool
	}{
		{"defaults", func(*Options) {}, true},
		{"NaN lr", func(o *Options) { o.LR = math.NaN() }, false},
		{"infinite lr", func(o *Options) { o.LR = math.Inf(1) }, false},
		{"negative lr", func(o *Options) { o.LR = -1 }, false},
		{"NaN weight decay", func(o *Options) { o.WeightDecay = math.NaN() }, false},
		{"infinite weight decay", func(o *Options) { o.WeightDecay = math.Inf(1) }, false},
		{"negative weight decay means none", func(o *Options) { o.WeightDecay = -1 }, true},
		{"NaN dropout", func(o *Options) { o.Dropout = math.NaN() }, false},
		{"NaN until-valid", func(o *Options) { o.UntilValid = math.NaN() }, false},
		{"eval mem below the least chunk", func(o *Options) { o.EvalMemBytes = minEvalMemBytes - 1 }, false},
		{"eval mem at the least chunk", func(o *Options) { o.EvalMemBytes = minEvalMemBytes }, true},
		{"negative eval mem", func(o *Options) { o.EvalMemBytes = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Selection: sample.ModeRandom}
			tc.mod(&o)
			err := o.Validate()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	tr := &Trainer{}
	if _, err := tr.inferChunkBytes(1, &InferOptions{ChunkBytes: minEvalMemBytes - 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("infer chunk bound below the least: %v, want ErrInvalidOptions", err)
	}
	if b, err := tr.inferChunkBytes(1, &InferOptions{ChunkBytes: minEvalMemBytes}); err != nil || b != minEvalMemBytes {
		t.Errorf("infer chunk bound at the least: %d, %v", b, err)
	}
}

// TestFanoutsBeyondTheGraph: a fanout at least the graph's longest list
// samples as -1 does, and is planned as -1 is (the sweep's D5: 2^31−1
// planned a working set 8× smaller than -1's), and --stream-input on
// refuses both alike.
func TestFanoutsBeyondTheGraph(t *testing.T) {
	d := smallSynth(t)
	md := int(d.MaxDegree())
	if md <= 0 {
		t.Fatalf("max degree %d", md)
	}
	for _, f := range []int{md, md + 1, sample.MaxFanout} {
		o := &Options{Fanouts: []int{f, 5}, EvalFanouts: []int{5, f}}
		w := withFanoutsOf(o.withDefaults(), d)
		if !slices.Equal(w.Fanouts, []int{-1, 5}) || !slices.Equal(w.EvalFanouts, []int{5, -1}) {
			t.Errorf("fanout %d (longest list %d): read as %v, eval %v", f, md, w.Fanouts, w.EvalFanouts)
		}
		all := &Options{Fanouts: []int{-1, 5}}
		if got, want := WorkingSet(d, o, nil).Bytes, WorkingSet(d, all, nil).Bytes; got != want {
			t.Errorf("fanout %d: working set %d bytes, -1's %d", f, got, want)
		}
		if got, want := MinimumBudget(d, o), MinimumBudget(d, all); got != want {
			t.Errorf("fanout %d: minimum %d bytes, -1's %d", f, got, want)
		}
		o.StreamInput = StreamInputOn
		if _, err := New(context.Background(), d, o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "stream-input on") {
			t.Errorf("fanout %d with --stream-input on: %v", f, err)
		}
	}
	if w := withFanoutsOf((&Options{Fanouts: []int{md - 1, 5}}).withDefaults(), d); !slices.Equal(w.Fanouts, []int{md - 1, 5}) {
		t.Errorf("a fanout below the longest list changed: %v", w.Fanouts)
	}
}

// TestBudgetError: a command's refusal reads as its own and still matches
// ErrBudget, and what it wraps (review R7: rr's and profile's said
// "train: memory budget too small").
func TestBudgetError(t *testing.T) {
	inner := errors.New("inner")
	err := error(&BudgetError{Cmd: "rr", Err: fmt.Errorf("limit 20 MiB: %w", inner)})
	if got, want := err.Error(), "rr: memory budget too small: limit 20 MiB: inner"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, ErrBudget) || !errors.Is(err, inner) {
		t.Errorf("errors.Is(ErrBudget) %v, errors.Is(inner) %v, want both", errors.Is(err, ErrBudget), errors.Is(err, inner))
	}
	var be *BudgetError
	if !errors.As(fmt.Errorf("wrapped: %w", err), &be) || be.Cmd != "rr" {
		t.Errorf("errors.As through a wrap: %v", be)
	}
}

// TestDefaultPartsHoldABatch: a default partitioning's parts
// (partition.TrainNodesPerPart training nodes each) make a macro batch of
// sample.DefaultPartsPerBatch parts one batch of train's default size.
func TestDefaultPartsHoldABatch(t *testing.T) {
	if got := partition.TrainNodesPerPart * sample.DefaultPartsPerBatch; got != DefaultBatchSize {
		t.Errorf("%d training nodes a part × %d parts a macro batch = %d, train's default batch %d",
			partition.TrainNodesPerPart, sample.DefaultPartsPerBatch, got, DefaultBatchSize)
	}
}
