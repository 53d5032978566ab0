package train

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/iostat"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// job is one batch travelling through the pipeline.
type job struct {
	idx  int
	iter int64
	// micro of micros is the job's place among its batch's micro-batches
	// (0 of 1: the batch whole); weight is its share of the batch's
	// labelled targets, which scales its loss gradient. Only the last
	// micro-batch of a batch steps the optimiser.
	micro, micros int
	weight        float32
	// batchReused is the batch's reused hop-1 nodes (on its last job).
	batchReused int
	// batch is the sampled batch the job's host batch aliases, on the
	// batch's last job: freeJob releases it (sample.Batch.Release).
	batch  *sample.Batch
	hb     *hostBatch
	hist   *hist
	feats  []float32
	labels []int32
	// buf is feats' ring buffer, returned to ring when the batch's input
	// no longer needs it (after upload, or when x is freed if x adopted it).
	buf  []float32
	ring *bufRing
	// dropped: the input layer's dropout was applied to feats on the host,
	// or, on the zero-copy path, by upload on the backend (with dropP and
	// dropSeed, the mask hostDropout would draw).
	dropped  bool
	dropP    float32
	dropSeed uint64
	// zc splits the input rows on the zero-copy path (nil: every row is
	// in feats); feats then holds only the misses.
	zc *zcSplit
	// macro and macroParts are the batch's macro batch and its parts, for
	// the feature block (macroParts nil: none).
	macro      int
	macroParts []int
	// on the backend
	blocks []*devBlock
	x      kernels.Tensor
	// xAgg is the streamed input layer's aggregate (nil: not streamed);
	// x then holds the destinations' own rows, or is nil (GCN).
	xAgg kernels.Tensor
	lab  kernels.IntTensor
	// streamed: gather filled feats with the streamed input layer's
	// aggregate and own rows (gatherStreamed), not the input rows.
	streamed bool
}

func (t *Trainer) freeJob(j *job) {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	for _, b := range j.blocks {
		if b != nil {
			t.be.FreeBlock(b.blk)
			t.be.FreeInts(b.iota)
		}
	}
	if j.x != nil {
		t.be.Free(j.x)
	}
	if j.xAgg != nil {
		t.be.Free(j.xAgg)
	}
	t.be.FreeInts(j.lab)
	j.blocks, j.x, j.xAgg, j.lab = nil, nil, nil, nil
	if j.ring != nil {
		j.ring.put(j.buf)
	}
	j.buf, j.feats = nil, nil
	t.releaseBatch(j)
}

// releaseBatch releases the job's host batch and, on the batch's last
// job, its sampled batch from the memory counters.
func (t *Trainer) releaseBatch(j *job) {
	if j.hb != nil {
		j.hb.uncount()
	}
	if j.batch != nil {
		j.batch.Release()
		j.batch = nil
	}
}

// batchSource is the sample stage's input: a *sample.Iterator, or a
// *sample.SpillIterator with Options.Spill.
type batchSource interface {
	Next() (*sample.Batch, error)
	Stats() sample.LookupStats
	Close() error
}

// epochBatches starts sampling epoch t.epoch and returns the batches'
// source and count. The caller must Close the source (a spill source
// deletes its file then).
func (t *Trainer) epochBatches(ctx context.Context) (batchSource, int64, error) {
	if !t.o.Spill {
		it := t.sampler.Epoch(ctx, t.epoch)
		if it.Plan() == nil {
			// The plan failed: Next reports why.
			_, err := it.Next()
			it.Close()
			return nil, 0, err
		}
		return it, int64(len(it.Plan().Batches)), nil
	}
	pl, err := t.sampler.Plan(t.epoch)
	if err != nil {
		return nil, 0, err
	}
	si, err := t.sampler.SpillEpoch(ctx, t.epoch, &sample.SpillOptions{Dir: t.o.SpillDir,
		ChunkBatches: t.o.SpillChunk, AheadChunks: t.spillAhead(), Logger: t.o.Logger})
	if err != nil {
		return nil, 0, err
	}
	return si, int64(len(pl.Batches)), nil
}

// spillAhead is how many announced chunks the spill writer may have
// waiting: SpillAhead, or with history enough for the writer to reach
// every batch whose reuse request compute can wait for. The reuse
// protocol bounds the writer's lead itself (the sampler waits at batch i
// for compute of batch i−D; its dispatcher runs Prefetch = InFlight
// batches further), so the announcements need not bound it, and must not
// bound it tighter: D's upper bound (package doc, "Decoupled sample
// stage") counts the pipeline between the reader and compute in batches,
// but with micro-batches its stages hold parts of one or two batches, and
// a writer paused at SpillAhead chunks never reached the batch compute
// waited for (a deadlock).
// t.o has its defaults.
func (t *Trainer) spillAhead() int {
	if t.hc == nil {
		return t.o.SpillAhead
	}
	c := t.o.SpillChunk
	return max(t.o.SpillAhead, (t.depth+t.o.InFlight+c-1)/c+1)
}

