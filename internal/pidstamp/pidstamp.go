// Package pidstamp names the process that made a temporary file or
// directory, and tells later whether that process still runs: the name
// carries "PID-START", START the process's start time in clock ticks since
// boot (/proc/PID/stat), which a reused pid does not repeat.
//
// Caveats: where /proc does not say, START is 0 and only the pid is
// checked (a reused pid then keeps a name alive until it exits); a name
// written with the pid alone ("PID-RANDOM") is read that way too.
package pidstamp

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stamp is "PID-START" for this process.
func Stamp() string {
	pid := os.Getpid()
	start, _ := procStart(pid)
	return strconv.Itoa(pid) + "-" + strconv.FormatUint(start, 10)
}

// Gone reports whether the process named at the head of s ("PID-START-…",
// as Stamp makes it followed by a random suffix, or "PID-…") no longer
// runs: its pid is free, or taken by a process that started at another
// time. This process is never gone; a name it cannot parse is not gone.
func Gone(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 2 {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	if len(parts) >= 3 {
		if want, err := strconv.ParseUint(parts[1], 10, 64); err == nil && want != 0 {
			if got, ok := procStart(pid); ok && got != want {
				return true // the pid was reused
			}
		}
	}
	return false
}

// procStart is process pid's start time (/proc/PID/stat field 22).
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // fields 3 on
	if len(f) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}
