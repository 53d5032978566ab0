package train

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// The child half of TestBudgetUnderCgroup: when -cgroup-child names a
// dataset, TestBudgetChild trains on it under -cgroup-mem and prints its
// measurements as one JSON line.
var (
	cgroupChild = flag.String("cgroup-child", "", "TestBudgetChild: dataset to train on (set by TestBudgetUnderCgroup)")
	cgroupMem   = flag.Int64("cgroup-mem", 0, "TestBudgetChild: --mem in bytes")
)

// budgetResult is what the child measured.
type budgetResult struct {
	// PeakAnon is the largest RssAnon sampled every 5 ms; PeakRSS is
	// VmHWM (anonymous plus file-backed pages, the binary's included).
	PeakAnon int64 `json:"peak_anon"`
	// PlanAnon is the largest RssAnon while planning (the profiling
	// epoch), before training starts; PeakAnon is training's.
	PlanAnon int64 `json:"plan_anon"`
	// PeakHeap is the largest Go heap in objects (live and not yet
	// swept, runtime/metrics /memory/classes/heap/objects:bytes) during
	// training, CountedAtHeap the counters then.
	PeakHeap      int64 `json:"peak_heap"`
	CountedAtHeap int64 `json:"counted_at_heap"`
	PeakRSS       int64 `json:"peak_rss"`
	// Counted is the memacct high-water mark over planning and training,
	// CountedAtAnon the counters when the anonymous peak was sampled: the
	// purposes' total plus the runtime's own memory (RuntimeAtAnon).
	Counted       int64 `json:"counted"`
	CountedAtAnon int64 `json:"counted_at_anon"`
	RuntimeAtAnon int64 `json:"runtime_at_anon"`
	// ObjectsAtAnon is the Go heap's objects (live and not yet swept)
	// when the anonymous peak was sampled: the peak less the runtime and
	// the objects is heap pages free but not yet returned to the OS.
	ObjectsAtAnon int64 `json:"objects_at_anon"`
	// PeakAnonAt and TrainStart, TrainEnd are seconds since the child
	// started: when the anonymous peak was sampled, and training's span.
	PeakAnonAt   float64          `json:"peak_anon_at"`
	TrainStart   float64          `json:"train_start"`
	TrainEnd     float64          `json:"train_end"`
	ByPurpose    map[string]int64 `json:"by_purpose"`
	MicroBatches int              `json:"micro_batches"`
	Batches      int              `json:"batches"`
	Estimate     int64            `json:"estimate"`
}

func TestBudgetChild(t *testing.T) {
	if *cgroupChild == "" {
		t.Skip("child of TestBudgetUnderCgroup")
	}
	mem := *cgroupMem
	defer TuneGC(mem)()
	var (
		mu     sync.Mutex
		res    budgetResult
		stop   = make(chan struct{})
		polled sync.WaitGroup
	)
	memacct.ResetPeak()
	start := time.Now()
	heapObjs := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	polled.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(heapObjs)
			h := int64(heapObjs[0].Value.Uint64())
			if a := memstat.AnonRSS(); a > 0 {
				c := memacct.Read()
				mu.Lock()
				if a > res.PeakAnon {
					res.PeakAnon, res.CountedAtAnon, res.RuntimeAtAnon, res.ObjectsAtAnon = a, c.Total+c.Runtime, c.Runtime, h
					res.PeakAnonAt = time.Since(start).Seconds()
				}
				if h > res.PeakHeap {
					res.PeakHeap, res.CountedAtHeap = h, c.Total
				}
				mu.Unlock()
			}
		}
	})
	d, err := storage.Open(*cgroupChild, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pt, err := partition.Open(*cgroupChild, "fennel")
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	o := &Options{Model: ModelSAGE, Layers: 3, Hidden: 32, Fanouts: []int{10, 10, 10}, BatchSize: 1000, Epochs: 1, InFlight: 1,
		Selection: sample.ModePartition, Partitions: pf, Seed: 1, EvalMode: EvalSampled, EvalFanouts: []int{2, 2, 2}}
	mo := &MemPlanOptions{MemBytes: mem, Part: pt.Part(), Partition: "fennel", Cross: pt.Cross()}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	mp.Apply(o, mo)
	mu.Lock()
	res.PlanAnon, res.PeakAnon, res.CountedAtAnon, res.PeakHeap, res.CountedAtHeap = res.PeakAnon, 0, 0, 0, 0
	res.TrainStart = time.Since(start).Seconds()
	mu.Unlock()
	memacct.ResetPeak() // the profiling epoch's counters are freed: count training
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	close(stop)
	polled.Wait()
	res.TrainEnd = time.Since(start).Seconds()
	res.PeakRSS = memstat.PeakRSS()
	res.Counted, res.ByPurpose = rep.Counted.PeakBytes, rep.Counted.ByPurpose
	res.Batches, res.MicroBatches = rep.Epochs[0].Batches, rep.Epochs[0].MicroBatches
	res.Estimate = rep.Memory.TotalBytes - rep.Memory.ReserveBytes
	b, _ := json.Marshal(res)
	fmt.Printf("BUDGET %s\n", b)
}

