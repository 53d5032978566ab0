package membudget

import (
	"runtime/debug"
	"testing"
)

// TestFit: the split of hand-worked budgets (MiB): what a command may
// allocate, the Go soft limit, and the least budget of an allocation.
func TestFit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		budget, alloc, goLimit int64
	}{
		{64 * mib, 40 * mib, 48 * mib},
		{256 * mib, 232 * mib, 240 * mib},
		{32 * mib, 8 * mib, 16 * mib},
		{24 * mib, 0, 8 * mib},
		{20 * mib, 0, 8 * mib}, // below the reserve: nothing to allocate, the limit at the runtime's own
		{0, 0, 8 * mib},
	} {
		f := Of(tc.budget)
		if got := f.Alloc(); got != tc.alloc {
			t.Errorf("Of(%d MiB).Alloc() = %d, want %d", tc.budget/mib, got, tc.alloc)
		}
		if got := f.GoLimit(); got != tc.goLimit {
			t.Errorf("Of(%d MiB).GoLimit() = %d, want %d", tc.budget/mib, got, tc.goLimit)
		}
		if tc.alloc > 0 && Least(tc.alloc) != tc.budget {
			t.Errorf("Least(%d MiB) = %d, want %d MiB", tc.alloc/mib, Least(tc.alloc), tc.budget/mib)
		}
	}
	if got := CgroupBudget(64 * mib); got != 64*mib {
		t.Errorf("CgroupBudget(64 MiB) = %d, want 64 MiB (the page cache's room is inside the budget)", got)
	}
}

// TestHold: Hold sets the Go soft limit to GoLimit and its restore puts
// the previous one back.
func TestHold(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	restore := Of(64 << 20).Hold()
	if got := debug.SetMemoryLimit(-1); got != 48<<20 {
		t.Errorf("limit while held: %d, want %d", got, 48<<20)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit after restore: %d, want %d", got, before)
	}
}
