package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/radix"
	"github.com/ssdgnn/ssdgnn/neighborcache"
)

// Defaults of PlanOptions.
const (
	DefaultStep    = 0.01
	DefaultNbrStep = 0.05
	// DefaultHidden is train's default hidden width (train.DefaultHidden,
	// which a train test ties to it): a plan made with bare flags divides
	// the budget for the embeddings a bare train keeps. It was 256, so the
	// README's profile, plan, train flow planned for embeddings twice as
	// wide as it trained.
	DefaultHidden = 128
)

// PlanOptions configures Plan. Zero fields take their defaults; MemBytes
// is required.
type PlanOptions struct {
	// MemBytes is the host-memory budget B for the caches.
	MemBytes int64
	// Hidden is the width of a historical embedding (float32). Default
	// DefaultHidden. A negative value disables the history cache.
	Hidden int
	// FeatRowBytes and NumNodes default to the profile's.
	FeatRowBytes int64
	NumNodes     int64
	// Decoupled says the Sample stage runs on its own (OUTRE §4.1): the
	// neighbour cache then gets all of MemBytes while sampling and the
	// feature and history caches share MemBytes afterwards. Otherwise
	// all three caches are resident together and the planner also sizes
	// the neighbour cache (see the package doc).
	Decoupled bool
	// Indptr is the dataset's CSR offsets (N+1 entries), used to cost the
	// neighbour cache. Required unless Decoupled; when Decoupled it only
	// adds the neighbour cache's predicted entries and savings.
	Indptr []int64
	// Cross, when set, models the neighbour cache's PolicyCross selection
	// (cross-partition neighbour counts); otherwise PolicyDegree.
	Cross []int32
	// Step is the α step (default 0.01); NbrStep the step of the
	// neighbour-cache share grid (default 0.05).
	Step, NbrStep float64
	// Beta overrides the profile's β when > 0.
	Beta float64
	// Staleness is the history cache's staleness bound; 0 means the
	// profile's (itself histcache.DefaultStaleness by default). The
	// validity arrays are computed for the profile's value, so a
	// different positive value is ErrMismatch (re-profile instead).
	Staleness int64
	// Keep, when set, is a plan whose division Plan keeps (its
	// NeighborFrac and Alpha, with MemBytes its budget): only the
	// predictions are made again, from p. It is how a plan made from
	// whole batches is re-predicted once training cuts them into
	// micro-batches (Profile.RemodelReads).
	Keep *PlanResult
}

// Validate reports whether o is usable.
func (o *PlanOptions) Validate() error {
	bad := func(f string, a ...any) error { return opterr.Errorf(ErrInvalidOptions, f, a...) }
	switch {
	case o == nil:
		return bad("nil PlanOptions: %s is required", opterr.Field("MemBytes"))
	case o.MemBytes <= 0:
		return bad("%s %d, want > 0", opterr.Field("MemBytes"), o.MemBytes)
	case o.FeatRowBytes < 0 || o.NumNodes < 0:
		return bad("negative FeatRowBytes or %s", opterr.Field("NumNodes"))
	case o.Step < 0 || o.Step > 1 || o.NbrStep < 0 || o.NbrStep > 1:
		return bad("Step %g / NbrStep %g, want in (0, 1]", o.Step, o.NbrStep)
	case o.Beta < 0 || math.IsNaN(o.Beta):
		return bad("Beta %g, want >= 0", o.Beta)
	case o.Staleness < 0:
		return bad("%s %d, want >= 1 (0: the profile's)", opterr.Field("Staleness"), o.Staleness)
	case !o.Decoupled && o.Indptr == nil:
		return bad("Indptr is required unless %s (the neighbour cache is sized from degrees)", opterr.Field("Decoupled"))
	case o.Keep != nil && (o.Keep.Memory.MemBytes != o.MemBytes || o.Keep.Decoupled != o.Decoupled):
		return bad("Keep is a plan for %d bytes (decoupled %v), not %d (%v)", o.Keep.Memory.MemBytes, o.Keep.Decoupled, o.MemBytes, o.Decoupled)
	}
	return nil
}

// CacheSplit is one cache's share of the budget.
type CacheSplit struct {
	// BudgetBytes is what to pass to the cache's constructor (its
	// table included); the cache then holds exactly Entries entries.
	BudgetBytes int64 `json:"budget_bytes"`
	TableBytes  int64 `json:"table_bytes"`
	DataBytes   int64 `json:"data_bytes"`
	// Entries is the number of rows, embeddings or lists held.
	Entries int64 `json:"entries"`
}

