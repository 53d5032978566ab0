package train

import (
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/planner"
)

func TestCutNote(t *testing.T) {
	recounted := func(cut float64) *planner.PlanResult {
		return &planner.PlanResult{Recounted: true, Reads: &planner.ReadModel{CutMicroBatches: cut}}
	}
	epochs := func(mb ...int) []EpochStats {
		var es []EpochStats
		for i, m := range mb {
			es = append(es, EpochStats{Epoch: i + 1, MicroBatches: m})
		}
		return es
	}
	for _, tc := range []struct {
		name string
		plan *planner.PlanResult
		es   []EpochStats
		want []string // substrings; none: no note
	}{
		{"history cut fewer", recounted(28), epochs(28, 20), []string{"into 24 micro-batches", "cut the profile's into 28", "fewer times"}},
		{"cut more", recounted(10), epochs(14, 14), []string{"into 14 micro-batches", "into 10", "more times"}},
		{"within a tenth", recounted(28), epochs(27, 29), nil},
		{"recount cut none, training did", recounted(0), epochs(6), []string{"into 6 micro-batches", "into 0"}},
		{"neither cut", recounted(0), epochs(0, 0), nil},
		{"not recounted", &planner.PlanResult{Reads: &planner.ReadModel{CutMicroBatches: 28}}, epochs(20), nil},
		{"no read model", &planner.PlanResult{Recounted: true}, epochs(20), nil},
		{"no epochs", recounted(28), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cutNote(tc.plan, tc.es)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("note %q, want none", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("note %q lacks %q", got, w)
				}
			}
		})
	}
}
