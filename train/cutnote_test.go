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
	resumed := func(mb int) []EpochStats { return []EpochStats{{Epoch: 3, MicroBatches: mb, ResumedAt: 5}} }
	for _, tc := range []struct {
		name string
		plan *planner.PlanResult
		es   []EpochStats
		want []string // substrings; none: no note
		not  []string // substrings the note must not have
	}{
		{"history cut fewer", recounted(28), epochs(28, 20), []string{"into 24 micro-batches", "cut the profile's into 28", "so fewer are cut", "fewer times"}, nil},
		// More cut than recounted: the history's shrinking does not explain it.
		{"cut more", recounted(10), epochs(14, 14), []string{"into 14 micro-batches", "into 10", "more times"}, []string{"fewer"}},
		{"within a tenth", recounted(28), epochs(27, 29), nil, nil},
		{"recount cut none, training did", recounted(0), epochs(6), []string{"into 6 micro-batches", "into 0"}, []string{"fewer"}},
		{"neither cut", recounted(0), epochs(0, 0), nil, nil},
		{"not recounted", &planner.PlanResult{Reads: &planner.ReadModel{CutMicroBatches: 28}}, epochs(20), nil, nil},
		{"no read model", &planner.PlanResult{Recounted: true}, epochs(20), nil, nil},
		{"no epochs", recounted(28), nil, nil, nil},
		// A mid-epoch resume's epoch ran 3 of its batches' 28 micro-batches:
		// alone it is no cut to compare, beside whole epochs it is left out.
		{"resumed epoch only", recounted(28), resumed(3), nil, nil},
		{"resumed epoch and whole ones", recounted(28), append(resumed(3), epochs(28, 27)...), nil, nil},
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
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("note %q has %q", got, w)
				}
			}
		})
	}
}