// Bytes is TableBytes + DataBytes.
func (c CacheSplit) Bytes() int64 { return c.TableBytes + c.DataBytes }

// MemItem is one line of the memory arithmetic.
type MemItem struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// Memory is the plan's memory arithmetic. Each phase's sum is at most
// MemBytes (Plan checks it).
type Memory struct {
	MemBytes int64     `json:"mem_bytes"`
	Items    []MemItem `json:"items"`
	// GatherPhaseBytes: feature + history caches (+ neighbour cache when
	// not decoupled). SamplePhaseBytes: the neighbour cache when
	// decoupled, else equal to GatherPhaseBytes.
	GatherPhaseBytes int64 `json:"gather_phase_bytes"`
	SamplePhaseBytes int64 `json:"sample_phase_bytes"`
}

// Predicted are the plan's predicted savings per epoch (profile sums
// divided by PresampleEpochs).
type Predicted struct {
	// Benefit is Eq. 5 at the chosen split, in feature rows per epoch
	// (plus the neighbour cache's row-equivalents when not decoupled);
	// with the read model the feature term is device time in units of a
	// mean storage row's (package doc, "Read costs").
	Benefit float64 `json:"benefit_rows"`
	// BenefitParts are the feature, history and neighbour caches' parts
	// of Benefit (they add up to it), in its unit.
	BenefitParts [3]float64 `json:"benefit_parts"`
	// FeatRows are the feature-cache hits; HistGatherRows the rows the
	// history cache removes from Gather; HistSampledNeighbors the sampled
	// neighbours it removes from Sample (β-weighted in Benefit).
	FeatRows             float64 `json:"feat_rows"`
	HistGatherRows       float64 `json:"hist_gather_rows"`
	HistSampledNeighbors float64 `json:"hist_sampled_neighbors"`
	// HistReusedNodes: hop-1 appearances served by the history cache
	// (the validity model's hits over the cached nodes); 0 with an old
	// profile without the model.
	HistReusedNodes float64 `json:"hist_reused_nodes"`
	// HistSkippedDraws: Σ over reuse hits of min(fanout below hop 1,
	// degree), the hop-2 draws the sampler skips: the quantity the
	// trainer measures (Measured.HistGatherRows). Needs Indptr and the
	// validity model, else 0.
	HistSkippedDraws float64 `json:"hist_skipped_draws"`
	// NeighborCacheBytes: list bytes the neighbour cache serves.
	NeighborCacheBytes float64 `json:"neighbor_cache_bytes"`
	// NoHistSampledIDs: the neighbours the profile's epoch drew from
	// lists the dynamic cache did not serve (the lists HistSample counts
	// draws from); 0 with a profile written before the sampler counted
	// them. The trainer's epoch draws HistSampledNeighbors fewer.
	NoHistSampledIDs float64 `json:"no_hist_sampled_ids,omitempty"`
	// NoHistGatherRows are the rows the profile's batches ask of the
	// feature cache an epoch (the read model's rows, so the trainer's
	// micro-batches and scans; the feature block's rows excluded), and
	// GatherRows what the history leaves of them: NoHistGatherRows·keep
	// (package doc, "Held-out hits"). Both 0 without the read model.
	NoHistGatherRows float64 `json:"no_hist_gather_rows,omitempty"`
	GatherRows       float64 `json:"gather_rows,omitempty"`
	// FeatureBytesSaved = (FeatRows + rows not gathered)·FeatRowBytes,
	// with rows not gathered NoHistGatherRows − GatherRows (HistGatherRows
	// without the read model).
	FeatureBytesSaved float64 `json:"feature_bytes_saved"`
	// NeighborBytesSaved = NeighborCacheBytes + HistSampledNeighbors·IDBytes
	// (the history part counts sampled ids, a lower bound on list bytes).
	NeighborBytesSaved float64 `json:"neighbor_bytes_saved"`
	// The gather's storage reads left under the plan (profiles with the
	// read model only; 0 otherwise): read calls, bytes read, and their
	// device time at the profile's costs (ReadModel.Seconds);
	// NoCacheGatherSeconds is that time with no cache.
	GatherReads          float64 `json:"gather_reads,omitempty"`
	GatherBytesRead      float64 `json:"gather_bytes_read,omitempty"`
	GatherSeconds        float64 `json:"gather_device_seconds,omitempty"`
	NoCacheGatherSeconds float64 `json:"no_cache_gather_device_seconds,omitempty"`
}

// CurvePoint is Eq. 5 at one α (with the chosen neighbour share).
type CurvePoint struct {
	Alpha    float64 `json:"alpha"`
	Benefit  float64 `json:"benefit_rows"`
	FeatRows int64   `json:"feat_entries"`
	HistRows int64   `json:"hist_entries"`
}

