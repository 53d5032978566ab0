package ooc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// Dataset describes the benchmark's dataset after preparation.
type Dataset struct {
	Dir         string `json:"dir"`
	NumNodes    int64  `json:"num_nodes"`
	NumEdges    int64  `json:"num_edges"`
	NumTrain    int64  `json:"num_train"`
	FeatDim     int    `json:"feat_dim"`
	Classes     int    `json:"classes"`
	BytesOnDisk int64  `json:"bytes_on_disk"`
	Parts       int    `json:"parts"`
	Reused      bool   `json:"reused"`
	PlanFile    string `json:"plan_file"`
	Plan        *Plan  `json:"plan"`
	// CacheBudget is the memory the plan divides among the caches, and
	// CacheBudgetFrom where it came from: "set" (Options.CacheBudget or
	// CacheFrac) or "train" (what a bare `train --mem` leaves them).
	CacheBudget     int64  `json:"cache_budget"`
	CacheBudgetFrom string `json:"cache_budget_from"`
	// Device is the disk's measured read costs (DIR/device.json, from
	// ssdgnn probe, run once when missing): the limit the gather is
	// compared with.
	Device *storage.DeviceProfile `json:"device,omitempty"`
	// PM is the same dataset relabelled partition-major ('ssdgnn
	// relabel' by the benchmark's partitioning, then profiled and
	// planned like the original), for the configurations that train on
	// it; nil when none is selected.
	PM *Dataset `json:"partition_major,omitempty"`
}

// Plan is the part of plan.json the harness uses.
type Plan struct {
	Alpha        float64    `json:"alpha"`
	NeighborFrac float64    `json:"neighbor_frac"`
	Feature      CacheSplit `json:"feature"`
	History      CacheSplit `json:"history"`
	Neighbor     CacheSplit `json:"neighbor"`
	Memory       struct {
		MemBytes         int64 `json:"mem_bytes"`
		GatherPhaseBytes int64 `json:"gather_phase_bytes"`
		SamplePhaseBytes int64 `json:"sample_phase_bytes"`
	} `json:"memory"`
}

// CacheSplit is one cache of a plan.
type CacheSplit struct {
	BudgetBytes int64 `json:"budget_bytes"`
	TableBytes  int64 `json:"table_bytes"`
	DataBytes   int64 `json:"data_bytes"`
	Entries     int64 `json:"entries"`
}

// TableBytes sums the fixed tables of the three caches.
func (p *Plan) TableBytes() int64 {
	return p.Feature.TableBytes + p.History.TableBytes + p.Neighbor.TableBytes
}

// ResidentBytes is what the planned caches hold at once.
func (p *Plan) ResidentBytes() int64 {
	return max(p.Memory.GatherPhaseBytes, p.Memory.SamplePhaseBytes, p.Feature.BudgetBytes+p.History.BudgetBytes+p.Neighbor.BudgetBytes)
}

// CheckPlanFits refuses a plan whose caches (tables included) cannot live
// under memLimit, so training fails with a message instead of being
// OOM-killed half way. memLimit ≤ 0 means no limit.
func CheckPlanFits(p *Plan, memLimit int64) error {
	if memLimit <= 0 {
		return nil
	}
	if need := p.ResidentBytes(); need > memLimit {
		return fmt.Errorf("%w: the planned caches need %d bytes (tables %d, feature %d, history %d, neighbour %d) but the memory limit is %d: plan with a smaller --mem",
			ErrPlanTooBig, need, p.TableBytes(), p.Feature.BudgetBytes, p.History.BudgetBytes, p.Neighbor.BudgetBytes, memLimit)
	}
	return nil
}

// marker records the parameters a prepared dataset was made with.
type marker struct {
	Nodes     int64   `json:"nodes"`
	FeatDim   int     `json:"feat_dim"`
	AvgDegree float64 `json:"avg_degree"`
	TrainFrac float64 `json:"train_frac"`
	Seed      int64   `json:"seed"`
	Parts     int     `json:"parts,omitempty"`
	Profiled  bool    `json:"profiled,omitempty"`
	Fanouts   string  `json:"fanouts,omitempty"`
	BatchSize int     `json:"batch_size,omitempty"`
	// Staleness is the history bound the profile modelled (profile's
	// default, histcache.EpochStaleness at train.PipelineDepth); the
	// children train with the plan's, so a profile made under another
	// default is made again.
	Staleness int64 `json:"staleness,omitempty"`
}

const markerFile = "ooc-bench.json"

type manifestHead struct {
	NumNodes int64 `json:"num_nodes"`
	NumEdges int64 `json:"num_edges"`
	FeatDim  int   `json:"feat_dim"`
	Classes  int   `json:"num_classes"`
	Seed     int64 `json:"seed"`
}

