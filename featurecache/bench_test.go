package featurecache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// Benchmark workload: a synthetic power-law graph and two-layer uniform
// neighbour sampling (fanouts 10, 10; 512 targets per batch), the access
// pattern of GraphSAGE mini-batch training. Each batch gathers the unique
// nodes of its 2-hop sampled neighbourhood.
const (
	benchNodes  = 100_000
	benchDim    = 128
	benchBatch  = 512
	benchFanout = 10
)

// sampleEpoch returns the unique input nodes of every batch of one epoch
// over train, shuffled and sampled with seed.
func sampleEpoch(d *storage.Dataset, train []int64, seed uint64) [][]int64 {
	return sampleBatches(d, train, seed, benchBatch, -1)
}

// sampleBatches is sampleEpoch with batch targets per batch, stopping
// after maxBatches batches (-1: the whole epoch).
func sampleBatches(d *storage.Dataset, train []int64, seed uint64, batchSize, maxBatches int) [][]int64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	order := slices.Clone(train)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	seen := make([]uint32, d.NumNodes()) // batch stamp
	var out [][]int64
	var nbuf []int64
	for b := 0; b*batchSize < len(order) && b != maxBatches; b++ {
		stamp := uint32(b + 1)
		var batch []int64
		add := func(v int64) bool {
			if seen[v] == stamp {
				return false
			}
			seen[v] = stamp
			batch = append(batch, v)
			return true
		}
		frontier := order[b*batchSize : min((b+1)*batchSize, len(order))]
		for _, v := range frontier {
			add(v)
		}
		for range 2 {
			var next []int64
			for _, v := range frontier {
				nbuf = d.Neighbors(v).AppendTo(nbuf[:0])
				if len(nbuf) > benchFanout {
					for i := range benchFanout { // partial Fisher-Yates
						j := i + rng.IntN(len(nbuf)-i)
						nbuf[i], nbuf[j] = nbuf[j], nbuf[i]
					}
					nbuf = nbuf[:benchFanout]
				}
				for _, u := range nbuf {
					if add(u) {
						next = append(next, u)
					}
				}
			}
			frontier = next
		}
		out = append(out, batch)
	}
	return out
}

func countAccesses(n int64, epochs ...[][]int64) []uint32 {
	c := make([]uint32, n)
	for _, e := range epochs {
		for _, b := range e {
			for _, v := range b {
				c[v]++
			}
		}
	}
	return c
}

// BenchmarkPolicies reports, per policy and budget (a fraction of the
// feature bytes, address table included), the hit rate and the storage
// bytes read in one evaluation epoch. "profiled" uses counts of one
// earlier pre-sampling epoch (PreSC#1, OUTRE's saved_I/O_feat);
// "optimal" uses the counts of the evaluation epoch itself (the upper
// bound of a static cache); "dynamic" is warmed by the pre-sampling epoch
// first. Run with -benchtime=1x.
func BenchmarkPolicies(b *testing.B) {
	dir := b.TempDir()
	cfg := synth.Config{Nodes: benchNodes, FeatDim: benchDim, Seed: 1}
	if _, err := synth.Generate(dir, cfg, &synth.Options{MemBytes: 64 << 20}); err != nil {
		b.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	planted, err := synth.NewPlanted(cfg)
	if err != nil {
		b.Fatal(err)
	}
	communities := cfg.WithDefaults().Communities
	// "uniform": the dataset's random 10% train split. "community": every
	// node of the first 10% of communities, a training set with locality
	// (as in real graphs whose labelled nodes cluster), where degree and
	// hotness part ways.
	var local []int64
	for v := range d.NumNodes() {
		if c, _ := planted.Community(v); c < communities/10 {
			local = append(local, v)
		}
	}
	for _, w := range []struct {
		name  string
		train []int64
	}{{"uniform", d.TrainIdx()}, {"community", local}} {
		b.Run("train="+w.name, func(b *testing.B) { benchPolicies(b, d, w.train) })
	}
}

func benchPolicies(b *testing.B, d *storage.Dataset, train []int64) {
	pre := sampleEpoch(d, train, 1)
	eval := sampleEpoch(d, train, 2)
	preCounts := countAccesses(d.NumNodes(), pre)
	oracle := countAccesses(d.NumNodes(), eval)
	featBytes := d.NumNodes() * d.FeatRowBytes()
	maxRows := 0
	for _, bt := range append(slices.Clone(eval), pre...) {
		maxRows = max(maxRows, len(bt))
	}
	dst := make([]byte, int64(maxRows)*d.FeatRowBytes())
	for _, frac := range []float64{0.05, 0.10, 0.20} {
		budget := int64(frac * float64(featBytes))
		for _, pol := range []string{"profiled", "degree", "dynamic", "optimal"} {
			b.Run(fmt.Sprintf("budget=%.0f%%/%s", frac*100, pol), func(b *testing.B) {
				acct := storage.NewAccounting()
				opts := &featurecache.Options{Stage: acct.Stage("gather"), LoadStage: acct.Stage("load")}
				switch pol {
				case "profiled":
					opts.Policy, opts.Counts = featurecache.PolicyProfiled, preCounts
				case "optimal":
					opts.Policy, opts.Counts = featurecache.PolicyProfiled, oracle
				case "degree":
					opts.Policy = featurecache.PolicyDegree
				case "dynamic":
					opts.Policy = featurecache.PolicyDynamic
				}
				c, err := featurecache.New(context.Background(), d, budget, opts)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if pol == "dynamic" {
					for _, bt := range pre {
						if err := c.Gather(bt, dst); err != nil {
							b.Fatal(err)
						}
					}
					c.Wait()
				}
				s0 := c.Stats()
				r0 := snapshot(acct, "gather").BytesRead
				b.ResetTimer()
				for range b.N {
					for _, bt := range eval {
						if err := c.Gather(bt, dst); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				c.Wait()
				s := c.Stats()
				hits, reqs := s.Hits-s0.Hits, s.Requests-s0.Requests
				read := (snapshot(acct, "gather").BytesRead - r0) / int64(b.N)
				b.ReportMetric(100*float64(hits)/float64(reqs), "hit%")
				b.ReportMetric(float64(read), "bytes/epoch")
				b.ReportMetric(float64(reqs)/b.Elapsed().Seconds(), "rows/s")
				b.Logf("budget %.0f%% (%d B) %s: rows cached %d, hit rate %.1f%%, storage %d B/epoch of %d requested",
					frac*100, budget, pol, s.CachedRows, 100*float64(hits)/float64(reqs), read, (s.BytesRequested-s0.BytesRequested)/int64(b.N))
			})
		}
	}
}
