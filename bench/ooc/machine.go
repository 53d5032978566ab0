package ooc

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	RAMBytes int64  `json:"ram_bytes"`
	Kernel   string `json:"kernel"`
	// Disk is the device and filesystem holding the dataset, with its
	// size and whether the kernel calls it rotational.
	Disk   string `json:"disk"`
	Cgroup string `json:"cgroup"`
	Go     string `json:"go"`
}

func describeMachine(dir string, cgroupVersion int) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", Disk: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.RAMBytes = n * 1024
				}
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	m.Disk = describeDisk(dir)
	switch cgroupVersion {
	case 1:
		m.Cgroup = "v1 memory controller"
	case 2:
		m.Cgroup = "v2"
	default:
		m.Cgroup = "none used"
	}
	return m
}

// describeDisk finds the mount holding dir in /proc/self/mounts.
func describeDisk(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown"
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	var dev, mnt, fs string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if (abs == f[1] || strings.HasPrefix(abs, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) >= len(mnt) {
			dev, mnt, fs = f[0], f[1], f[2]
		}
	}
	if dev == "" {
		return "unknown"
	}
	s := dev + " (" + fs + " on " + mnt
	var st unix.Statfs_t
	if unix.Statfs(mnt, &st) == nil {
		s += ", " + strconv.FormatFloat(float64(st.Blocks)*float64(st.Bsize)/(1<<30), 'f', 0, 64) + " GiB"
	}
	if base := filepath.Base(dev); strings.HasPrefix(dev, "/dev/") {
		for _, cand := range []string{base, strings.TrimRight(base, "0123456789")} {
			if r, err := os.ReadFile("/sys/block/" + cand + "/queue/rotational"); err == nil {
				if strings.TrimSpace(string(r)) == "0" {
					s += ", non-rotational"
				} else {
					s += ", rotational"
				}
				break
			}
		}
	}
	return s + ")"
}