// PlanResult is a memory split.
type PlanResult struct {
	Profile string `json:"profile"`
	// ProfileID is the profile's Profile.ID when the plan was made: a
	// profile saved again under the name since (another training's
	// --mem re-profiles into "train") no longer matches it. Empty in plans
	// written before 2026-11-27.
	ProfileID    string  `json:"profile_id,omitempty"`
	Dataset      string  `json:"dataset"`
	NumNodes     int64   `json:"num_nodes"`
	FeatRowBytes int64   `json:"feat_row_bytes"`
	Hidden       int     `json:"hidden"`
	Decoupled    bool    `json:"decoupled"`
	Beta         float64 `json:"beta"`
	Step         float64 `json:"step"`
	// Alpha is the feature cache's share of the memory left after the
	// tables (and the neighbour cache); the history cache gets 1−Alpha.
	Alpha float64 `json:"alpha"`
	// NeighborFrac is the neighbour cache's share of MemBytes (0 when
	// decoupled: it then gets all of it while sampling).
	NeighborFrac float64    `json:"neighbor_frac"`
	Feature      CacheSplit `json:"feature"`
	History      CacheSplit `json:"history"`
	Neighbor     CacheSplit `json:"neighbor"`
	Memory       Memory     `json:"memory"`
	Predicted    Predicted  `json:"predicted_per_epoch"`
	// Reads is the profile's read model the prediction priced reads
	// with (nil without one): Compare prices the measured reads by it.
	Reads *ReadModel `json:"reads,omitempty"`
	// Curve is Eq. 5 for every α step at the chosen NeighborFrac.
	Curve  []CurvePoint `json:"curve"`
	Reason string       `json:"reason"`
	// Recounted says the predictions were made from the profile's reads
	// recounted for the batches training gathers (Profile.RemodelReads:
	// micro-batches, scans, chunks), not the profile's own batches. Set
	// by the trainer's planning; not saved.
	Recounted bool `json:"-"`
}

// topSum is prefix sums p at k: the sum over the first k nodes of their
// order, all of them when fewer.
func topSum(p []float64, k int64) float64 { return p[min(k, int64(len(p)-1))] }

// nbrModel costs the neighbour cache: nodes in selection order with
// prefix sums of their bytes and of their benefit.
type nbrModel struct {
	fixed int64     // bitmap + rank directory
	cost  []int64   // cost[k]: offsets+ids of the first k nodes (excluding the final offset)
	bytes []float64 // list bytes served by the first k nodes per epoch
	// benefit[k]: the first k nodes' benefit per epoch in gathered rows:
	// β × the neighbours sampled from the lists they serve (package doc,
	// "Plan").
	benefit []float64
	entries []int64
}

func nbrFixedTable(n int64) int64 { return neighborcache.FixedTableBytes(n) }

func newNbrModel(p *Profile, o *PlanOptions, n, idBytes int64, epochs, beta float64) (*nbrModel, error) {
	if int64(len(o.Indptr)) != n+1 {
		return nil, fmt.Errorf("%w: Indptr has %d entries, want %d", ErrMismatch, len(o.Indptr), n+1)
	}
	if o.Cross != nil && int64(len(o.Cross)) != n {
		return nil, fmt.Errorf("%w: Cross has %d entries, want %d", ErrMismatch, len(o.Cross), n)
	}
	score := func(v int64) int64 { return o.Indptr[v+1] - o.Indptr[v] }
	if o.Cross != nil {
		score = func(v int64) int64 { return int64(o.Cross[v]) }
	}
	order := byScore(n, score)
	// A lookup samples min(k, deg) neighbours from the list, k the mean
	// fanout (which hop looked a list up is not recorded); all of them
	// where a fanout takes every neighbour.
	k := int64(-1)
	if f := p.Meta.Fanouts; len(f) > 0 && !slices.Contains(f, -1) {
		var sum int64
		for _, x := range f {
			sum += int64(x)
		}
		k = (sum + int64(len(f))/2) / int64(len(f))
	}
	m := &nbrModel{fixed: nbrFixedTable(n), cost: make([]int64, len(order)+1), bytes: make([]float64, len(order)+1),
		benefit: make([]float64, len(order)+1)}
	for i, v := range order {
		deg := o.Indptr[v+1] - o.Indptr[v]
		drawn := deg
		if k >= 0 {
			drawn = min(deg, k)
		}
		m.cost[i+1] = m.cost[i] + neighborcache.ListBytes(deg, idBytes)
		m.bytes[i+1] = m.bytes[i] + float64(p.Nbr[v])*float64(deg*idBytes)/epochs
		m.benefit[i+1] = m.benefit[i] + beta*float64(p.Nbr[v])*float64(drawn)/epochs
	}
	return m, nil
}

