package train

import (
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

func TestGatherRates(t *testing.T) {
	st := []storage.StageStats{{Stage: storage.StageSample, ReadCalls: 99, BytesRead: 99}, {Stage: storage.StageGather, ReadCalls: 1000, BytesRead: 4e6}}
	// 1000 calls and 4 MB in 2 s of gather.
	if r, mb := gatherRates(st, 2); r != 500 || mb != 2 {
		t.Fatalf("gatherRates = %v reads/s, %v MB/s; want 500, 2", r, mb)
	}
	if r, mb := gatherRates(st, 0); r != 0 || mb != 0 {
		t.Fatalf("no gather time: %v, %v", r, mb)
	}
}