// stageClock accumulates busy nanoseconds.
type stageClock struct{ ns atomic.Int64 }

func (c *stageClock) since(t0 time.Time) { c.ns.Add(int64(time.Since(t0))) }
func (c *stageClock) sec() float64       { return float64(c.ns.Load()) / 1e9 }
func (c *stageClock) add(sec float64)    { c.ns.Add(int64(sec * 1e9)) }

// trainEpoch runs the four-stage pipeline over epoch t.epoch, skipping the
// first t.batchDone batches.
func (t *Trainer) trainEpoch(parent context.Context) (EpochStats, error) {
	o := &t.o
	es := EpochStats{Epoch: t.epoch}
	acc0 := t.d.Accounting().Snapshot()
	io0, ioErr := iostat.Self()
	fc0 := t.featStats()
	var histEdges int64  // hop-2 neighbours not drawn below reused nodes
	var histReused int64 // hop-1 nodes whose embedding was reused
	var hc0 histcache.Stats
	if t.hc != nil {
		hc0 = t.hc.Stats()
	}
	wall0 := time.Now()

	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	var sa, ga, tr, co stageClock
	skip, step0 := t.batchDone, t.step
	es.ResumedAt = skip
	if skip > 0 {
		// A mid-epoch checkpoint resumed with other batches (another
		// --batch-size, --parts-per-batch or partitioning) may have
		// trained more of its epoch than this run's epoch holds: that
		// skipped every batch and reported an epoch of none.
		pl, err := t.sampler.Plan(t.epoch)
		if err != nil {
			return es, err
		}
		if n := len(pl.Batches); skip > n {
			return es, fmt.Errorf("%w: it stopped epoch %d after batch %d, and this run's epoch has %d batches: resume with the batch options it was trained with (--batch-size, --parts-per-batch, the partitioning)",
				ErrMismatch, t.epoch, skip, n)
		}
	}
	var er *epochReuse
	if t.hc != nil {
		pl, err := t.sampler.Plan(t.epoch)
		if err != nil {
			return es, err
		}
		er = &epochReuse{epoch: t.epoch, skip: skip, step0: step0, slots: make([]chan histReq, len(pl.Batches)), resp: map[int]histResp{}}
		for i := range er.slots {
			er.slots[i] = make(chan histReq, 1)
		}
		t.reuseMu.Lock()
		t.reuse = er
		t.reuseMu.Unlock()
		defer func() {
			t.reuseMu.Lock()
			t.reuse = nil
			t.reuseMu.Unlock()
		}()
	}
	// The feature block loads each macro batch's parts: the plan names
	// them (the same plan the sampler follows).
	var fbPlan *sample.Plan
	var fbRows, fbLoads, fbBytes int64
	if t.fb != nil {
		var err error
		if fbPlan, err = t.sampler.Plan(t.epoch); err != nil {
			return es, err
		}
		fbRows, fbLoads, fbBytes = t.fb.hits.Load(), t.fb.loads.Load(), t.fb.loadBytes.Load()
	}
	it, total, err := t.epochBatches(ctx)
	if err != nil {
		return es, err
	}
	task := o.Progress.Start(fmt.Sprintf("epoch %d", t.epoch), total, progress.Items)
	task.Add(int64(t.batchDone))
	defer task.Done()

	epoch := t.epoch
	ring := newBufRing(o.InFlight)
	defer func() { t.lastRing = ring.stats(); ring.release() }()
	toGather := make(chan *job, 1)
	toTransfer := make(chan *job, 1)
	toCompute := make(chan *job, 1)
	gat := o.Model == ModelGAT
	L := o.Layers
	var wg sync.WaitGroup
	wg.Add(3)
	// Sample: deliver sampled batches (the sampler has applied the reuse
	// decision: reused nodes were not expanded) and convert them.
	go func() {
		defer wg.Done()
		defer close(toGather)
		defer it.Close()
		defer storage.FailFault(fail, debug.SetPanicOnFault(true)) // a truncated mapped file: the epoch's error, not SIGBUS
		for i, iter := 0, step0; ; i++ {
			b, err := it.Next()
			if err == io.EOF { // the end; a wrapped io.EOF is a failed read
				return
			}
			if err != nil {
				fail(err)
				return
			}
			t0 := time.Now()
			sa.add(b.SampleSeconds)
			if i < skip {
				b.Release()
				continue
			}
			j := &job{idx: i, iter: iter}
			if fbPlan != nil && b.Macro >= 0 && b.Macro < len(fbPlan.MacroParts) {
				j.macro, j.macroParts = b.Macro, fbPlan.MacroParts[b.Macro]
			}
			iter++
			if er != nil {
				top := &b.Blocks[L-1]
				resp, ok := er.take(i)
				if !ok {
					fail(fmt.Errorf("train: internal error: batch %d sampled without a reuse decision", i))
					return
				}
				reused := make([]int32, len(resp.reused))
				for k, p := range resp.reused {
					reused[k] = p + int32(top.NumDst)
				}
				if !slices.Equal(reused, b.Reused) {
					fail(fmt.Errorf("train: internal error: batch %d: sampler reused %v, decided %v", i, b.Reused, reused))
					return
				}
				histReused += int64(len(reused))
				k2 := o.Fanouts[L-2]
				for _, r := range reused {
					deg := t.d.Degree(top.Src[r])
					if k2 >= 0 {
						deg = min(deg, int64(k2))
					}
					histEdges += deg
				}
				hs := &hist{reused: reused, pulled: resp.pulled, wantEmb: true, wantGrad: o.HistPolicy == histcache.PolicyGrad}
				r := 0
				for k := 0; k < len(top.Src); k++ {
					if r < len(reused) && int(reused[r]) == k {
						r++
						continue
					}
					hs.computed = append(hs.computed, int32(k))
				}
				j.hist = hs
			}
			hb := convert(b, nil, gat)
			hb.withDegrees(t.deg)
			k := t.microCount(hb)
			sa.since(t0)
			if k == 1 {
				mj := &job{idx: j.idx, iter: j.iter, micros: 1, weight: 1, hb: hb, hist: j.hist, batch: b,
					macro: j.macro, macroParts: j.macroParts}
				if j.hist != nil {
					mj.batchReused = len(j.hist.reused)
				}
				select {
				case toGather <- mj:
				case <-ctx.Done():
					t.releaseBatch(mj)
					return
				}
				continue
			}
			// Micro-batches are built one at a time, as the pipeline
			// takes them: only those in flight exist. Each copies what it
			// needs, so the host and sampled batches are released after
			// the last is built.
			sp := newSplitter(hb, k)
			labels := t.d.Labels()
			total := countLabelled(labels, hb.nodes[:hb.targets])
			for m := range sp.k {
				t0 := time.Now()
				mb := sp.build(m)
				lo, hi := sp.targets(m)
				mj := &job{idx: j.idx, iter: j.iter, micro: m, micros: sp.k, hb: mb.hb, macro: j.macro, macroParts: j.macroParts}
				if total > 0 {
					mj.weight = float32(countLabelled(labels, hb.nodes[lo:hi])) / float32(total)
				}
				if j.hist != nil {
					mj.hist = subHist(j.hist, mb, t.hc.Hidden())
				}
				if m == sp.k-1 {
					hb.uncount()
					b.Release()
					if j.hist != nil {
						mj.batchReused = len(j.hist.reused)
					}
				}
				sa.since(t0)
				select {
				case toGather <- mj:
				case <-ctx.Done():
					t.releaseBatch(mj)
					if m < sp.k-1 {
						hb.uncount()
						b.Release()
					}
					return
				}
			}
		}
	}()
	// Gather: feature rows and labels into host buffers. With the
	// streamed input layer, one scan reads the input rows of up to
	// scanBatches jobs (streamer.startGroup); otherwise each job is gathered
	// alone.
	scanN := 1
	if t.stream != nil {
		scanN = scanBatches(o)
	}
	go func() {
		defer wg.Done()
		defer close(toTransfer)
		var group []*job // the jobs in hand
		var pending *job // taken from toGather for the next scan
		// On an early return (a failure, or cancellation) the batches
		// not handed on are released here, those in hand included: the
		// sample stage stops once the context is done and closes
		// toGather.
		defer func() {
			for _, j := range group {
				t.releaseBatch(j)
			}
			if pending != nil {
				t.releaseBatch(pending)
			}
			for j := range toGather {
				t.releaseBatch(j)
			}
		}()
		// A truncated mapped file (labels.npy, read by gatherLabels) is
		// the epoch's error, not SIGBUS. Deferred last, it runs before the
		// drain above, which waits for the sample stage that fail stops:
		// deferred first (HandleFault), the drain ran first and training
		// hung for good (TestEpochLabelsTruncated).
		defer storage.FailFault(func(err error) {
			for _, j := range group {
				ring.put(j.buf)
				j.buf, j.feats, j.ring = nil, nil, nil
			}
			fail(err)
		}, debug.SetPanicOnFault(true))
		for {
			group = group[:0]
			if pending != nil {
				group, pending = append(group, pending), nil
			} else if j, ok := <-toGather; ok {
				group = append(group, j)
			} else {
				return
			}
			// Waiting here for the next jobs cannot deadlock: scanN is at
			// most the reuse depth D, so their reuse decisions wait only
			// on batches before this scan.
			for len(group) < scanN {
				j, ok := <-toGather
				if !ok {
					break
				}
				if t.fb != nil && j.macro != group[0].macro {
					// The feature block holds one macro batch.
					pending = j
					break
				}
				group = append(group, j)
			}
			t0 := time.Now()
			if t.stream != nil {
				// Start reading before waiting for buffers: the first
				// chunks' reads (and the feature block's load) overlap
				// the computation of the batches before.
				if err := t.startStreamed(group); err != nil {
					fail(err)
					return
				}
			}
			ga.since(t0)
			// Waiting for free buffers is back-pressure from compute, not
			// gather work: it is not timed (the streamed reads started
			// above go on meanwhile).
			for k, j := range group {
				var size int
				if t.stream == nil {
					t0 := time.Now()
					size = t.split(j) * t.d.FeatDim()
					ga.since(t0)
				} else { // no zero-copy split: streamQualifies rules it out
					size = t.stream.outputs(j.hb.blocks[0].NumDst)
				}
				buf, err := ring.get(ctx, size)
				if err != nil {
					if t.stream != nil {
						t.stream.abort()
					}
					for _, j := range group[:k] {
						ring.put(j.buf)
						j.buf, j.feats, j.ring = nil, nil, nil
					}
					return
				}
				j.feats, j.buf, j.ring = buf, buf, ring
			}
			t0 = time.Now()
			drop := float32(o.Dropout)
			var err error
			if t.stream != nil {
				err = t.gatherStreamed(group, drop, epoch)
			} else {
				j := group[0]
				if err = t.gather(j); err == nil && drop > 0 {
					seed := mixSeed(t.batchSeed(epoch, j.idx), 0)
					if j.zc == nil {
						hostDropout(j.feats, drop, seed)
					} else {
						// Hits never reach the host: upload drops on the
						// backend once the input is assembled.
						j.dropP, j.dropSeed = drop, seed
					}
				}
			}
			if err != nil {
				for _, j := range group {
					ring.put(j.buf)
					j.buf, j.feats, j.ring = nil, nil, nil
				}
				fail(err)
				return
			}
			for _, j := range group {
				// The streamed rows were dropped as they went by.
				j.dropped = drop > 0
			}
			ga.since(t0)
			for k, j := range group {
				select {
				case toTransfer <- j:
				case <-ctx.Done():
					for _, j := range group[k:] {
						ring.put(j.buf)
						j.buf, j.feats, j.ring = nil, nil, nil
					}
					group = group[k:]
					return
				}
			}
			group = group[:0]
		}
	}()
	// Transfer: upload to the backend.
	go func() {
		defer wg.Done()
		defer close(toCompute)
		defer storage.FailFault(fail, debug.SetPanicOnFault(true)) // a truncated mapped file: the epoch's error, not SIGBUS
		for j := range toTransfer {
			t0 := time.Now()
			err := t.upload(j)
			tr.since(t0)
			if err != nil {
				t.freeJob(j)
				fail(err)
				return
			}
			select {
			case toCompute <- j:
			case <-ctx.Done():
				t.freeJob(j)
				return
			}
		}
	}()

	// Compute runs here and answers batch i's reuse request right after
	// computing batch i−D.
	D := t.depth
	serve := func(i int) {
		if er == nil || i >= len(er.slots) {
			return
		}
		var r histReq
		select {
		case r = <-er.slots[i]:
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		r.reply <- t.histLookup(r)
		co.since(t0)
	}
	for k := range D {
		serve(skip + k)
	}
	var lossSum float64
	var lossN, correct, seen int
	if skip > 0 {
		// Resumed mid-epoch: the batches trained before the checkpoint
		// count towards the epoch's loss and train accuracy.
		p := t.partial
		lossSum, lossN, correct, seen = p.LossSum, p.LossN, p.Correct, p.Seen
	}
	for j := range toCompute {
		if ctx.Err() != nil {
			t.freeJob(j)
			continue
		}
		t0 := time.Now()
		loss, n, c, tot, err := t.computeBatch(j)
		es.InputNodes += int64(len(j.hb.nodes))
		if j.zc != nil {
			es.InputRowsZeroCopy += int64(len(j.zc.hitPos))
			es.InputRowsUploaded += int64(len(j.zc.missPos))
		} else {
			es.InputRowsUploaded += int64(len(j.hb.nodes))
		}
		t.freeJob(j)
		if err == nil && j.hist != nil {
			err = t.histPush(j)
			es.Reused += int64(j.batchReused)
		}
		co.since(t0)
		if err != nil {
			fail(err)
			continue
		}
		lossSum += float64(loss) * float64(n)
		lossN += n
		correct += c
		seen += tot
		if j.micros > 1 {
			es.MicroBatches++
		}
		if j.micro < j.micros-1 {
			continue
		}
		t.step++
		t.batchDone = j.idx + 1
		t.partial = epochPartial{LossSum: lossSum, LossN: lossN, Correct: correct, Seen: seen}
		es.Batches++
		task.Add(1)
		if o.Logger.Enabled(ctx, slog.LevelDebug) { // blockDsts allocates: not on every batch when not asked for
			o.Logger.Debug("batch done", "epoch", t.epoch, "batch", j.idx+1, "of", total,
				"input_rows", len(j.hb.nodes), "destinations", blockDsts(j.hb.blocks), "epoch_s", time.Since(wall0).Seconds())
		}
		if testBatchDone != nil {
			testBatchDone(j.hb, int64(j.idx+1) == total && j.micro == j.micros-1)
		}
		if lossN > 0 {
			task.Describe(fmt.Sprintf("epoch %d loss %.4f", t.epoch, lossSum/float64(lossN)))
		}
		serve(j.idx + D)
	}
	// Drain a pending request so the sampler goroutine can finish.
	cancel()
	wg.Wait()
	for _, ch := range []chan *job{toGather, toTransfer, toCompute} {
		for j := range ch {
			t.freeJob(j)
		}
	}
	if firstErr == nil && parent.Err() != nil {
		firstErr = parent.Err()
	}
	if firstErr != nil {
		return es, firstErr
	}
	es.WallSec = time.Since(wall0).Seconds()
	es.Stages = StageTimes{Sample: sa.sec(), Gather: ga.sec(), Transfer: tr.sec(), Compute: co.sec()}
	if es.WallSec > 0 {
		es.Overlap = es.Stages.Sum() / es.WallSec
	}
	if lossN > 0 {
		es.Loss = lossSum / float64(lossN)
	}
	es.TrainAcc = ratio(int64(correct), int64(seen))
	es.Storage = subStages(t.d.Accounting().Snapshot(), acc0)
	es.GatherReadsPerSec, es.GatherMBPerSec = gatherRates(es.Storage, es.Stages.Gather)
	es.IOReadBytes = -1
	if io1, err := iostat.Self(); err == nil && ioErr == nil {
		es.IOReadBytes = io1.Sub(io0).ReadBytes
	}
	ls := it.Stats()
	es.Lookups = ls
	if t.fb != nil {
		es.FeatureBlockRows = t.fb.hits.Load() - fbRows
		es.FeatureBlockLoads = t.fb.loads.Load() - fbLoads
		es.FeatureBlockLoadBytes = t.fb.loadBytes.Load() - fbBytes
	}
	es.NeighborHit, es.DynamicHit = ls.Share(ls.Global), ls.Share(ls.Dynamic)
	fc1 := t.featStats()
	es.FeatureHit = ratio(fc1.Hits-fc0.Hits, fc1.Requests-fc0.Requests)
	idBytes := int64(4)
	if t.d.Indices32() == nil {
		idBytes = 8
	}
	// FeatureBytesSaved is the feature cache's hit bytes alone: the
	// history's rows not gathered are not countable per epoch, and
	// histEdges (draws, duplicates included) is no count of rows.
	es.Measured = planner.Measured{FeatRows: float64(fc1.Hits - fc0.Hits), HistGatherRows: float64(histEdges), HistReusedNodes: float64(histReused),
		FeatureBytesSaved:  float64((fc1.BytesRequested - fc1.BytesMissed) - (fc0.BytesRequested - fc0.BytesMissed)),
		NeighborBytesSaved: float64(ls.Global.BytesSaved + histEdges*idBytes)}
	g := gatherStage(es.Storage)
	es.Measured.GatherReads, es.Measured.GatherBytesRead = float64(g.ReadCalls), float64(g.BytesRead)
	es.Measured.GatherRows = float64(fc1.Requests - fc0.Requests)
	es.Measured.SampledIDs = float64(ls.Global.Sampled + ls.Storage.Sampled)
	es.Measured.NeighborCacheBytes = float64(ls.Global.BytesSaved)
	es.Measured.IDBytes = float64(idBytes)
	if t.hc != nil {
		hc1 := t.hc.Stats()
		es.HistHit = ratio(hc1.Hits-hc0.Hits, hc1.Lookups-hc0.Lookups)
	}
	return es, nil
}

// epochPartial is an epoch's loss and train-accuracy sums so far: the
// loss summed over labelled targets (LossSum/LossN is the epoch's loss)
// and the targets predicted correctly of those seen.
type epochPartial struct {
	LossSum float64 `json:"loss_sum"`
	LossN   int     `json:"loss_n"`
	Correct int     `json:"correct"`
	Seen    int     `json:"seen"`
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// gatherRates is the gather stage's read calls and MB (10^6 bytes) read
// per second of sec.
func gatherRates(st []storage.StageStats, sec float64) (readsPerSec, mbPerSec float64) {
	if sec <= 0 {
		return 0, 0
	}
	g := gatherStage(st)
	return float64(g.ReadCalls) / sec, float64(g.BytesRead) / 1e6 / sec
}

// gatherStage is st's gather stage (zero when it read nothing).
func gatherStage(st []storage.StageStats) storage.StageStats {
	for _, s := range st {
		if s.Stage == storage.StageGather {
			return s
		}
	}
	return storage.StageStats{}
}

func subStages(now, before []storage.StageStats) []storage.StageStats {
	prev := map[string]storage.StageStats{}
	for _, s := range before {
		prev[s.Stage] = s
	}
	var out []storage.StageStats
	for _, s := range now {
		p := prev[s.Stage]
		d := storage.StageStats{Stage: s.Stage, Rows: s.Rows - p.Rows, BytesRequested: s.BytesRequested - p.BytesRequested,
			BytesRead: s.BytesRead - p.BytesRead, ReadCalls: s.ReadCalls - p.ReadCalls}
		if d.Rows != 0 || d.BytesRequested != 0 || d.BytesRead != 0 {
			out = append(out, d)
		}
	}
	return out
}

// upload copies a job's blocks, features and labels to the backend.
func (t *Trainer) upload(j *job) error {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	be := t.be
	j.blocks = make([]*devBlock, len(j.hb.blocks))
	for l, kb := range j.hb.blocks {
		if l == 0 && j.streamed {
			// The host folded the input layer's edges into its
			// aggregate; the layer reads only its destination count
			// (preAggregated.forwardPre, no input gradient), so the
			// largest block's edges are not uploaded.
			kb = &kernels.Block{NumDst: kb.NumDst, NumSrc: kb.NumDst, Indptr: make([]int32, kb.NumDst+1)}
		}
		db, err := be.UploadBlock(kb)
		if err != nil {
			return err
		}
		j.blocks[l] = &devBlock{blk: db}
	}
	rows, dim := len(j.hb.nodes), t.d.FeatDim()
	if j.zc != nil {
		x, err := t.uploadZeroCopy(j)
		if err != nil {
			return err
		}
		j.x = x
		if j.ring != nil {
			j.ring.put(j.buf)
		}
		j.buf = nil
	} else if j.streamed {
		// The aggregate, then (SAGE) the destinations' own rows.
		nd := j.hb.blocks[0].NumDst
		parts := [][]float32{j.feats[:nd*dim]}
		if t.stream.own {
			parts = append(parts, j.feats[nd*dim:2*nd*dim])
		}
		ts, err := t.hostTensors(j, nd, dim, parts)
		if err != nil {
			return err
		}
		j.xAgg = ts[0]
		if len(ts) > 1 {
			j.x = ts[1]
		}
	} else {
		ts, err := t.hostTensors(j, rows, dim, [][]float32{j.feats})
		if err != nil {
			return err
		}
		j.x = ts[0]
	}
	lab, err := be.AllocInts(len(j.labels))
	if err != nil {
		return err
	}
	j.lab = lab
	be.UploadInts(lab, j.labels)
	// Identity indices of every block, allocated here so compute's tape
	// does not own them.
	for _, b := range j.blocks {
		n := b.blk.NumDst()
		idx, err := be.AllocInts(n)
		if err != nil {
			return err
		}
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i)
		}
		be.UploadInts(idx, v)
		b.iota = idx
	}
	j.feats = nil
	return be.Err()
}

