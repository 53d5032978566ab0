package planner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/splitmix"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// ReadModel is a profile's model of training's feature reads from
// storage (see the package doc, "Read costs"). Each batch's input rows
// that the dynamic feature block does not serve are planned as the
// gather plans its misses (storage.ReadModel: the same merge gap,
// amplification cap, read size and alignment), with no cache; the
// counts are summed over PresampleEpochs.
type ReadModel struct {
	// How the gather reads: its merge gap in rows (0: one read per row),
	// amplification cap and read mode ("direct" or "buffered").
	GapRows          int64   `json:"gap_rows"`
	MaxAmplification float64 `json:"max_amplification"`
	Mode             string  `json:"mode"`
	// The device's costs: random single-row reads per second and
	// sequential bytes per second, from CostSource ("device.json", or
	// "default": storage.DefaultDeviceProfile).
	RandomReadsPerSec float64 `json:"random_reads_per_s"`
	SeqBytesPerSec    float64 `json:"seq_bytes_per_s"`
	CostSource        string  `json:"cost_source"`
	// Rows: input rows read from storage; BlockRows: input rows the
	// dynamic feature block serves instead (0 unless the dataset is
	// partition-major and the block is on).
	Rows      int64 `json:"rows"`
	BlockRows int64 `json:"block_rows"`
	// Reads: read calls; BytesRead: their bytes. SingleReads are the
	// reads of one row each and SingleBytes their bytes (a row's aligned
	// span).
	Reads       int64 `json:"reads"`
	BytesRead   int64 `json:"bytes_read"`
	SingleReads int64 `json:"single_reads"`
	SingleBytes int64 `json:"single_bytes"`
	// MicroBatchRows is the trainer's bound on a micro-batch's input rows
	// when the counts are of micro-batches (Profile.RemodelReads), each
	// gathered on its own; 0: of whole batches.
	MicroBatchRows int64 `json:"micro_batch_rows,omitempty"`
	// CutMicroBatches is, for counts of micro-batches, the micro-batches
	// an epoch of the profiled batches that were cut (into two or more)
	// made, as the trainer counts EpochStats.MicroBatches: a history
	// cache shrinks training's batches, so it cuts fewer, and the rows
	// micro-batches of one batch share are then gathered fewer times (0:
	// of whole batches, or a recount written before).
	CutMicroBatches float64 `json:"cut_micro_batches,omitempty"`
	// Thinned are the reads and bytes of the same rows thinned: at level
	// Keep each row stays when a fixed hash of its id falls below Keep
	// (ThinKeep), as if something removed a random share 1−Keep of every
	// batch's rows before the gather planned its reads. History reuse
	// thins the batches so in later epochs, and the fewer rows merge less:
	// Plan prices the rows left after the history cache at the level of
	// its predicted share (interpolated; 0 reads at Keep 0). Nil in
	// profiles written before.
	Thinned []ThinnedReads `json:"thinned,omitempty"`
	// ScanBatches is, when above 1, the (micro-)batches whose input rows
	// one scan of the streamed input layer reads together: the counts are
	// then of scans, each the ascending union of up to ScanBatches
	// consecutive (micro-)batches' rows, read once (Profile.RemodelReads;
	// with the feature block a scan keeps to one macro batch, as the
	// trainer's do). 0: each gathered on its own.
	ScanBatches int `json:"scan_batches,omitempty"`
	// ChunkRows is, when above 0, the rows of each read plan: the counts
	// are of the rows cut, in id order, into pieces of ChunkRows, each
	// planned on its own, as the streamed input layer gathers its chunks
	// (Profile.RemodelReads). 0: the gather's own (storage's scatter
	// chunk, DefaultScatterChunk).
	ChunkRows int `json:"chunk_rows,omitempty"`
}

// ThinnedReads is one level of ReadModel.Thinned.
type ThinnedReads struct {
	Keep  float64 `json:"keep"`
	Reads int64   `json:"reads"`
	Bytes int64   `json:"bytes_read"`
}

// ThinKeep is the keep levels ReadModel.Thinned counts, descending.
var ThinKeep = []float64{0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}

// thinHash spreads row ids uniformly over uint64 (splitmix.Mix): a row
// is kept at level k when thinHash(id) < keep·2⁶⁴, so the rows of a
// lower level are a subset of a higher one's.
func thinHash(v int64) uint64 { return splitmix.Mix(uint64(v)) }

// thinLimit is level keep's hash bound.
func thinLimit(keep float64) uint64 {
	return uint64(keep * (1 << 63) * 2)
}