type infoHead struct {
	NumTrain    int64 `json:"num_train"`
	BytesOnDisk int64 `json:"bytes_on_disk"`
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// prepare generates (or reuses) the dataset, partitions and profiles it
// once, and plans the caches for o.CacheBudget. Setup children run
// uncapped: they are not measured.
func (h *harness) prepare(ctx context.Context) (*Dataset, error) {
	o := &h.o
	nodes, err := NodesFor(o.DataSize, o.FeatDim, o.AvgDegree)
	if err != nil {
		return nil, err
	}
	want := marker{Nodes: nodes, FeatDim: o.FeatDim, AvgDegree: o.AvgDegree, TrainFrac: o.TrainFrac, Seed: o.Seed}
	var have marker
	_ = readJSON(filepath.Join(o.Dir, markerFile), &have)
	var mf manifestHead
	mErr := readJSON(filepath.Join(o.Dir, "dataset.json"), &mf)
	ds := &Dataset{Dir: o.Dir}
	same := mErr == nil && mf.NumNodes == nodes && mf.FeatDim == o.FeatDim && mf.Seed == o.Seed &&
		have.Nodes == want.Nodes && have.FeatDim == want.FeatDim && have.AvgDegree == want.AvgDegree && have.TrainFrac == want.TrainFrac && have.Seed == want.Seed
	if same {
		ds.Reused = true
		want.Parts, want.Profiled, want.Fanouts, want.BatchSize, want.Staleness = have.Parts, have.Profiled, have.Fanouts, have.BatchSize, have.Staleness
		h.log.Info("reusing dataset", "dir", o.Dir, "nodes", nodes)
	} else {
		h.log.Info("generating dataset", "dir", o.Dir, "nodes", nodes)
		_ = os.Remove(filepath.Join(o.Dir, markerFile))
		vf := strconv.FormatFloat(o.TrainFrac/2, 'g', -1, 64)
		if _, err := h.setup(ctx, "gen", "gen", o.Dir, "--force", "--nodes", strconv.FormatInt(nodes, 10),
			"--feat-dim", strconv.Itoa(o.FeatDim), "--avg-degree", strconv.FormatFloat(o.AvgDegree, 'g', -1, 64),
			"--train-frac", strconv.FormatFloat(o.TrainFrac, 'g', -1, 64), "--valid-frac", vf, "--test-frac", vf,
			"--seed", strconv.FormatInt(o.Seed, 10), "-q", "--json"); err != nil {
			return nil, err
		}
		if err := writeMarker(o.Dir, want); err != nil {
			return nil, err
		}
		if err := readJSON(filepath.Join(o.Dir, "dataset.json"), &mf); err != nil {
			return nil, err
		}
	}
	ds.NumNodes, ds.NumEdges, ds.FeatDim, ds.Classes = mf.NumNodes, mf.NumEdges, mf.FeatDim, mf.Classes
	out, err := h.setup(ctx, "info", "info", o.Dir, "--json")
	if err != nil {
		return nil, err
	}
	var info infoHead
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("ooc: info --json: %w", err)
	}
	ds.NumTrain, ds.BytesOnDisk = info.NumTrain, info.BytesOnDisk
	// Rounded down and uncapped, unlike partition.DefaultPartsFor (capped,
	// rounded to two levels): the datasets of earlier runs keep their
	// partitionings (133 parts for the 3 GiB dataset of docs/ooc.md).
	ds.Parts = max(1, int(ds.NumTrain)/o.TrainPerPart)
	if want.Parts != ds.Parts || !partitionedInto(o.Dir, ds.Parts) {
		h.log.Info("partitioning", "parts", ds.Parts)
		if _, err := h.setup(ctx, "partition", "partition", o.Dir, "--parts", strconv.Itoa(ds.Parts), "--name", PartitionName,
			"--seed", strconv.FormatInt(o.Seed, 10), "--force", "-q", "--json"); err != nil {
			return nil, err
		}
		want.Parts, want.Profiled = ds.Parts, false
		if err := writeMarker(o.Dir, want); err != nil {
			return nil, err
		}
	}
	// Probe before profiling: the profile prices its feature reads with
	// the merge gap device.json gives, as the children will train. A
	// device profile without the random rate at the gather's depth
	// (written before it was measured) is made again, so that the report
	// prices the gather's limit at that depth; the profile is then made
	// again too (profileReadsAre).
	if dev, err := storage.ReadDeviceProfile(o.Dir); errors.Is(err, storage.ErrNoDeviceProfile) || (err == nil && !dev.HasGatherRate()) {
		h.log.Info("probing the disk")
		if _, err := h.setup(ctx, "probe", "probe", o.Dir, "-q", "--json"); err != nil {
			return nil, err
		}
	}
	if ds.Device, err = storage.ReadDeviceProfile(o.Dir); err != nil {
		return nil, err
	}
	if err := h.profileAndPlan(ctx, ds, &want, ""); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(o.Configs, partitionMajor) {
		if ds.PM, err = h.preparePM(ctx, ds, want); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// partitionedInto reports whether dir holds the benchmark's partitioning
// (PartitionName) in k parts. The marker records what the harness made;
// the partitioning may since have been removed or replaced by hand: a
// reused dataset whose partitions/ooc was gone failed with "run 'ssdgnn
// partition DIR' first", advice that makes another partitioning.
func partitionedInto(dir string, k int) bool {
	p, err := partition.Open(dir, PartitionName)
	if err != nil {
		return false
	}
	defer p.Close()
	return p.K() == k
}

// preparePM relabels ds partition-major into o.Dir+"-pm" (reused while its
// marker matches src's and its manifest records relabel's default order
// within parts), gives it ds's device profile (the same disk),
// then profiles it with the same flags and plans it as ds
// (profileAndPlan).
func (h *harness) preparePM(ctx context.Context, ds *Dataset, src marker) (*Dataset, error) {
	o := &h.o
	pm := *ds
	pm.PM, pm.Dir, pm.Reused = nil, filepath.Clean(o.Dir)+"-pm", false
	var have marker
	_ = readJSON(filepath.Join(pm.Dir, markerFile), &have)
	if have.Nodes != src.Nodes || have.FeatDim != src.FeatDim || have.AvgDegree != src.AvgDegree ||
		have.TrainFrac != src.TrainFrac || have.Seed != src.Seed || have.Parts != src.Parts || !ds.Reused ||
		relabelOrder(pm.Dir) != partition.DefaultRelabelOrder {
		h.log.Info("relabelling partition-major", "dir", pm.Dir)
		if _, err := h.setup(ctx, "relabel", "relabel", o.Dir, pm.Dir, "--partition", PartitionName, "--force", "-q", "--json"); err != nil {
			return nil, err
		}
		have = src
		have.Profiled = false
	} else {
		pm.Reused = true
	}
	if err := writeMarker(pm.Dir, have); err != nil {
		return nil, err
	}
	// The device profile first, so that the profile prices its reads as
	// the child will read (the same disk as ds).
	if err := storage.WriteDeviceProfile(pm.Dir, ds.Device); err != nil {
		return nil, err
	}
	if err := h.profileAndPlan(ctx, &pm, &have, "-pm"); err != nil {
		return nil, err
	}
	return &pm, nil
}

// relabelOrder is the within-part order the relabelled dataset in dir
// records ("" when there is none, or in copies written before the order
// was recorded).
func relabelOrder(dir string) partition.RelabelOrder {
	m, err := storage.LoadManifest(dir)
	if err != nil || m.RelabelledFrom == nil {
		return ""
	}
	return partition.RelabelOrder(m.RelabelledFrom.Order)
}

// profileAndPlan profiles ds.Dir unless its marker m says it was profiled
// with the benchmark's fanouts, batch size and staleness and the profile
// priced its reads with the feature reads' default merge cap, which the
// children train with (updating m and the marker file), then plans it
// for o.CacheBudget, or when that is 0 for what a bare `train --mem` with
// the ssdgnn configuration's flags gives the caches on ds
// (trainCacheShare), into OutDir/plan<tag>.json, and sets ds.CacheBudget,
// ds.PlanFile and ds.Plan.
func (h *harness) profileAndPlan(ctx context.Context, ds *Dataset, m *marker, tag string) error {
	o := &h.o
	stale := histcache.EpochStaleness(ds.NumTrain, o.BatchSize, train.PipelineDepth)
	if !m.Profiled || m.Fanouts != o.Fanouts || m.BatchSize != o.BatchSize || m.Staleness != stale || !profileReadsAre(ds.Dir, childFeatRead, ds.Device) ||
		profileBatchesDiffer(ds.Dir, o, stale) != "" {
		h.log.Info("profiling", "dir", ds.Dir)
		if _, err := h.setup(ctx, "profile"+tag, "profile", ds.Dir, "--partition", PartitionName, "--name", ProfileName,
			"--fanouts", o.Fanouts, "--batch-size", strconv.Itoa(o.BatchSize), "--seed", strconv.FormatInt(o.Seed, 10),
			"--feat-read", childFeatRead.String(), "-q", "--json"); err != nil {
			return err
		}
		m.Profiled, m.Fanouts, m.BatchSize, m.Staleness = true, o.Fanouts, o.BatchSize, stale
		if err := writeMarker(ds.Dir, *m); err != nil {
			return err
		}
	}
	ds.CacheBudget, ds.CacheBudgetFrom = o.CacheBudget, "set"
	if ds.CacheBudget == 0 {
		cb, err := h.trainCacheShare(ds)
		if err != nil {
			return err
		}
		ds.CacheBudget, ds.CacheBudgetFrom = cb, "train"
		h.log.Info("cache budget: what train --mem leaves the caches", "dir", ds.Dir, "bytes", cb)
	}
	ds.PlanFile = filepath.Join(o.OutDir, "plan"+tag+".json")
	if _, err := h.setup(ctx, "plan"+tag, "plan", ds.Dir, "--profile", ProfileName, "--mem", strconv.FormatInt(ds.CacheBudget, 10),
		"--hidden", strconv.Itoa(o.Hidden), "--out", ds.PlanFile, "--json"); err != nil {
		return err
	}
	ds.Plan = new(Plan)
	if err := readJSON(ds.PlanFile, ds.Plan); err != nil {
		return fmt.Errorf("ooc: %s: %w", ds.PlanFile, err)
	}
	return nil
}

// profileReadsAre reports whether dir's benchmark profile priced its
// reads as the training children read (planner.ReadModel.PricedOtherwise
// against featurecache.PlanReads): with the default merge cap and read
// mode mode, at the costs of device profile dev (reads.cost_source
// device.json and its rates, which give the merge gap), from batches
// constructed as the children's (sample_plan), counted by the planner's
// current models (planner.Meta.Outdated). A profile priced
// otherwise ranks the feature cache by other read costs than the
// children's, so the plan would not be theirs. (The profile child runs
// uncapped, where "auto" picks buffered reads; the children, inside their
// cgroups, read with O_DIRECT.)
func profileReadsAre(dir string, mode storage.ReadMode, dev *storage.DeviceProfile) bool {
	path := filepath.Join(planner.ProfilePath(dir, ProfileName), planner.FileProfileJSON)
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	m, err := planner.ParseMeta(b, path)
	if err != nil || m.Reads == nil || dev == nil {
		return false
	}
	plan := featurecache.PlanReads(dev, storage.FileDevice, m.FeatRowBytes, nil)
	plan.Mode = mode.String()
	return m.SamplePlan == sample.PlanVersion && m.Outdated() == "" && m.Reads.PricedOtherwise(plan) == ""
}

// profileBatchesDiffer says how dir's benchmark profile's batches differ
// from those its profile step makes (partition batches from the
// benchmark's partitioning, its fanouts, batch size, seed and
// staleness); "" when they do not. The marker records what the harness
// profiled, but any `train --profile-name ooc` or `profile --name ooc` on
// the dataset since then writes over the profile itself (a GAT run with
// random batches did: the ssdgnn child then planned from it, warned that
// its predictions would not hold, and ran 3.08× instead of 4.34×).
func profileBatchesDiffer(dir string, o *Options, stale int64) string {
	path := filepath.Join(planner.ProfilePath(dir, ProfileName), planner.FileProfileJSON)
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	m, err := planner.ParseMeta(b, path)
	if err != nil {
		return err.Error()
	}
	fanouts, err := cliflags.ParseInts("fanouts", o.Fanouts)
	if err != nil {
		return err.Error()
	}
	switch {
	case m.Mode != string(sample.ModePartition) || m.Partition != PartitionName:
		return fmt.Sprintf("%s batches from partitioning %q, want partition batches from %q", m.Mode, m.Partition, PartitionName)
	case !slices.Equal(m.Fanouts, fanouts) || m.BatchSize != o.BatchSize:
		return fmt.Sprintf("fanouts %v, batch size %d; want %v, %d", m.Fanouts, m.BatchSize, fanouts, o.BatchSize)
	case m.Seed != uint64(o.Seed) || m.Staleness != stale:
		return fmt.Sprintf("seed %d, staleness %d; want %d, %d", m.Seed, m.Staleness, o.Seed, stale)
	}
	return ""
}

func writeMarker(dir string, m marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, markerFile), append(b, '\n'), 0o644)
}

// Chance is the accuracy of guessing one class: 1/classes (0 when the
// class count is unknown).
func (d *Dataset) Chance() float64 {
	if d == nil || d.Classes < 1 {
		return 0
	}
	return 1 / float64(d.Classes)
}

// target is the valid accuracy of time-to-target: factor × chance.
func (d *Dataset) target(factor float64) float64 { return factor * d.Chance() }