// batchSeed is the dropout seed of batch idx of epoch; layer l's mask is
// drawn with mixSeed(batchSeed, l).
func (t *Trainer) batchSeed(epoch, idx int) uint64 {
	return mixSeed(mixSeed(t.o.Seed, uint64(epoch)+0x100), uint64(idx))
}

// computeBatch runs forward, backward and the Adam step of one batch.
func (t *Trainer) computeBatch(j *job) (loss float32, n, correct, total int, err error) {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	tp := &tape{be: t.be}
	defer tp.free()
	p := &pass{train: true, inputDropped: j.dropped, seed: t.batchSeed(t.epoch, j.idx), blocks: j.blocks, x: j.x, xAgg: j.xAgg, hist: j.hist}
	err = tp.run(func() {
		logits := t.model.forward(tp, p)
		dl := tp.alloc(logits.Rows(), logits.Cols())
		var e error
		loss, n, e = t.be.CrossEntropy(dl, logits, j.lab)
		if e != nil {
			panic(tapeError{e})
		}
		if l := float64(loss); math.IsNaN(l) || math.IsInf(l, 0) {
			panic(tapeError{fmt.Errorf("%w: epoch %d batch %d: loss %v; stopped before the update (lower --lr, or check the features with 'ssdgnn validate'); checkpoints already written are kept",
				ErrNonFinite, t.epoch, j.idx, loss)})
		}
		correct, total, e = t.be.Accuracy(logits, j.lab)
		if e != nil {
			panic(tapeError{e})
		}
		if j.micros > 1 {
			t.be.Scale(dl, j.weight)
		}
		t.model.backward(tp, p, dl)
		if j.micros > 1 {
			if e := t.accumulate(j.micro == 0, j.micro == j.micros-1); e != nil {
				panic(tapeError{e})
			}
			if j.micro < j.micros-1 {
				return
			}
		}
		t.model.step(int(t.step)+1, t.adam())
	})
	return loss, n, correct, total, err
}