// thinnedAt is the reads and bytes m predicts when each row stays with
// probability keep, interpolated linearly between the levels of Thinned
// (keep 1: Reads and BytesRead; keep 0: none). ok is false when m has no
// thinned counts.
func (m *ReadModel) thinnedAt(keep float64) (reads, bytes float64, ok bool) {
	if len(m.Thinned) == 0 {
		return 0, 0, false
	}
	keep = min(max(keep, 0), 1)
	hiK, hiR, hiB := 1.0, float64(m.Reads), float64(m.BytesRead)
	for i := 0; i <= len(m.Thinned); i++ {
		loK, loR, loB := 0.0, 0.0, 0.0
		if i < len(m.Thinned) {
			t := m.Thinned[i]
			loK, loR, loB = t.Keep, float64(t.Reads), float64(t.Bytes)
		}
		if keep >= loK {
			f := 1.0
			if hiK > loK {
				f = (keep - loK) / (hiK - loK)
			}
			return loR + f*(hiR-loR), loB + f*(hiB-loB), true
		}
		hiK, hiR, hiB = loK, loR, loB
	}
	return 0, 0, true
}

// PricedOtherwise says how the reads m modelled were priced otherwise
// than plan prices them: "" when the merge gap, the amplification cap,
// the device's costs and their source agree, and the read mode where plan
// names one (featurecache.PlanReads leaves it to the reader); else the
// differences, "was … , now …", for a message. It is the one test of
// "priced as training will read" behind Profile.Reusable, training's
// warning about a plan file's profile, and bench ooc's re-profiling.
func (m *ReadModel) PricedOtherwise(plan featurecache.ReadPlan) string {
	var diff []string
	if m.GapRows != plan.GapRows {
		diff = append(diff, fmt.Sprintf("merge gap %d rows, now %d", m.GapRows, plan.GapRows))
	}
	if m.MaxAmplification != plan.MaxAmplification {
		diff = append(diff, fmt.Sprintf("merge cap %s, now %s", capString(m.MaxAmplification), capString(plan.MaxAmplification)))
	}
	if plan.Mode != "" && m.Mode != plan.Mode {
		diff = append(diff, fmt.Sprintf("%s reads, now %s", m.Mode, plan.Mode))
	}
	var rr, sb float64
	if plan.Profile != nil {
		rr, sb = plan.Profile.RandomReadsPerSec, plan.Profile.SeqBytesPerSec
	}
	if m.CostSource != plan.CostSource || m.RandomReadsPerSec != rr || m.SeqBytesPerSec != sb {
		diff = append(diff, fmt.Sprintf("costs %.0f reads/s and %.0f bytes/s from %s, now %.0f and %.0f from %s",
			m.RandomReadsPerSec, m.SeqBytesPerSec, orNone(m.CostSource), rr, sb, orNone(plan.CostSource)))
	}
	return strings.Join(diff, "; ")
}

// capString prints a read cap: "6×", or "none" for 0.
func capString(c float64) string {
	if c == 0 {
		return "none"
	}
	return strconv.FormatFloat(c, 'g', -1, 64) + "×"
}

func orNone(s string) string {
	if s == "" {
		return "nowhere"
	}
	return s
}

// usable reports whether m can price reads.
func (m *ReadModel) usable() bool {
	ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	return m != nil && ok(m.RandomReadsPerSec) && ok(m.SeqBytesPerSec) && m.Rows > 0
}

// Seconds is the device time of reads read calls of bytes bytes in all:
// reads ÷ random reads/s + bytes ÷ sequential bytes/s, the model the
// bench's "Gather against the disk's limit" table uses.
func (m *ReadModel) Seconds(reads, bytes float64) float64 {
	return reads/m.RandomReadsPerSec + bytes/m.SeqBytesPerSec
}

// singleBytes is the mean bytes of a one-row read (rowBytes when there
// were none).
func (m *ReadModel) singleBytes(rowBytes int64) float64 {
	if m.SingleReads == 0 {
		return float64(rowBytes)
	}
	return float64(m.SingleBytes) / float64(m.SingleReads)
}

// extraUnits is what a row read on its own costs beyond a row read inside
// a merged read, in units of the latter (rowBytes at sequential speed):
// (random read time + mean single-read bytes ÷ sequential bytes/s) ÷
// (rowBytes ÷ sequential bytes/s) − 1. A node's feature-cache score is
// Feat + extraUnits·FeatSingle.
func (m *ReadModel) extraUnits(rowBytes int64) float64 {
	return (m.SeqBytesPerSec/m.RandomReadsPerSec+m.singleBytes(rowBytes))/float64(rowBytes) - 1
}