// TestBudgetUnderCgroup trains a 3-layer GraphSAGE (batch 1000, fanouts
// 10,10,10) on a generated graph whose features are larger than the
// budget, in a memory cgroup whose limit is --mem, with a budget that
// forces micro-batches (176 MiB: the least this configuration accepts is
// 165 MiB). It checks the promise: no OOM kill, the peak
// anonymous memory under --mem, and the memacct counters explaining most
// of it. It needs root and a memory cgroup controller and skips otherwise.
func TestBudgetUnderCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 150 MB dataset")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory use: a memory budget means nothing under it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	loc, err := cgroup.Locate("/sys/fs/cgroup", "/proc/self/cgroup")
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 250000, FeatDim: 128, Classes: 8, AvgDegree: 20, TrainFrac: 0.02, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := partition.Run(d, &partition.Options{Parts: 250, Seed: 1}); err != nil {
		d.Close()
		t.Fatal(err)
	}
	d.Close()
	const mem = 176 << 20
	cg, err := cgroup.Create(loc, "budget-test", mem)
	if err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	defer cg.Remove()
	argv := cg.Argv([]string{os.Args[0], "-test.run=^TestBudgetChild$", "-test.v", "-cgroup-child", dir, "-cgroup-mem", strconv.Itoa(mem)})
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	st := cg.Stats()
	if st.OOMKills > 0 {
		t.Fatalf("OOM-killed under --mem %d: %+v\n%s", mem, st, out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var res budgetResult
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "BUDGET "); ok {
			if err := json.Unmarshal([]byte(js), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res.PeakAnon <= 0 {
		t.Fatalf("child printed no measurement:\n%s", out)
	}
	peakShare := float64(res.Counted+res.RuntimeAtAnon) / float64(res.PeakAnon)
	t.Logf("--mem %d MiB: planning peak anon %.1f MiB; training peak anon %.1f MiB, VmHWM %.1f MiB, cgroup peak %.1f MiB (page cache included); counted peak %.1f MiB (with the runtime, %.0f%% of the anon peak); counted at the anon peak %.1f MiB (%.0f%% of it; Go runtime %.1f MiB of that; heap objects then %.1f MiB, free heap pages not yet returned %.1f MiB); Go heap objects peak %.1f MiB, counted then %.1f MiB (%.0f%%); estimate %.1f MiB; anon peak at %.2f s (training %.2f–%.2f s); %d batches as %d micro-batches; by purpose %v",
		mem>>20, mib(res.PlanAnon), mib(res.PeakAnon), mib(res.PeakRSS), mib(st.PeakBytes), mib(res.Counted), 100*peakShare, mib(res.CountedAtAnon), 100*float64(res.CountedAtAnon)/float64(res.PeakAnon), mib(res.RuntimeAtAnon), mib(res.ObjectsAtAnon), mib(res.PeakAnon-res.RuntimeAtAnon-res.ObjectsAtAnon), mib(res.PeakHeap), mib(res.CountedAtHeap), 100*float64(res.CountedAtHeap)/float64(res.PeakHeap), mib(res.Estimate), res.PeakAnonAt, res.TrainStart, res.TrainEnd, res.Batches, res.MicroBatches, res.ByPurpose)
	if res.MicroBatches <= res.Batches {
		t.Errorf("the budget did not split batches (%d batches, %d micro-batches): the test does not exercise micro-batching", res.Batches, res.MicroBatches)
	}
	if max(res.PeakAnon, res.PlanAnon) > mem {
		t.Errorf("peak anonymous memory %d (planning %d) > --mem %d", res.PeakAnon, res.PlanAnon, mem)
	}
	if res.Counted > mem-RuntimeReserve(mem) {
		t.Errorf("counted peak %d exceeds the budget less the reserve (%d)", res.Counted, mem-RuntimeReserve(mem))
	}
	if peakShare < countedPeakShare {
		t.Errorf("the counters' peak (with the runtime's memory) is %.0f%% of the peak anonymous memory, want at least %.0f%%", 100*peakShare, 100*countedPeakShare)
	}
	if float64(res.CountedAtAnon) < countedShare*float64(res.PeakAnon) {
		t.Errorf("counters at the anonymous peak explain %.0f%% of it, want at least %.0f%%", 100*float64(res.CountedAtAnon)/float64(res.PeakAnon), 100*countedShare)
	}
}

// countedPeakShare is the share of the peak anonymous memory that the
// counters' peak (memacct's purposes, plus the Go runtime's own memory)
// must reach: issue #13's 85 %. Measured on 2026-11-25 (2-core VM, --mem
// 176 MiB): 91–92 % in four runs.
const countedPeakShare = 0.85

// countedShare is the share of the peak anonymous memory that the
// counters (memacct's purposes plus the Go runtime's own memory) must
// explain at the instant of that peak. Measured on 2026-11-25 (2-core VM,
// --mem 176 MiB, collector at BudgetGCPercent): 86–89 % in five runs on an
// idle machine, 84–88 % in three with two busy loops beside it; later
// that day 83–91 % in 16 runs (docs/train.md, "At the instant of the
// peak"). The instant's gap is mostly heap pages the runtime freed and
// has not yet returned (its scavenger's design keeps about 10 % above the
// heap goal).
// The floor sits below the spread so that a loaded CI machine does not
// fail it; the log line reports every run's share.
const countedShare = 0.75

func mib(b int64) float64 { return float64(b) / (1 << 20) }