// microCount is the micro-batches hb is cut into: Options.MicroBatches
// when set, else the fewest that fit the working set the budget planned
// (Trainer.bound).
func (t *Trainer) microCount(hb *hostBatch) int {
	if k := t.o.MicroBatches; k > 1 {
		return max(1, min(k, hb.targets))
	}
	return fitSplit(hb, t.bound)
}

// accumulate adds the parameter gradients of the micro-batch just
// backpropagated to the batch's sums (first: they start the sums); on the
// batch's last micro-batch (last) it moves the sums into the gradients
// the optimiser steps with.
func (t *Trainer) accumulate(first, last bool) error {
	ps := t.model.Params()
	if t.gradAcc == nil {
		t.gradAcc = make([]kernels.Tensor, len(ps))
		for i, p := range ps {
			a, err := t.be.Alloc(p.G.Rows(), p.G.Cols())
			if err != nil {
				return err
			}
			t.gradAcc[i] = a
		}
	}
	for i, p := range ps {
		if first {
			t.be.Copy(t.gradAcc[i], p.G)
		} else {
			t.be.Add(t.gradAcc[i], t.gradAcc[i], p.G)
		}
		if last {
			t.be.Copy(p.G, t.gradAcc[i])
		}
	}
	return t.be.Err()
}