// featureBlockOn reports whether training with o over parts serves the
// macro batch's own rows from the dynamic feature block, by the rule the
// trainer applies (partition mode, parts that are id ranges, block not
// turned off, features present).
func featureBlockOn(d *storage.Dataset, parts sample.Partitions, o *ProfileOptions) bool {
	return !o.NoFeatureBlock && o.Mode == sample.ModePartition && parts != nil && d.FeatDim() > 0 && sample.AsRanges(parts) != nil
}

// readCounter prices every profiled batch's storage reads into a
// ReadModel and the per-node FeatSingle counts. Its scratch (a batch's
// sorted row ids) is counted in memacct.BatchBuffers.
type readCounter struct {
	rm     *storage.ReadModel
	m      ReadModel
	single []uint32
	ids    []int64
}

// newReadCounter prices reads as fc gathers its misses, at the costs of
// fc's device profile.
func newReadCounter(fc *featurecache.Cache, single []uint32) (*readCounter, error) {
	rm, err := fc.ReadModel()
	if err != nil {
		return nil, err
	}
	plan := fc.ReadPlan()
	prof, src := plan.Profile, plan.CostSource
	thinned := make([]ThinnedReads, len(ThinKeep))
	for k, keep := range ThinKeep {
		thinned[k].Keep = keep
	}
	return &readCounter{rm: rm, single: single, m: ReadModel{GapRows: plan.GapRows, MaxAmplification: plan.MaxAmplification,
		Mode: plan.Mode, RandomReadsPerSec: prof.RandomReadsPerSec, SeqBytesPerSec: prof.SeqBytesPerSec, CostSource: src,
		Thinned: thinned}}, nil
}

// add prices the reads of batch rows nodes, leaving out those block
// serves (block may be nil).
func (r *readCounter) add(nodes []int64, block func(v int64) bool) {
	ids := r.ids[:0]
	for _, v := range nodes {
		if block != nil && block(v) {
			r.m.BlockRows++
			continue
		}
		ids = append(ids, v)
	}
	if c := int64(cap(ids)) - int64(cap(r.ids)); c > 0 {
		memacct.Add(memacct.BatchBuffers, 8*c)
	}
	r.ids = ids
	slices.Sort(ids)
	r.m.Rows += int64(len(ids))
	r.rm.Walk(ids, func(first, n int, bytes int64) {
		r.m.Reads++
		r.m.BytesRead += bytes
		if n == 1 {
			r.m.SingleReads++
			r.m.SingleBytes += bytes
			addSat(r.single, ids[first], 1)
		}
	})
	// The thinned levels, each filtered in place from the one above (the
	// scratch is spent: add refills it).
	for k := range r.m.Thinned {
		lv := &r.m.Thinned[k]
		lim := thinLimit(lv.Keep)
		ids = slices.DeleteFunc(ids, func(v int64) bool { return thinHash(v) >= lim })
		r.rm.Walk(ids, func(_, _ int, bytes int64) {
			lv.Reads++
			lv.Bytes += bytes
		})
	}
}

// close releases the scratch.
func (r *readCounter) close() {
	memacct.Add(memacct.BatchBuffers, -8*int64(cap(r.ids)))
	r.ids = nil
}

// BatchSplit calls visit once per micro-batch that training cuts b into,
// with the micro-batch's input rows (global ids, each once). The trainer
// gathers each micro-batch on its own, so rows two micro-batches share are
// read twice.
type BatchSplit func(b *sample.Batch, visit func(rows []int64))

