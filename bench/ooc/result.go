package ooc

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/ssdgnn/ssdgnn/internal/child"
	"github.com/ssdgnn/ssdgnn/storage"
)

// ChildResult is one measured child process (package internal/child).
type ChildResult = child.Result

// TrainReport is the part of `ssdgnn train --json` the harness reads. It is
// decoded by field name, so the harness does not link the trainer.
type TrainReport struct {
	Epochs      []Epoch `json:"epochs"`
	FinalValid  float64 `json:"final_valid_acc"`
	FinalTest   float64 `json:"final_test_acc"`
	Interrupted bool    `json:"interrupted"`
	Checkpoint  string  `json:"checkpoint,omitempty"`
	ElapsedSec  float64 `json:"elapsed_s"`
}

// Epoch is one line of --metrics (train.EpochStats by field name).
type Epoch struct {
	Epoch     int     `json:"epoch"`
	Batches   int     `json:"batches"`
	Loss      float64 `json:"loss"`
	TrainAcc  float64 `json:"train_acc"`
	Evaluated bool    `json:"evaluated"`
	ValidAcc  float64 `json:"valid_acc"`
	TestAcc   float64 `json:"test_acc"`
	WallSec   float64 `json:"wall_s"`
	EvalSec   float64 `json:"eval_s"`
	// ElapsedSec: since training started, evaluation included.
	ElapsedSec float64 `json:"elapsed_s"`
	Stages     struct {
		Sample   float64 `json:"sample_s"`
		Gather   float64 `json:"gather_s"`
		Transfer float64 `json:"transfer_s"`
		Compute  float64 `json:"compute_s"`
	} `json:"stages"`
	Overlap float64 `json:"overlap"`
	Storage []struct {
		Stage          string `json:"stage"`
		Rows           int64  `json:"rows_requested"`
		BytesRequested int64  `json:"bytes_requested"`
		BytesRead      int64  `json:"bytes_read"`
		ReadCalls      int64  `json:"read_calls"`
	} `json:"storage"`
	IOReadBytes int64   `json:"io_read_bytes"`
	NeighborHit float64 `json:"neighbor_hit_rate"`
	DynamicHit  float64 `json:"dynamic_hit_rate"`
	FeatureHit  float64 `json:"feature_hit_rate"`
	HistHit     float64 `json:"hist_hit_rate"`
	Reused      int64   `json:"hist_reused"`
	InputNodes  int64   `json:"input_nodes"`
}

// BytesRequested sums the storage requests of the sample and gather
// stages. The "load" stage is excluded not because it is one-off (within
// an epoch it holds the macro batches' list loads and the feature block's
// fills, every epoch) but because what it loads is requested again, and
// counted, where the sample and gather stages are served from it.
func (e *Epoch) BytesRequested() int64 {
	var n int64
	for _, s := range e.Storage {
		if s.Stage != "load" {
			n += s.BytesRequested
		}
	}
	return n
}

// ParseTrainReport decodes the stdout of `ssdgnn train --json`.
func ParseTrainReport(b []byte) (*TrainReport, error) {
	var r TrainReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("ooc: train report: %w", err)
	}
	return &r, nil
}

