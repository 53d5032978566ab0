package train

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
)

// AutoSelection resolves sample.ModeAuto for the dataset in dir: partition
// batches (OUTRE's selection, which cuts neighbourhood redundancy) when the
// dataset has the partitioning name, otherwise random batches. note is one
// line for the user saying which was chosen and, for random, how to
// partition.
func AutoSelection(dir, name string) (mode sample.Mode, note string) {
	if partition.Exists(dir, name) {
		return sample.ModePartition, fmt.Sprintf("selection: partition batches from partitioning %q", name)
	}
	return sample.ModeRandom, fmt.Sprintf("selection: random batches (no partitioning %q; 'ssdgnn partition %s' enables partition batches)", name, dir)
}