func (t *Trainer) adam() kernels.AdamConfig {
	c := kernels.DefaultAdam()
	c.LR, c.WeightDecay = float32(t.o.LR), float32(t.o.WeightDecay)
	return c
}

// gather is the gather stage shared by training and inference: it fills
// j.feats (already sized by split) with the feature rows of j's input
// nodes, normalised, and j.labels with its targets' labels. On the
// zero-copy path feats receives only the misses; the hits are counted
// here (the gather stage's accounting and featStats) and left to upload.
func (t *Trainer) gather(j *job) error {
	ids := j.hb.nodes
	var served int64 // cache hits left to the upload
	if j.zc != nil {
		ids = j.zc.missIDs
		if h := int64(len(j.zc.hitPos)); h > 0 {
			t.zc.stage.Request(h, h*t.zc.rowBytes)
			t.zc.hits.Add(h)
			served = h
		}
	}
	gather, err := t.rowGatherer(j, served)
	if err != nil {
		return err
	}
	if err := gather(ids, j.feats); err != nil {
		return err
	}
	t.normalize(j.feats)
	t.gatherLabels(j)
	return nil
}

// rowGatherer returns the function that reads j's feature rows (float32,
// in ids' order): through the feature block when j's macro batch has one
// (loading it first), else the feature cache. served of j's feature-cache
// hits are not among ids (the zero-copy path uploads them); they count
// under the read cap (featurecache.Cache.GatherF32Served). The block's
// rows do not: they lie in the macro batch's own id ranges, not between
// the misses.
func (t *Trainer) rowGatherer(j *job, served int64) (func(ids []int64, dst []float32) error, error) {
	fc := func(ids []int64, dst []float32) error { return t.fc.GatherF32Served(ids, dst, served) }
	if t.fb == nil || j.macroParts == nil {
		return fc, nil
	}
	if err := t.fb.load(j.macro, j.macroParts); err != nil {
		return nil, err
	}
	dim := t.d.FeatDim()
	return func(ids []int64, dst []float32) error { return t.fb.gatherF32(ids, dst, dim, fc) }, nil
}

