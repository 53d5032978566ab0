// Package memstat reads the process's resident memory from
// /proc/self/status: the current RSS (VmRSS) and its high-water mark
// (VmHWM). Benchmarks and reports use it to state peak memory. Where /proc
// is unavailable both read as 0.
//
// Caveats: the figures are for the whole process (every goroutine, mmapped
// pages that are resident included), and VmHWM never decreases within a
// process unless ResetPeak resets it.
package memstat

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// PeakRSS is the process's peak resident set size in bytes (VmHWM).
func PeakRSS() int64 { return field("VmHWM:") }

// RSS is the process's current resident set size in bytes (VmRSS).
func RSS() int64 { return field("VmRSS:") }

// AnonRSS is the process's current anonymous resident memory in bytes
// (RssAnon): its heap and stacks, without the file pages it maps.
func AnonRSS() int64 { return field("RssAnon:") }

// Available is the memory the kernel reports available for new
// allocations without swapping (/proc/meminfo MemAvailable), in bytes; 0
// when unknown.
func Available() int64 { return fieldOf("/proc/meminfo", "MemAvailable:") }

// Total is the machine's memory (/proc/meminfo MemTotal), in bytes; 0 when
// unknown.
func Total() int64 { return fieldOf("/proc/meminfo", "MemTotal:") }

// ResetPeak resets VmHWM to the current RSS (Linux ≥ 4.0), so a later
// PeakRSS measures one phase. It reports whether the reset worked.
func ResetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func field(name string) int64 { return fieldOf("/proc/self/status", name) }

// fieldOf is the "name: N kB" line of file, in bytes (0 when absent).
func fieldOf(file, name string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		f := bytes.Fields(line[len(name):])
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
