package featurecache_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	gatherDir     = flag.String("gather-dir", "", "dataset of BenchmarkGatherReads (default: a generated 200k-node one)")
	gatherBatch   = flag.Int("gather-batch", 1000, "targets per batch of BenchmarkGatherReads (2-hop, fanout 10)")
	gatherBatches = flag.Int("gather-batches", 4, "batches per iteration of BenchmarkGatherReads")
	gatherGaps    = flag.String("gather-gaps", "", "extra merge gaps (rows, comma-separated) for BenchmarkGatherReads")
)

// BenchmarkGatherReads gathers the 2-hop sampled input rows of a few
// batches with no cache (every row a miss, O_DIRECT where the file system
// allows it), read one row per pread as before read plans, or merged by
// the dataset's device profile (device.json, else the default), by pread
// or io_uring. It reports rows/s, read calls/s, MB/s read, reads per
// batch, bytes read over bytes requested, and the device-time limit of
// those reads at the profile's costs over the time taken. Run with
// -benchtime 1x and -gather-dir on a dataset bigger than the page cache
// can hide (O_DIRECT bypasses it anyway).
func BenchmarkGatherReads(b *testing.B) {
	dir := *gatherDir
	if dir == "" {
		dir = b.TempDir()
		if _, err := synth.Generate(dir, synth.Config{Nodes: 200_000, FeatDim: benchDim, Seed: 1}, &synth.Options{MemBytes: 64 << 20}); err != nil {
			b.Fatal(err)
		}
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	batches := sampleBatches(d, d.TrainIdx(), 1, *gatherBatch, *gatherBatches)
	maxRows, rows := 0, 0
	for _, bt := range batches {
		maxRows = max(maxRows, len(bt))
		rows += len(bt)
	}
	b.Logf("%s: %d nodes, %d batches of %d targets, %.0f input rows per batch", dir, d.NumNodes(), len(batches), *gatherBatch, float64(rows)/float64(len(batches)))
	dev, err := storage.ReadDeviceProfile(dir)
	if errors.Is(err, storage.ErrNoDeviceProfile) {
		dev, err = storage.DefaultDeviceProfile(d.FeatRowBytes()), nil
	}
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, int64(maxRows)*d.FeatRowBytes())
	type readCase struct {
		name string
		gap  int64
		io   storage.IOEngine
	}
	var cases []readCase
	for _, tc := range []readCase{
		{"rowwise-pread", featurecache.PerRowReads, storage.IOPread},
		{"rowwise-uring", featurecache.PerRowReads, storage.IOUring},
		{"merged-pread", 0, storage.IOPread},
		{"merged-uring", 0, storage.IOUring},
	} {
		cases = append(cases, tc)
	}
	for _, g := range strings.Split(*gatherGaps, ",") {
		if n, err := strconv.ParseInt(g, 10, 64); err == nil && n > 0 {
			cases = append(cases, readCase{fmt.Sprintf("gap%d-pread", n), n, storage.IOPread}, readCase{fmt.Sprintf("gap%d-uring", n), n, storage.IOUring})
		}
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			acct := storage.NewAccounting()
			c, err := featurecache.New(context.Background(), d, 0, &featurecache.Options{Mode: storage.ReadAuto,
				CoalesceGap: tc.gap, IO: tc.io, Stage: acct.Stage("gather"), LoadStage: acct.Stage("load")})
			if err != nil {
				b.Skip(err)
			}
			defer c.Close()
			p := c.ReadPlan()
			s0 := snapshot(acct, "gather")
			b.ResetTimer()
			for range b.N {
				for _, bt := range batches {
					if err := c.Gather(bt, dst); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			s := snapshot(acct, "gather")
			sec := b.Elapsed().Seconds()
			calls, read, req := float64(s.ReadCalls-s0.ReadCalls), float64(s.BytesRead-s0.BytesRead), float64(s.BytesRequested-s0.BytesRequested)
			limit := calls*dev.RandomReadSec() + read/dev.SeqBytesPerSec
			b.ReportMetric(float64(rows*b.N)/sec, "rows/s")
			b.ReportMetric(calls/sec, "reads/s")
			b.ReportMetric(read/1e6/sec, "MB/s")
			b.ReportMetric(calls/float64(len(batches)*b.N), "reads/batch")
			b.ReportMetric(read/req, "read/requested")
			b.ReportMetric(limit/sec, "limit/actual")
			b.Logf("%s: gap %d rows (%s), %s, %s: %.0f reads, %.1f MB read of %.1f MB requested in %.2fs; device limit %.2fs",
				tc.name, p.GapRows, p.Source, p.Engine, p.Mode, calls, read/1e6, req/1e6, sec, limit)
		})
	}
}
