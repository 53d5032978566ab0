package train

import (
	"errors"
	"math"
	"testing"

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
