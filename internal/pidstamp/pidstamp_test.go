package pidstamp

import (
	"os/exec"
	"strconv"
	"testing"
)

// TestGone: this process is never gone; a finished one is; a live pid
// with another start time (pid 1, which did not start at tick 99999999)
// is; a live pid without a start time, and names that do not parse, are
// not.
func TestGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid)
	for _, tc := range []struct {
		name string
		gone bool
	}{
		{Stamp() + "-123", false},
		{dead + "-0-123", true},
		{dead + "-123", true},
		{"1-99999999-x", true},
		{"1-x", false},
		{"x-1-2", false},
		{"", false},
	} {
		if got := Gone(tc.name); got != tc.gone {
			t.Errorf("Gone(%q) = %v, want %v", tc.name, got, tc.gone)
		}
	}
	if _, ok := procStart(1); !ok {
		t.Log("no /proc start time for pid 1: the reused-pid case above passed by its pid alone")
	}
}
