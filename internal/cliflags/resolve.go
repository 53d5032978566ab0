package cliflags

import (
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// Resolved is what Train.Resolve settled: a note for each auto choice
// (empty where the flag named one), and the partition files it opened.
type Resolved struct {
	SelectionNote, FeatReadNote, SourceNote string
	// Parts is the partitioning a partition selection reads (also in
	// Options.Partitions); nil otherwise. Close releases it.
	Parts *sample.PartitionFiles
}

// Close releases what Resolve opened.
func (r *Resolved) Close() {
	if r != nil && r.Parts != nil {
		r.Parts.Close()
	}
}

// Resolve settles what train's flags leave to the dataset, in t.Options,
// with d (the dataset in dir) open and the budget in t.Mem:
//   - an auto selection (train.AutoSelection with --partition, which may
//     set t.Partition to the dataset's only partitioning);
//   - an auto read mode (train.AutoFeatRead);
//   - for partition selection, the partition files (Options.Partitions);
//   - the sampler's source (--source; auto: train.AutoSource).
//
// room is the memory cgroup limit of the process that will train when it
// is not this one (a benchmark sizing a child it starts under that
// limit): the auto read mode and source are then chosen for that limit.
// 0 takes this process's own. `ssdgnn train` and the benchmark both call
// it, so they resolve the same options.
func (t *Train) Resolve(d *storage.Dataset, dir string, room int64) (*Resolved, error) {
	o := &t.Options
	r := &Resolved{}
	if o.Selection == sample.ModeAuto {
		o.Selection, t.Partition, r.SelectionNote = train.AutoSelection(dir, t.Partition, t.PartitionSet)
	} else if o.Selection == sample.ModePartition {
		t.Partition, _, _, _ = train.PartitionFor(dir, t.Partition, t.PartitionSet)
	}
	if o.FeatRead == storage.ReadAuto {
		if room > 0 {
			o.FeatRead, r.FeatReadNote = train.AutoFeatReadIn(d, room)
		} else {
			o.FeatRead, r.FeatReadNote = train.AutoFeatRead(d)
		}
	}
	var err error
	if o.Source, r.SourceNote, err = t.Source.resolveIn(d, room, int64(t.Mem)); err != nil {
		return nil, err
	}
	if o.Selection == sample.ModePartition {
		pf, err := sample.OpenPartitionFiles(d, dir, t.Partition)
		if err != nil {
			return nil, err
		}
		o.Partitions, r.Parts = pf, pf
	}
	return r, nil
}