// ParseMetrics decodes a --metrics JSON-lines file; a torn last line (a
// killed child) is ignored.
func ParseMetrics(b []byte) ([]Epoch, error) {
	var out []Epoch
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		line := b[:i]
		if i < len(b) {
			b = b[i+1:]
		} else {
			b = nil
			if len(line) > 0 && !json.Valid(line) {
				break
			}
		}
		if len(line) == 0 {
			continue
		}
		var e Epoch
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("ooc: metrics line %d: %w", len(out)+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func readMetrics(path string) ([]Epoch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(b)
}

// ConfigResult is one configuration's outcome.
type ConfigResult struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Args        []string `json:"args"`
	// Capped: the child ran inside a memory cgroup of MemLimit bytes.
	Capped     bool         `json:"capped"`
	CacheDrop  string       `json:"cache_drop"` // "dropped" or why not
	Epochs     []Epoch      `json:"epochs"`
	FinalValid float64      `json:"final_valid_acc"`
	FinalTest  float64      `json:"final_test_acc"`
	Child      *ChildResult `json:"child,omitempty"`
	Error      string       `json:"error,omitempty"`
	// Means over the epochs.
	EpochSec          float64 `json:"epoch_s"`
	SampleSec         float64 `json:"sample_s"`
	GatherSec         float64 `json:"gather_s"`
	TransferSec       float64 `json:"transfer_s"`
	ComputeSec        float64 `json:"compute_s"`
	IOReadPerEpoch    float64 `json:"io_read_bytes_per_epoch"`
	RequestedPerEpoch float64 `json:"bytes_requested_per_epoch"`
	// The gather stage's storage reads per epoch (its own accounting:
	// read calls and bytes read, merged reads counted whole), their rate
	// over the Gather busy seconds, and GatherLimitSec, the device time
	// they need at the disk's measured costs: calls / random reads per
	// second at the gather's depth (storage.DeviceProfile.LimitReadSec;
	// at the probe's first depth in a profile without it) + bytes /
	// sequential bandwidth (Dataset.Device).
	GatherReadsPerEpoch     float64 `json:"gather_reads_per_epoch"`
	GatherBytesReadPerEpoch float64 `json:"gather_bytes_read_per_epoch"`
	GatherReadsPerSec       float64 `json:"gather_reads_per_s"`
	GatherMBPerSec          float64 `json:"gather_mb_per_s"`
	GatherLimitSec          float64 `json:"gather_limit_s"`
	// GatherLimitNowSec is the same device time at the rates the disk
	// showed during this run: the mean of the limits under the probes
	// before and after the configurations (Report.Disk); 0 without them.
	GatherLimitNowSec float64 `json:"gather_limit_now_s,omitempty"`
	// The first epoch and the mean of the epochs after it, apart: the
	// first starts with an empty history cache (no embedding is reused
	// before one has been computed), so it reads more than the epochs
	// after it. LaterEpochs is how many epochs the later means cover (0
	// with one epoch: the later fields are then 0).
	FirstEpochSec       float64 `json:"first_epoch_s"`
	FirstIORead         float64 `json:"first_io_read_bytes"`
	FirstHistHit        float64 `json:"first_hist_hit_rate"`
	LaterEpochs         int     `json:"later_epochs"`
	LaterEpochSec       float64 `json:"later_epoch_s"`
	LaterIOReadPerEpoch float64 `json:"later_io_read_bytes_per_epoch"`
	LaterHistHit        float64 `json:"later_hist_hit_rate"`
	// RR is input-layer nodes per training node (OUTRE's redundancy ratio).
	RR          float64 `json:"rr"`
	NeighborHit float64 `json:"neighbor_hit_rate"`
	DynamicHit  float64 `json:"dynamic_hit_rate"`
	FeatureHit  float64 `json:"feature_hit_rate"`
	HistHit     float64 `json:"hist_hit_rate"`
	// EvalSec is the mean evaluation time of the evaluated epochs.
	EvalSec float64 `json:"eval_s"`
	// TargetValid is the report's target accuracy; EpochsToTarget and
	// SecondsToTarget (training and evaluation since the start) say when
	// an epoch's evaluation first reached it (0 and -1: never).
	TargetValid     float64 `json:"target_valid_acc"`
	EpochsToTarget  int     `json:"epochs_to_target"`
	SecondsToTarget float64 `json:"seconds_to_target"`
}

// toTarget fills the time-to-target fields for target.
func (c *ConfigResult) toTarget(target float64) {
	c.TargetValid, c.EpochsToTarget, c.SecondsToTarget = target, 0, -1
	for i, e := range c.Epochs {
		if e.Evaluated && target > 0 && e.ValidAcc >= target {
			c.EpochsToTarget, c.SecondsToTarget = i+1, e.ElapsedSec
			return
		}
	}
}

// OOMKilled reports an OOM kill of the child.
func (c *ConfigResult) OOMKilled() bool { return c.Child != nil && c.Child.OOMKilled() }

// OK reports a completed run.
func (c *ConfigResult) OK() bool {
	return c.Error == "" && c.Child != nil && c.Child.OK() && len(c.Epochs) > 0
}

// summarize fills the means from Epochs; numTrain is the training-set
// size, dev the disk the gather limit is computed for (nil: none).
func (c *ConfigResult) summarize(numTrain int64, dev *storage.DeviceProfile) {
	n := float64(len(c.Epochs))
	if n == 0 {
		return
	}
	var in int64
	var evals int
	for i := range c.Epochs {
		e := &c.Epochs[i]
		if e.Evaluated {
			c.EvalSec += e.EvalSec
			evals++
		}
		c.EpochSec += e.WallSec / n
		c.SampleSec += e.Stages.Sample / n
		c.GatherSec += e.Stages.Gather / n
		c.TransferSec += e.Stages.Transfer / n
		c.ComputeSec += e.Stages.Compute / n
		c.IOReadPerEpoch += float64(e.IOReadBytes) / n
		c.RequestedPerEpoch += float64(e.BytesRequested()) / n
		for _, s := range e.Storage {
			if s.Stage == "gather" {
				c.GatherReadsPerEpoch += float64(s.ReadCalls) / n
				c.GatherBytesReadPerEpoch += float64(s.BytesRead) / n
			}
		}
		in += e.InputNodes
	}
	if c.GatherSec > 0 {
		c.GatherReadsPerSec = c.GatherReadsPerEpoch / c.GatherSec
		c.GatherMBPerSec = c.GatherBytesReadPerEpoch / 1e6 / c.GatherSec
	}
	c.GatherLimitSec = c.gatherLimit(dev)
	if evals > 0 {
		c.EvalSec /= float64(evals)
	}
	if numTrain > 0 {
		c.RR = float64(in) / n / float64(numTrain)
	}
	first := &c.Epochs[0]
	c.FirstEpochSec, c.FirstIORead, c.FirstHistHit = first.WallSec, float64(first.IOReadBytes), first.HistHit
	if later := c.Epochs[1:]; len(later) > 0 {
		m := float64(len(later))
		c.LaterEpochs = len(later)
		for i := range later {
			c.LaterEpochSec += later[i].WallSec / m
			c.LaterIOReadPerEpoch += float64(later[i].IOReadBytes) / m
			c.LaterHistHit += later[i].HistHit / m
		}
	}
	last := c.Epochs[len(c.Epochs)-1]
	c.NeighborHit, c.DynamicHit, c.FeatureHit, c.HistHit = last.NeighborHit, last.DynamicHit, last.FeatureHit, last.HistHit
}

// gatherLimit is the device time the gather's reads per epoch need on
// dev: read calls at its random rate at the gather's depth
// (storage.DeviceProfile.LimitReadSec) plus bytes at its sequential
// bandwidth; 0 without a valid dev.
func (c *ConfigResult) gatherLimit(dev *storage.DeviceProfile) float64 {
	if dev == nil || dev.Validate() != nil {
		return 0
	}
	perRead, _ := dev.LimitReadSec()
	return c.GatherReadsPerEpoch*perRead + c.GatherBytesReadPerEpoch/dev.SeqBytesPerSec
}

// DiskCheck is the disk as probed during a run (ssdgnn probe --dry-run
// on the dataset's directory): just before the first configuration and
// just after the last. Either is nil when its probe failed (logged).
type DiskCheck struct {
	Before *storage.DeviceProfile `json:"before,omitempty"`
	After  *storage.DeviceProfile `json:"after,omitempty"`
}

// limitNow is the mean of c's gather limits under d's probes (0 unless
// both are there).
func (d *DiskCheck) limitNow(c *ConfigResult) float64 {
	if d == nil {
		return 0
	}
	a, b := c.gatherLimit(d.Before), c.gatherLimit(d.After)
	if a == 0 || b == 0 {
		return 0
	}
	return (a + b) / 2
}