// RemodelReads recounts p's Feat, FeatSingle, FeatHeldOut (when p has
// it, over its held-out epoch) and read model for batches
// cut into micro-batches by split, of at most microRows input rows (the
// trainer's bound, recorded as ReadModel.MicroBatchRows), and read in
// scans of scan consecutive (micro-)batches when scan is above 1
// (recorded as ReadModel.ScanBatches): a scan's rows are counted once,
// as the union the trainer reads; with chunk above 0 (ReadModel.ChunkRows)
// each scan or (micro-)batch is read in plans of chunk rows, as the
// streamed input layer reads its chunks. The cut is known
// only once the memory budget has been divided, after profiling, so this
// is a second pass over the profiled epochs: sampling only, no gather and
// no timing. o must be the options p was profiled with (the batches must
// be the same); the history arrays, the timings and β are kept.
func (p *Profile) RemodelReads(ctx context.Context, d *storage.Dataset, parts sample.Partitions, opts *ProfileOptions,
	split BatchSplit, microRows int64, scan, chunk int) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	o := opts.withDefaults()
	m := &p.Meta
	if m.NumNodes != d.NumNodes() || m.Seed != o.Seed || m.BatchSize != o.BatchSize || m.Mode != string(o.Mode) ||
		!slices.Equal(m.Fanouts, o.Fanouts) || m.PresampleEpochs != o.PresampleEpochs || p.FeatSingle == nil {
		return fmt.Errorf("%w: profile %q was not profiled with these options (or has no read model)", ErrMismatch, m.Name)
	}
	part, err := profilePart(d, parts, &o)
	if err != nil {
		return err
	}
	so := o.samplerOptions()
	s, err := sample.New(d, parts, &so)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer s.Close()
	fc, err := featurecache.New(ctx, d, 0, o.gatherOptions())
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer fc.Close()
	clear(p.Feat)
	clear(p.FeatSingle)
	rc, err := newReadCounter(fc, p.FeatSingle)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer rc.close()
	if chunk > 0 {
		rc.rm.SetChunk(chunk)
		rc.m.ChunkRows = chunk
	}
	macro := newMacroSet(parts)
	var block func(v int64) bool
	if featureBlockOn(d, parts, &o) && part != nil {
		block = func(v int64) bool { return macro.In[part[v]] }
	}
	count := func(rows []int64) {
		countFeat(p.Feat, rows, block)
		rc.add(rows, block)
	}
	sc := &scanGroup{n: max(scan, 1), count: count}
	defer sc.close()
	// epoch runs one epoch's (micro-)batches through sc; cut counts the
	// micro-batches of the batches split cut into two or more.
	var cut int64
	epoch := func(epoch int, desc string) error {
		err := eachBatch(ctx, s, epoch, o.Progress, desc,
			func(b *sample.Batch, plan *sample.Plan) error {
				if block != nil && sc.k > 0 && b.Macro != sc.macro {
					// The trainer's scans keep to one macro batch (its
					// feature block's): count the last one's scan before
					// the block moves on.
					sc.flush()
				}
				macro.see(b, plan)
				sc.macro = b.Macro
				k := int64(0)
				split(b, func(rows []int64) {
					k++
					sc.visit(rows)
				})
				if k > 1 {
					cut += k
				}
				return nil
			})
		if err != nil {
			return err
		}
		sc.flush() // scans do not span epochs
		return nil
	}
	for e := 0; e < o.PresampleEpochs; e++ {
		if err := epoch(e, fmt.Sprintf("profile: reads of micro-batches, epoch %d", e)); err != nil {
			return err
		}
	}
	rc.m.CutMicroBatches = float64(cut) / float64(max(o.PresampleEpochs, 1))
	if p.FeatHeldOut != nil {
		// The held-out epoch's counts, cut and scanned the same way.
		clear(p.FeatHeldOut)
		sc.count = func(rows []int64) { countFeat(p.FeatHeldOut, rows, block) }
		if err := epoch(m.HeldOutEpoch, "profile: held-out epoch of micro-batches"); err != nil {
			return err
		}
		m.SumFeatHeldOut = sum(p.FeatHeldOut)
	}
	rc.m.MicroBatchRows = microRows
	if scan > 1 {
		rc.m.ScanBatches = scan
	}
	m.Reads = &rc.m
	m.SumFeat, m.SumFeatSingle = sum(p.Feat), sum(p.FeatSingle)
	return nil
}

// scanGroup gathers the rows of up to n consecutive (micro-)batches and
// counts their ascending union once, as one streamed scan reads it. Its
// scratch is counted in memacct.BatchBuffers.
type scanGroup struct {
	n     int
	count func(rows []int64)
	rows  []int64
	k     int // (micro-)batches in rows
	macro int // the macro batch of the last one
}

func (g *scanGroup) visit(rows []int64) {
	if g.n <= 1 {
		g.count(rows)
		return
	}
	before := cap(g.rows)
	g.rows = append(g.rows, rows...)
	if c := cap(g.rows) - before; c > 0 {
		memacct.Add(memacct.BatchBuffers, 8*int64(c))
	}
	if g.k++; g.k == g.n {
		g.flush()
	}
}

// flush counts the rows gathered so far as one scan.
func (g *scanGroup) flush() {
	if g.k == 0 {
		return
	}
	slices.Sort(g.rows)
	g.count(slices.Compact(g.rows))
	g.rows, g.k = g.rows[:0], 0
}

func (g *scanGroup) close() {
	memacct.Add(memacct.BatchBuffers, -8*int64(cap(g.rows)))
	g.rows = nil
}
