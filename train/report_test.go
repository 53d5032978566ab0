package train

import (
	"strings"
	"testing"
)

// TestSummary: the summary line quotes accuracies only when an epoch was
// evaluated; an interrupted run before any evaluation printed "final
// valid 0.00% test 0.00%; best valid 0.00%".
func TestSummary(t *testing.T) {
	base := Report{Model: ModelConfig{Kind: ModelSAGE, Layers: 2}, Params: 10, Options: Options{Epochs: 3, EvalEvery: 100}, ElapsedSec: 1}
	for _, tc := range []struct {
		name   string
		epochs []EpochStats
		want   string
	}{
		{"none", nil, "no epoch completed (--epochs 3)"},
		{"not due", []EpochStats{{Epoch: 0}, {Epoch: 1}}, "2 epochs trained, not evaluated: no evaluation yet (--eval-every 100)"},
		{"cut evaluation", []EpochStats{{Epoch: 0, EvalPending: true}}, "not evaluated: interrupted during epoch 0's evaluation, which --resume runs first"},
		{"evaluated", []EpochStats{{Epoch: 0, Evaluated: true, ValidAcc: 0.5, TestAcc: 0.25}}, "final valid 50.00% test 25.00%; best valid 50.00% (test 25.00%)"},
	} {
		rep := base
		rep.Epochs = tc.epochs
		for _, e := range tc.epochs {
			if e.Evaluated {
				rep.FinalValid, rep.FinalTest, rep.BestValid, rep.TestAtBest = e.ValidAcc, e.TestAcc, e.ValidAcc, e.TestAcc
			}
		}
		got := Summary(&rep)
		if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "model sage, 2 layers, 10 parameters; ") {
			t.Errorf("%s: %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}
