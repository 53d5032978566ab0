package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// openPartitioning opens partitioning name of the dataset in dir; a missing
// one is an error that says to run 'ssdgnn partition' first.
func openPartitioning(dir, name string) (*partition.Partitioning, error) {
	pt, err := partition.Open(dir, name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, partition.ErrNotFound) {
		return nil, fmt.Errorf("no partitioning %q in %s: run 'ssdgnn partition %s' first (%w)", name, dir, dir, err)
	}
	return pt, err
}

// openPartitionFiles opens partitioning name of d (in dir) and the reader of
// its per-partition adjacency. closeAll releases both; it is nil on error.
func openPartitionFiles(d *storage.Dataset, dir, name string) (pt *partition.Partitioning, pf *sample.PartitionFiles, closeAll func(), err error) {
	if pt, err = openPartitioning(dir, name); err != nil {
		return nil, nil, nil, err
	}
	if pf, err = sample.NewPartitionFiles(d, pt); err != nil {
		pt.Close()
		return nil, nil, nil, err
	}
	return pt, pf, func() { pf.Close(); pt.Close() }, nil
}
