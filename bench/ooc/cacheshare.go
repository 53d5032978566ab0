package ooc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// trainCacheShare is the memory a bare `ssdgnn train DIR --mem MemLimit`
// with the ssdgnn configuration's flags gives its caches on ds (tables
// included): train.CacheShare with the benchmark's profile and
// partitioning, which must exist. The ssdgnn child, planned with it, then
// trains with the caches the product's default path would build.
func (h *harness) trainCacheShare(ds *Dataset) (int64, error) {
	o := &h.o
	fan, err := parseFanouts(o.Fanouts)
	if err != nil {
		return 0, err
	}
	d, err := storage.Open(ds.Dir, nil)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	defer d.Close()
	pt, err := partition.Open(ds.Dir, PartitionName)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	defer pt.Close()
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	defer pf.Close()
	p, err := planner.LoadProfile(ds.Dir, ProfileName)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	// The flags of the ssdgnn configuration that shape its budget (see
	// trainArgs and configFlags), and the neighbour-list source its
	// "auto" resolves to inside its cgroup (it sizes the sampler's
	// state).
	src, _ := train.AutoSource(d, o.MemLimit)
	if h.loc != nil {
		src, _ = train.AutoSourceIn(d, o.MemLimit, o.MemLimit)
	}
	to := &train.Options{Model: train.ModelSAGE, Layers: o.Layers, Hidden: o.Hidden, BatchSize: o.BatchSize, Fanouts: fan,
		Seed: uint64(o.Seed), InFlight: o.InFlight, Selection: sample.ModePartition, Partitions: pf, FeatRead: storage.ReadDirect,
		Source: src}
	return train.CacheShare(d, to, p, o.MemLimit)
}

// parseFanouts parses a --fanouts value ("10,10,10").
func parseFanouts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("ooc: fanouts %q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}