// byScore is the nodes below n whose score is positive, highest score
// first, ties in id order: what a stable sort of the ascending ids by
// score gives. Where ids and scores fit 32 bits each, the score
// (complemented) and the id are packed into one key and radix-sorted, and
// the keys become the ids in place; else a comparison sort on (score, id).
// (With a comparator that read the scores from indptr at random,
// `ssdgnn plan` on a 5.4 M-node profile took 3.1-3.6 s; with this,
// 1.7-2.0 s.)
func byScore(n int64, score func(int64) int64) []int64 {
	if n <= math.MaxUint32 {
		var keys []uint64
		packed := true
		for v := range n {
			s := score(v)
			if s > math.MaxUint32 {
				packed = false
				break
			}
			if s > 0 {
				keys = append(keys, uint64(math.MaxUint32-s)<<32|uint64(v))
			}
		}
		if packed {
			radix.Sort(keys)
			for i, k := range keys {
				keys[i] = uint64(uint32(k))
			}
			return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(keys))), len(keys))
		}
	}
	type node struct{ s, v int64 }
	var nodes []node
	for v := range n {
		if s := score(v); s > 0 {
			nodes = append(nodes, node{s, v})
		}
	}
	slices.SortFunc(nodes, func(a, b node) int {
		if c := cmp.Compare(b.s, a.s); c != 0 {
			return c
		}
		return cmp.Compare(a.v, b.v)
	})
	order := make([]int64, len(nodes))
	for i, x := range nodes {
		order[i] = x.v
	}
	return order
}

// fit returns the entries and bytes of the neighbour cache that fits
// budget b (0 entries, 0 bytes when the fixed table does not fit).
func (m *nbrModel) fit(b int64) (k int64, split CacheSplit) {
	avail := b - m.fixed - 8 // the final offset
	if avail < 0 {
		return 0, CacheSplit{}
	}
	k = int64(sort.Search(len(m.cost), func(i int) bool { return m.cost[i] > avail })) - 1
	table := m.fixed + 8*(k+1)
	// The budget handed to neighborcache.Build is the modelled size, so
	// the real cache can never take more than the plan counts.
	data := m.cost[k] - 8*k
	return k, CacheSplit{BudgetBytes: table + data, TableBytes: table, DataBytes: data, Entries: k}
}

