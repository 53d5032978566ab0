package train

import (
	"context"
	"math"
	"sync"

	"github.com/ssdgnn/ssdgnn/sample"
)

type histReq struct {
	iter  int64
	local []int32 // candidate positions in the batch's hop-1 list, ascending
	nodes []int64
	reply chan histResp
}

type histResp struct {
	reused []int32 // positions in the hop-1 list, ascending
	pulled []float32
	err    error
}

// epochReuse connects the sampler's ReuseFor calls of one epoch with the
// compute goroutine, which answers batch i's request right after computing
// batch i−D (D = Trainer.depth, see ReuseDepth; at the start of the epoch
// for the first D batches). Each batch has a slot of capacity 1, so a worker
// never blocks handing its request over, only waiting for the answer.
type epochReuse struct {
	epoch int
	skip  int   // batches before skip are not trained (resume): no reuse
	step0 int64 // history iteration of batch skip
	slots []chan histReq
	mu    sync.Mutex
	resp  map[int]histResp // decided, not yet taken by the consumer
}

type nodeSet map[int64]struct{}

func (s nodeSet) Contains(v int64) bool { _, ok := s[v]; return ok }

// reuseFor is the sampler's ReuseFor hook: it hands batch index's hop-1
// candidates to the compute goroutine and waits for its decision.
func (t *Trainer) reuseFor(ctx context.Context, epoch, index int, hop1 []int64) (sample.NodeSet, error) {
	t.reuseMu.Lock()
	er := t.reuse
	t.reuseMu.Unlock()
	if er == nil || er.epoch != epoch || index < er.skip || index >= len(er.slots) {
		return nil, nil
	}
	req := histReq{iter: er.step0 + int64(index-er.skip), reply: make(chan histResp, 1)}
	for k, v := range hop1 {
		if t.hc.IsCandidate(v) {
			req.local = append(req.local, int32(k))
			req.nodes = append(req.nodes, v)
		}
	}
	er.slots[index] <- req
	var resp histResp
	select {
	case resp = <-req.reply:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if resp.err != nil {
		return nil, resp.err
	}
	er.mu.Lock()
	er.resp[index] = resp
	er.mu.Unlock()
	if len(resp.reused) == 0 {
		return nil, nil
	}
	set := make(nodeSet, len(resp.reused))
	for _, k := range resp.reused {
		set[hop1[k]] = struct{}{}
	}
	return set, nil
}

// take returns (and forgets) batch index's decision.
func (er *epochReuse) take(index int) (histResp, bool) {
	er.mu.Lock()
	defer er.mu.Unlock()
	r, ok := er.resp[index]
	delete(er.resp, index)
	return r, ok
}

// histLookup decides a batch's reuse set against the cache as it stands and
// pulls the embeddings right away, so later pushes cannot change them.
func (t *Trainer) histLookup(r histReq) histResp {
	if len(r.nodes) == 0 {
		return histResp{}
	}
	hits := make([]bool, len(r.nodes))
	n, err := t.hc.Lookup(r.iter, r.nodes, hits)
	if err != nil || n == 0 {
		return histResp{err: err}
	}
	var resp histResp
	nodes := make([]int64, 0, n)
	for i, h := range hits {
		if h {
			resp.reused = append(resp.reused, r.local[i])
			nodes = append(nodes, r.nodes[i])
		}
	}
	if testReuse != nil {
		testReuse(r.iter, nodes, false)
	}
	resp.pulled = make([]float32, n*t.hc.Hidden())
	if err := t.hc.Pull(r.iter, nodes, resp.pulled); err != nil {
		return histResp{err: err}
	}
	return resp
}

// testReuse, when set (tests), sees every reuse decision (the batch's
// history iteration and the nodes it reuses) and every push (pushed
// true: the iteration and the nodes offered), in the compute goroutine's
// order.
var testReuse func(iter int64, nodes []int64, pushed bool)

// histPush offers the batch's computed layer-(L−1) embeddings to the cache
// (with their gradient norms under the gradient policy) and, under that
// policy, evicts pulled entries whose gradient is unstable.
func (t *Trainer) histPush(j *job) error {
	hs := j.hist
	w := t.hc.Hidden()
	nodes := make([]int64, len(hs.computed))
	emb := make([]float32, len(hs.computed)*w)
	var norms []float32
	if hs.wantGrad {
		norms = make([]float32, len(hs.computed))
	}
	rowNorm := func(k int32) float32 {
		var s float64
		for _, g := range hs.grad[int(k)*w : int(k+1)*w] {
			s += float64(g) * float64(g)
		}
		return float32(math.Sqrt(s))
	}
	for i, k := range hs.computed {
		nodes[i] = j.hb.nodes[k]
		copy(emb[i*w:(i+1)*w], hs.emb[int(k)*w:int(k+1)*w])
		if norms != nil {
			norms[i] = rowNorm(k)
		}
	}
	if _, err := t.hc.Push(j.iter, nodes, emb, norms); err != nil {
		return err
	}
	if testReuse != nil {
		testReuse(j.iter, nodes, true)
	}
	if hs.wantGrad && len(hs.reused) > 0 {
		rn := make([]int64, len(hs.reused))
		rg := make([]float32, len(hs.reused))
		for i, k := range hs.reused {
			rn[i], rg[i] = j.hb.nodes[k], rowNorm(k)
		}
		if _, err := t.hc.EvictUnstable(rn, rg); err != nil {
			return err
		}
	}
	return nil
}