// gatherLabels sets j.labels to its targets' labels.
func (t *Trainer) gatherLabels(j *job) {
	labels := t.d.Labels()
	j.labels = make([]int32, j.hb.targets)
	for k, v := range j.hb.nodes[:j.hb.targets] {
		j.labels[k] = labels[v]
	}
}

// gatherStreamed is gather for the streamed input layer, after
// startStreamed: each job's feats (sized by streamer.outputs) receives its
// input layer's aggregate and its destinations' own rows, with the input
// dropout (drop, and the batch's seed in epoch) applied as hostDropout
// would have applied it to the whole input.
func (t *Trainer) gatherStreamed(group []*job, drop float32, epoch int) error {
	var prep func([]float32)
	if t.o.NormalizeFeatures {
		prep = t.normalize
	}
	outs := make([]streamOutput, len(group))
	for k, j := range group {
		outs[k] = streamOutput{out: j.feats, drop: drop, seed: mixSeed(t.batchSeed(epoch, j.idx), 0)}
	}
	if err := t.stream.foldGroup(outs, prep); err != nil {
		return err
	}
	for _, j := range group {
		j.streamed = true
		t.gatherLabels(j)
	}
	return nil
}

// startStreamed starts the scan of group's input rows
// (streamer.startGroup): the feature block of its macro batch is loaded
// and the first chunks are read while the gather stage waits for output
// buffers; gatherStreamed folds them in.
func (t *Trainer) startStreamed(group []*job) error {
	gather, err := t.rowGatherer(group[0], 0) // streaming rules zero-copy out
	if err != nil {
		return err
	}
	in := make([]streamInput, len(group))
	for k, j := range group {
		in[k] = streamInput{nodes: j.hb.nodes, b0: j.hb.blocks[0]}
	}
	return t.stream.startGroup(in, gather)
}