// Plan chooses the memory split maximising OUTRE Eq. 5 over α in steps
// of opts.Step (see the package doc).
func Plan(p *Profile, opts *PlanOptions) (*PlanResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := *opts
	if o.Hidden == 0 {
		o.Hidden = DefaultHidden
	}
	if o.Keep != nil && o.Keep.Step > 0 {
		o.Step = o.Keep.Step
	}
	if o.Step == 0 {
		o.Step = DefaultStep
	}
	if o.NbrStep == 0 {
		o.NbrStep = DefaultNbrStep
	}
	if o.FeatRowBytes == 0 {
		o.FeatRowBytes = p.Meta.FeatRowBytes
	}
	if o.NumNodes == 0 {
		o.NumNodes = p.Meta.NumNodes
	}
	beta := p.Meta.Beta
	if o.Beta > 0 {
		beta = o.Beta
	}
	n := o.NumNodes
	if o.Staleness > 0 && p.Meta.Staleness > 0 && o.Staleness != p.Meta.Staleness {
		return nil, fmt.Errorf("%w: Staleness %d, profile modelled %d (re-run the profile with it)", ErrMismatch, o.Staleness, p.Meta.Staleness)
	}
	valid := p.HistAppear != nil && p.HistHits != nil
	if valid && (int64(len(p.HistAppear)) != n || int64(len(p.HistHits)) != n) {
		return nil, fmt.Errorf("%w: profile validity arrays do not have %d entries", ErrMismatch, n)
	}
	if int64(len(p.Feat)) != n || int64(len(p.HistSample)) != n || int64(len(p.HistGather)) != n || int64(len(p.Nbr)) != n {
		return nil, fmt.Errorf("%w: profile arrays do not have %d entries", ErrMismatch, n)
	}
	if o.FeatRowBytes <= 0 {
		return nil, fmt.Errorf("%w: FeatRowBytes %d", ErrInvalidOptions, o.FeatRowBytes)
	}
	epochs := float64(max(p.Meta.PresampleEpochs, 1))
	idBytes := max(p.Meta.IDBytes, 4)
	hist := o.Hidden > 0

	// Prefix sums, built once, over the nodes in the order the caches
	// admit them (rank of the ranking BuildCaches builds them by), so
	// the first k of each are the k nodes a cache of capacity k holds.
	// No split gives a cache more entries than MemBytes holds of its
	// rows, so the orders stop there: the plan's memory follows the
	// budget, not the node count (a 20 M-node plan under 2 GiB was
	// OOM-killed holding them all).
	rk := p.ranking(beta)
	featOrder := rank(rk.Feat, o.MemBytes/o.FeatRowBytes+1)
	rm := p.Meta.Reads
	costed := p.costed()
	if p.FeatSingle != nil && int64(len(p.FeatSingle)) != n {
		return nil, fmt.Errorf("%w: profile single-read array has %d entries, want %d", ErrMismatch, len(p.FeatSingle), n)
	}
	// A cached node's hits per epoch: its held-out count (FeatHeldOut),
	// the epoch the ranking did not see, else (older profiles) Feat over
	// the profiled epochs; and its single reads per epoch, the share of
	// its profiled gathers read alone times those hits (see the package
	// doc, "Held-out hits").
	featHits := func(v int64) float64 { return float64(p.Feat[v]) / epochs }
	if p.hasHeldOut() {
		featHits = func(v int64) float64 { return float64(p.FeatHeldOut[v]) }
	}
	featSingle := func(v int64) float64 {
		if f := p.Feat[v]; costed && f > 0 {
			return featHits(v) * float64(p.single(v)) / float64(f)
		}
		return 0
	}
	// A node's feature benefit per epoch, in gathered rows: its hits, or,
	// with the read model, the device time its reads cost over the mean
	// device time of a row read from storage (see the package doc, "Read
	// costs").
	featBenefit := featHits
	var rowB, singleB float64 // a row inside a merged read, a row read alone: bytes
	if costed {
		rowB, singleB = float64(p.Meta.FeatRowBytes), rm.singleBytes(p.Meta.FeatRowBytes)
		mean := rm.Seconds(float64(rm.Reads), float64(rm.BytesRead)) / float64(rm.Rows)
		merged, alone := rm.Seconds(0, rowB)/mean, rm.Seconds(1, singleB)/mean
		featBenefit = func(v int64) float64 {
			one := featSingle(v)
			return (featHits(v)-one)*merged + one*alone
		}
	}
	pFeat := make([]float64, len(featOrder)+1)
	pFeatRows := make([]float64, len(featOrder)+1)
	pFeatSingle := make([]float64, len(featOrder)+1)
	for r, v := range featOrder {
		pFeat[r+1] = pFeat[r] + featBenefit(v)
		pFeatRows[r+1] = pFeatRows[r] + featHits(v)
		pFeatSingle[r+1] = pFeatSingle[r] + featSingle(v)
	}
	var pHist, pHistS, pHistG, pHistR, pHistE []float64
	k2 := int64(-1)
	if f := p.Meta.Fanouts; len(f) >= 2 {
		k2 = int64(f[len(f)-2])
	}
	if hist {
		// The history cache's candidates in admission order, with the
		// prediction's components in the same order.
		idx := rank(rk.Hist, o.MemBytes/(4*int64(o.Hidden))+1)
		m := len(idx) + 1
		pHist = make([]float64, m)
		pHistS = make([]float64, m)
		pHistG = make([]float64, m)
		pHistR = make([]float64, m)
		pHistE = make([]float64, m)
		for r, v := range idx {
			i := int(v)
			h := p.histHit(i)
			pHist[r+1] = pHist[r] + p.HistScore(beta, i)
			pHistS[r+1] = pHistS[r] + float64(p.HistSample[i])*h/epochs
			pHistG[r+1] = pHistG[r] + float64(p.HistGather[i])*h/epochs
			if valid {
				pHistR[r+1] = pHistR[r] + p.histHitsPerEpoch(i)
			}
			if valid && o.Indptr != nil && int64(len(o.Indptr)) == n+1 {
				d := o.Indptr[i+1] - o.Indptr[i]
				if k2 >= 0 {
					d = min(d, k2)
				}
				pHistE[r+1] = pHistE[r] + p.histHitsPerEpoch(i)*float64(d)
			} else {
				pHistE[r+1] = pHistE[r]
			}
		}
	}
	// histKeep is the share of the batches' rows left to gather when the
	// history removes rows of them per epoch: the thinning of the reads
	// below and of the feature cache's hits (package doc, "Thinned
	// counts").
	histKeep := func(rows float64) float64 {
		if g := float64(p.Meta.GatheredRows); g > 0 {
			return max(1-rows/g, 0)
		}
		return 1
	}
	// nbrKeep is the share of the neighbour ids drawn from lists the
	// dynamic cache does not serve that are still drawn when the history
	// removes ids of them per epoch: the global cache's lookups fall with
	// the pruned subtrees, so its served bytes (and benefit) are thinned
	// as the feature cache's are (1 when the profile did not count the
	// draws).
	noHistSampled := 0.0
	if lk := p.Meta.Lookups; hist && lk.Storage.Sampled > 0 {
		noHistSampled = float64(lk.Global.Sampled + lk.Storage.Sampled)
	}
	nbrKeep := func(ids float64) float64 {
		if noHistSampled > 0 {
			return max(1-ids/noHistSampled, 0)
		}
		return 1
	}
	var nm *nbrModel
	if o.Indptr != nil {
		var err error
		if nm, err = newNbrModel(p, &o, n, idBytes, epochs, beta); err != nil {
			return nil, err
		}
	}

	tables := TableBytes(n, hist)
	steps := int(math.Round(1 / o.Step))
	type choice struct {
		ok                bool
		benefit           float64
		alpha, gamma      float64
		i                 int
		feat, hist, nbr   CacheSplit
		kNbr              int64
		featRows, histIdx int64
	}
	// eval fills the feature/history part for memory left r (after
	// tables) at α step i.
	eval := func(r int64, i int, nbrBenefit float64) (CacheSplit, CacheSplit, float64) {
		fData := int64(math.Floor(float64(r) * float64(i) / float64(steps)))
		var hs CacheSplit
		var kh int64
		if hist {
			// The history cache holds at most its candidates (the nodes
			// with a positive score, as histcache.New admits them): what
			// its share leaves beyond them goes to the feature cache. A
			// plan of 19 MiB for 37,276 entries had built 9.6 MiB for
			// the 18,732 candidates, the rest of --mem unused.
			hBudget := 4*n + r - fData
			kh = min(histcache.CapacityFor(hBudget, n, o.Hidden), int64(len(pHist)-1))
			need := histcache.BytesFor(n, kh, o.Hidden)
			fData += hBudget - need
			hs = CacheSplit{BudgetBytes: need, TableBytes: 4 * n, Entries: kh, DataBytes: need - 4*n}
		}
		// Nor does the feature cache hold more than the nodes the
		// profile ranks (the profiled policy caches only those): the
		// plan says what is built.
		kf := min(featurecache.CapacityFor(4*n+fData, o.FeatRowBytes, n), int64(len(featOrder)))
		fs := CacheSplit{BudgetBytes: 4*n + kf*o.FeatRowBytes, TableBytes: 4 * n, DataBytes: kf * o.FeatRowBytes, Entries: kf}
		b := topSum(pFeat, kf)
		if hist {
			// Rows the history removes are rows the feature cache no
			// longer serves: its benefit is thinned as the reads are.
			b = b*histKeep(topSum(pHistG, kh)) + topSum(pHist, kh) + nbrBenefit*nbrKeep(topSum(pHistS, kh))
			return fs, hs, b
		}
		return fs, hs, b + nbrBenefit
	}
	var best choice
	var bestCurve []CurvePoint
	gammas := []float64{0}
	if !o.Decoupled {
		for g := 1; float64(g)*o.NbrStep < 1-1e-9; g++ {
			gammas = append(gammas, float64(g)*o.NbrStep)
		}
	}
	keepI := -1 // the α step Keep chose
	if o.Keep != nil {
		gammas = []float64{o.Keep.NeighborFrac}
		keepI = int(math.Round(o.Keep.Alpha * float64(steps)))
	}
	for _, gamma := range gammas {
		var ns CacheSplit
		var nbrBenefit float64
		var kn int64
		if gamma > 0 {
			kn, ns = nm.fit(int64(math.Floor(gamma * float64(o.MemBytes))))
			nbrBenefit = nm.benefit[kn]
		}
		r := o.MemBytes - ns.Bytes() - tables
		if r < 0 {
			continue
		}
		curve := make([]CurvePoint, 0, steps+1)
		local := choice{}
		for i := 0; i <= steps; i++ {
			fs, hs, b := eval(r, i, nbrBenefit)
			curve = append(curve, CurvePoint{Alpha: float64(i) / float64(steps), Benefit: b, FeatRows: fs.Entries, HistRows: hs.Entries})
			if keepI < 0 && (!local.ok || b > local.benefit) || i == keepI {
				local = choice{ok: true, benefit: b, alpha: float64(i) / float64(steps), gamma: gamma, i: i, feat: fs, hist: hs, nbr: ns, kNbr: kn}
			}
		}
		if !best.ok || local.benefit > best.benefit {
			best, bestCurve = local, curve
		}
	}
	if !best.ok {
		return nil, fmt.Errorf("%w: %d bytes cannot hold the caches' tables (%d bytes: %d-byte address table per cache over %d nodes)",
			ErrBudget, o.MemBytes, tables, 4*n, n)
	}

	res := &PlanResult{Profile: p.Meta.Name, ProfileID: p.ID(), Dataset: p.Meta.Dataset, NumNodes: n, FeatRowBytes: o.FeatRowBytes,
		Hidden: max(o.Hidden, 0), Decoupled: o.Decoupled, Beta: beta, Step: o.Step, Alpha: best.alpha,
		NeighborFrac: best.gamma, Feature: best.feat, History: best.hist, Neighbor: best.nbr, Curve: bestCurve}
	if o.Decoupled && nm != nil {
		kn, ns := nm.fit(o.MemBytes)
		res.Neighbor, best.kNbr = ns, kn
	}
	pr := &res.Predicted
	pr.Benefit = best.benefit
	keep := 1.0
	if hist {
		pr.HistGatherRows = topSum(pHistG, best.hist.Entries)
		pr.HistSampledNeighbors = topSum(pHistS, best.hist.Entries)
		pr.HistReusedNodes = topSum(pHistR, best.hist.Entries)
		pr.HistSkippedDraws = topSum(pHistE, best.hist.Entries)
		keep = histKeep(pr.HistGatherRows)
	}
	pr.FeatRows = topSum(pFeatRows, best.feat.Entries) * keep
	if nm != nil {
		pr.NeighborCacheBytes = nm.bytes[best.kNbr] * nbrKeep(pr.HistSampledNeighbors)
	}
	notGathered := pr.HistGatherRows
	if rm != nil && rm.Rows > 0 {
		pr.NoHistGatherRows = float64(rm.Rows) / epochs
		pr.GatherRows = pr.NoHistGatherRows * keep
		// The hits come from the held-out epoch, the rows asked from the
		// profiled one: with (nearly) every row cached, the two samples
		// predicted more hits than rows asked.
		pr.FeatRows = min(pr.FeatRows, pr.GatherRows)
		notGathered = pr.NoHistGatherRows - pr.GatherRows
	}
	pr.FeatureBytesSaved = (pr.FeatRows + notGathered) * float64(o.FeatRowBytes)
	pr.NeighborBytesSaved = pr.NeighborCacheBytes + pr.HistSampledNeighbors*float64(idBytes)
	pr.NoHistSampledIDs = noHistSampled
	if costed {
		// What is left to read: the profile's reads at the share of its
		// rows the history and the feature cache leave (below).
		res.Reads = rm
		reads, bytes := float64(rm.Reads)/epochs, float64(rm.BytesRead)/epochs
		pr.NoCacheGatherSeconds = rm.Seconds(reads, bytes)
		// History removes the share HistGatherRows/GatheredRows of the
		// batches' rows; with thinned counts its rows are priced at that
		// level (fewer rows merge less, so reads can rise), else as the
		// mean single-read share and bytes of a row.
		if tr, tb, ok := rm.thinnedAt(keep); ok {
			reads, bytes = tr/epochs, tb/epochs
		} else if all := float64(rm.Rows + rm.BlockRows); all > 0 {
			reads -= pr.HistGatherRows * float64(rm.SingleReads) / all
			bytes -= pr.HistGatherRows * (float64(rm.SingleBytes) + float64(rm.Rows-rm.SingleReads)*rowB) / all
		}
		// The rows the cache takes are priced as the history's are: the
		// profile's reads thinned to the share of its rows left to read
		// (the history's and the cache's removals together), where the
		// profile has thinned counts; else each cached node's single
		// reads and bytes and its merged rows' own bytes are subtracted.
		// Subtracting (the only model before 2026-11-27) left the merged
		// reads' filler with 98 % of the rows cached: 149 MiB predicted
		// against 0.6 MiB read (docs/planner.md has the runs).
		one := topSum(pFeatSingle, best.feat.Entries) * keep
		left := max(pr.GatherRows-pr.FeatRows, 0)
		if pr.GatherRows <= 0 {
			left = max(float64(rm.Rows)/epochs*keep-pr.FeatRows, 0)
		}
		if tr, tb, ok := rm.thinnedAt(left / (float64(rm.Rows) / epochs)); ok && rm.Rows > 0 {
			reads, bytes = tr/epochs, tb/epochs
		} else {
			reads -= one
			bytes -= one*singleB + (pr.FeatRows-one)*rowB
		}
		pr.GatherReads, pr.GatherBytesRead = max(reads, 0), max(bytes, 0)
		pr.GatherSeconds = rm.Seconds(pr.GatherReads, pr.GatherBytesRead)
	}

	mem := &res.Memory
	mem.MemBytes = o.MemBytes
	add := func(name string, b int64) { mem.Items = append(mem.Items, MemItem{name, b}) }
	add("feature address table (4·N)", res.Feature.TableBytes)
	add("feature rows", res.Feature.DataBytes)
	if hist {
		add("history slot table (4·N)", res.History.TableBytes)
		add("history embeddings + state + iteration", res.History.DataBytes)
	}
	if res.Neighbor.Entries > 0 || res.Neighbor.TableBytes > 0 {
		add("neighbour bitmap + rank + offsets", res.Neighbor.TableBytes)
		add("neighbour ids", res.Neighbor.DataBytes)
	}
	mem.GatherPhaseBytes = res.Feature.Bytes() + res.History.Bytes()
	if o.Decoupled {
		mem.SamplePhaseBytes = res.Neighbor.Bytes()
	} else {
		mem.GatherPhaseBytes += res.Neighbor.Bytes()
		mem.SamplePhaseBytes = mem.GatherPhaseBytes
	}
	if mem.GatherPhaseBytes > o.MemBytes || mem.SamplePhaseBytes > o.MemBytes ||
		res.Feature.Bytes() > res.Feature.BudgetBytes || res.History.Bytes() > res.History.BudgetBytes {
		return nil, fmt.Errorf("planner: internal error: plan uses %d/%d bytes of a %d-byte budget", mem.GatherPhaseBytes, mem.SamplePhaseBytes, o.MemBytes)
	}
	// The benefit's parts, each in the benefit's unit (mean gathered
	// rows an epoch; device time of a mean row with the read model), as
	// eval summed them.
	var parts [3]float64
	parts[0] = topSum(pFeat, best.feat.Entries)
	if nm != nil && best.kNbr > 0 && !o.Decoupled { // decoupled: fitted apart, not in the benefit
		parts[2] = nm.benefit[best.kNbr]
	}
	if hist {
		kh := best.hist.Entries
		parts[0] *= histKeep(topSum(pHistG, kh))
		parts[1] = topSum(pHist, kh)
		parts[2] *= nbrKeep(topSum(pHistS, kh))
	}
	pr.BenefitParts = parts
	res.Reason = reason(res, bestCurve, parts, costed)
	if k := o.Keep; k != nil && (res.Feature != k.Feature || res.History != k.History || res.Neighbor != k.Neighbor) {
		return nil, fmt.Errorf("%w: kept plan's caches (feature %+v, history %+v, neighbour %+v) differ from its division again (%+v, %+v, %+v)",
			ErrMismatch, k.Feature, k.History, k.Neighbor, res.Feature, res.History, res.Neighbor)
	}
	return res, nil
}

