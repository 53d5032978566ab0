package planner

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// PartChecksum identifies a node → partition assignment: xxhash64 of its
// entries as little-endian int32s, in the form of the manifests'
// checksums.
func PartChecksum(part []int32) string {
	h := xxhash.New()
	var buf [4096]byte
	for len(part) > 0 {
		n := min(len(part), len(buf)/4)
		for i, v := range part[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
		}
		h.Write(buf[:4*n])
		part = part[n:]
	}
	return storage.FormatChecksum(h.Sum64())
}

// Outdated says how the profile m describes was counted by models older
// than RunProfile's ("" when it was not): the history validity model
// (Meta.HistModel and HistRounds), the read model's thinned counts and
// the held-out feature counts (Meta.HeldOutEpoch).
// Such a profile loads and plans, but its counts are not what a new
// profile would count, so Reusable refuses it.
func (m *Meta) Outdated() string {
	switch {
	case m.HistModel != histModel || m.HistRounds != HistRounds:
		return fmt.Sprintf("history validity model %d over %d rounds, want %d over %d (written before)", m.HistModel, m.HistRounds, histModel, HistRounds)
	case m.Reads == nil || len(m.Reads.Thinned) != len(ThinKeep):
		return "written before the thinned read counts"
	case m.HeldOutEpoch == 0:
		return "written before the held-out feature counts"
	}
	return ""
}

// Reusable reports whether p (a profile read from disk) can stand for a
// new RunProfile of d with opts: nil when it can, else an error wrapping
// ErrMismatch that names the first difference. It can when every array
// and count of the new profile would equal p's:
//   - the same dataset (its checksum) and the same batches: mode,
//     fanouts, batch size, parts per batch, seed, pre-sampled epochs and,
//     in partition mode, the same assignment (Meta.PartChecksum);
//   - batches constructed the same way (Meta.SamplePlan);
//   - the same history validity model (staleness and reuse depth, after
//     defaults, hits counted over HistRounds steady-state rounds) and no
//     global neighbour cache on either side;
//   - reads priced by the same plan (merge gap, amplification cap, read
//     mode and device costs) for whole batches, each read alone
//     (Reads.MicroBatchRows 0, Reads.ScanBatches at most 1),
//     with the dynamic feature block on exactly where RunProfile would
//     put it.
//
// Only the timings, and so β (OUTRE Eq. 3), would differ: a caller that
// reuses p keeps its β, so runs that reuse one profile plan alike. Workers
// and Source change the timings only and are not compared.
func (p *Profile) Reusable(ctx context.Context, d *storage.Dataset, parts sample.Partitions, opts *ProfileOptions) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	o := opts.withDefaults()
	m := &p.Meta
	differ := func(format string, args ...any) error {
		return fmt.Errorf("%w: profile %q: %s", ErrMismatch, m.Name, fmt.Sprintf(format, args...))
	}
	sum := DatasetChecksum(d)
	switch {
	case m.NumNodes != d.NumNodes():
		return differ("%d nodes, dataset %d", m.NumNodes, d.NumNodes())
	case m.DatasetChecksum != sum:
		return differ("dataset checksum %s, dataset %s", m.DatasetChecksum, sum)
	case p.FeatSingle == nil || m.Reads == nil || p.HistAppear == nil || p.HistHits == nil:
		return differ("written before the read model or the history validity model")
	case m.Outdated() != "":
		return differ("%s", m.Outdated())
	case m.Reads.MicroBatchRows != 0:
		return differ("reads counted for micro-batches of %d rows", m.Reads.MicroBatchRows)
	case m.Reads.ScanBatches > 1:
		return differ("reads counted for scans of %d batches", m.Reads.ScanBatches)
	case o.NeighborCache != nil || m.NeighborCacheBytes != 0:
		return differ("profiled beside a global neighbour cache")
	case m.SamplePlan != sample.PlanVersion:
		return differ("batches constructed by sample plan version %d, want %d", m.SamplePlan, sample.PlanVersion)
	case m.PresampleEpochs != o.PresampleEpochs:
		return differ("%d pre-sampled epochs, want %d", m.PresampleEpochs, o.PresampleEpochs)
	}
	// The sampler resolves the batches' options (defaults, parts per
	// batch); its source does not change the batches.
	so := o.samplerOptions()
	so.Source = sample.SourceMmap
	s, err := sample.New(d, parts, &so)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	eff := s.Options()
	s.Close()
	switch {
	case m.Mode != string(eff.Mode):
		return differ("%s batches, want %s", m.Mode, eff.Mode)
	case !slices.Equal(m.Fanouts, eff.Fanouts):
		return differ("fanouts %v, want %v", m.Fanouts, eff.Fanouts)
	case m.BatchSize != eff.BatchSize:
		return differ("batch size %d, want %d", m.BatchSize, eff.BatchSize)
	case m.Seed != eff.Seed:
		return differ("seed %d, want %d", m.Seed, eff.Seed)
	}
	if eff.Mode == sample.ModePartition {
		if m.PartsPerBatch != eff.PartsPerBatch || m.Partition != o.Partition {
			return differ("partitioning %q, %d parts a batch; want %q, %d", m.Partition, m.PartsPerBatch, o.Partition, eff.PartsPerBatch)
		}
		part, err := profilePart(d, parts, &o)
		if err != nil {
			return err
		}
		if err := m.OfPartition(part); err != nil {
			return err
		}
	}
	stale := o.Staleness
	if stale == 0 {
		stale = histcache.EpochStaleness(int64(len(d.TrainIdx())), o.BatchSize, o.ReuseDepth)
	}
	if m.Staleness != stale || m.ReuseDepth != o.ReuseDepth {
		return differ("staleness %d, reuse depth %d; want %d, %d", m.Staleness, m.ReuseDepth, stale, o.ReuseDepth)
	}
	fc, err := featurecache.New(ctx, d, 0, o.gatherOptions())
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	plan := fc.ReadPlan()
	fc.Close()
	r := m.Reads
	if diff := r.PricedOtherwise(plan); diff != "" {
		return differ("reads priced with %s", diff)
	}
	if block := featureBlockOn(d, parts, &o); block != (r.BlockRows > 0) {
		return differ("feature block %v, want %v", r.BlockRows > 0, block)
	}
	return nil
}