// hostTensors makes a rows×dim backend tensor of each of parts (slices
// of j's ring buffer): the backend adopts them where it can (the buffer
// then goes back to the ring when freeJob frees them), else they are
// copied and the buffer goes back now. On an error the tensors made are
// freed and the buffer stays with j. Called with beMu held.
func (t *Trainer) hostTensors(j *job, rows, dim int, parts [][]float32) ([]kernels.Tensor, error) {
	_, adopt := t.be.(adopter)
	adopt = adopt && j.buf != nil
	ts := make([]kernels.Tensor, len(parts))
	for i, v := range parts {
		x, err := hostTensor(t.be, adopt, rows, dim, v)
		if err != nil {
			for _, y := range ts[:i] {
				t.be.Free(y)
			}
			return nil, err
		}
		ts[i] = x
	}
	if !adopt {
		if j.ring != nil {
			j.ring.put(j.buf)
		}
		j.buf = nil
	}
	return ts, nil
}

// hostTensor is a rows×cols backend tensor of the host slice v: v itself
// where adopt and the backend adopts host memory (kernels/cpu; v is then
// the tensor's until it is freed), else a copy.
func hostTensor(be kernels.Backend, adopt bool, rows, cols int, v []float32) (kernels.Tensor, error) {
	if ad, ok := be.(adopter); ok && adopt {
		return ad.Adopt(rows, cols, v)
	}
	x, err := be.Alloc(rows, cols)
	if err != nil {
		return nil, err
	}
	be.Upload(x, v)
	return x, nil
}

// normalize scales every feature row to unit L1 norm when
// Options.NormalizeFeatures is set (rows of zeros stay zero).
func (t *Trainer) normalize(f []float32) {
	if !t.o.NormalizeFeatures {
		return
	}
	dim := t.d.FeatDim()
	for r := 0; r+dim <= len(f); r += dim {
		var s float64
		for _, x := range f[r : r+dim] {
			s += math.Abs(float64(x))
		}
		if s > 0 {
			inv := float32(1 / s)
			for i := r; i < r+dim; i++ {
				f[i] *= inv
			}
		}
	}
}

// blockDsts is each block's destination count, input layer first.
func blockDsts(blocks []*kernels.Block) []int {
	n := make([]int, len(blocks))
	for i, b := range blocks {
		n[i] = b.NumDst
	}
	return n
}

// testBatchDone, when set (tests), sees every computed (micro-)batch, and
// whether it was the epoch's last.
var testBatchDone func(hb *hostBatch, last bool)
