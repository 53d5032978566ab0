// Package iostat reads a process's storage I/O counters from /proc.
//
// read_bytes counts bytes the process caused to be fetched from the block
// layer: page-cache hits do not count, and readahead does. It is the
// ground truth for "bytes actually read from storage" on Linux. Where /proc
// is unavailable, Read returns ErrUnavailable and callers fall back to their
// own counts.
package iostat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrUnavailable is returned when the counters cannot be read.
var ErrUnavailable = errors.New("iostat: /proc/<pid>/io unavailable")

// Counters is a snapshot of /proc/<pid>/io.
type Counters struct {
	RChar      int64 // bytes passed to read-like syscalls
	WChar      int64
	ReadBytes  int64 // bytes fetched from storage
	WriteBytes int64
}

// Sub returns c - o, field by field.
func (c Counters) Sub(o Counters) Counters {
	return Counters{c.RChar - o.RChar, c.WChar - o.WChar, c.ReadBytes - o.ReadBytes, c.WriteBytes - o.WriteBytes}
}

// Self reads the calling process's counters.
func Self() (Counters, error) { return read("/proc/self/io") }

// Pid reads another process's counters.
func Pid(pid int) (Counters, error) { return read(fmt.Sprintf("/proc/%d/io", pid)) }

func read(path string) (Counters, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Counters{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return Parse(b)
}

// Parse decodes the text of a /proc/<pid>/io file.
func Parse(b []byte) (Counters, error) {
	var c Counters
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return c, fmt.Errorf("iostat: field %s: %w", k, err)
		}
		switch string(k) {
		case "rchar":
			c.RChar = n
		case "wchar":
			c.WChar = n
		case "read_bytes":
			c.ReadBytes, seen = n, seen+1
		case "write_bytes":
			c.WriteBytes = n
		}
	}
	if seen == 0 {
		return c, fmt.Errorf("%w: no read_bytes field", ErrUnavailable)
	}
	return c, nil
}
