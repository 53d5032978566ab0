package synth

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/storage"
)

// ErrNoSpace is wrapped by GenerateContext's refusal to start when the
// output file system cannot hold the arrays whose size the Config fixes.
var ErrNoSpace = errors.New("synth: not enough free space")

// freeBytes reports the bytes available to an unprivileged writer on the
// file system holding dir. A variable so that tests can fake a full disk.
var freeBytes = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(min(uint64(st.Bavail)*uint64(st.Bsize), math.MaxInt64)), nil
}

// npyHeader bounds one .npy header.
const npyHeader = 128

// sureBytes is what c (with its defaults) writes whatever the edges
// drawn: features.npy, labels.npy and indptr.npy (n+1 offsets of 8
// bytes), saturating at MaxInt64. indices is the edge array's size at
// AvgDegree·Nodes entries, an upper estimate: duplicates and self loops
// are dropped. The splits (8 bytes per split node, about a fifth of the
// nodes by default) are in neither.
func (c Config) sureBytes() (sure, indices int64) {
	n := float64(c.Nodes)
	feat := 4.0
	if c.FeatDType == "float16" {
		feat = 2
	}
	s := n*float64(c.FeatDim)*feat + 4*n + 8*(n+1) + 3*npyHeader
	idx := n*c.AvgDegree*float64(storage.IndicesDType(c.Nodes).Size()) + npyHeader
	sat := func(x float64) int64 {
		if x >= math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(x)
	}
	return sat(s), sat(idx)
}

// checkSpace refuses to start when the file system holding dir has less
// free than c's features, labels and indptr need: before, a graph thirty
// times the disk started and ran until "no space left on device" (sweep
// 26, P3). replacing adds the hint that --force keeps the old dataset
// until the new one is complete.
func checkSpace(dir string, c Config, replacing bool) error {
	free, err := freeBytes(dir)
	if err != nil {
		return nil // unknown: let the writes report it
	}
	sure, indices := c.sureBytes()
	if sure <= free {
		return nil
	}
	hint := ""
	if replacing {
		hint = "; the dataset being replaced (--force) stays until the new one is complete: remove it first to free its room"
	}
	return fmt.Errorf("%w: %s has %d bytes free, but the features, labels and indptr of %d nodes need %d bytes (and indices.npy up to %d more)%s",
		ErrNoSpace, dir, free, c.Nodes, sure, indices, hint)
}