// benefitUnit is the unit of Eq. 5's benefit: gathered feature rows per
// epoch, or with the read model device time in mean storage rows' times.
func benefitUnit(costed bool) string {
	if costed {
		return "mean-row device times/epoch"
	}
	return "gathered rows/epoch"
}

// reason says why the split won: the benefit and its parts (feature,
// history and neighbour caches, which add up to it), in the benefit's
// unit, and the predicted counts behind them.
func reason(r *PlanResult, curve []CurvePoint, parts [3]float64, costed bool) string {
	first, last := curve[0], curve[len(curve)-1]
	unit := benefitUnit(costed)
	pr := &r.Predicted
	s := fmt.Sprintf("α=%.2f maximises Eq. 5 over %d steps: benefit %.0f %s = feature cache %.0f + history cache %.0f + neighbour cache %.0f (predicted: %.0f feature-cache hits; %.0f gather rows and %.0f sampled neighbours saved by the history at β=%.3g)",
		r.Alpha, len(curve), pr.Benefit, unit, parts[0], parts[1], parts[2], pr.FeatRows, pr.HistGatherRows, pr.HistSampledNeighbors, r.Beta)
	s += fmt.Sprintf("; all to history (α=0): %.0f, all to features (α=1): %.0f", first.Benefit, last.Benefit)
	if !r.Decoupled {
		s += fmt.Sprintf("; neighbour cache share %.2f of the budget", r.NeighborFrac)
	} else if r.Neighbor.Entries > 0 {
		s += fmt.Sprintf("; decoupled: the neighbour cache (%d lists) has the sampling phase's budget to itself, apart from this benefit", r.Neighbor.Entries)
	}
	return s
}
