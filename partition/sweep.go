package partition

import (
	"runtime/debug"
	"sync"

	"github.com/ssdgnn/ssdgnn/storage"
)

// level2Sweep runs the second level when every first-level part streams
// its members in id order (OrderID): the k1 streams are independent, so
// instead of one part after another, each reading its members' neighbour
// lists scattered over the CSR, every part's streamer is alive at once and
// each pass is one ascending sweep over the node ids that hands node v to
// the streamer of its part. A streamer sees exactly the node sequence it
// would see alone, so the assignment is the same as part by part (a test
// checks this), but the CSR is read in storage order: a graph larger than
// the memory left for the page cache is read once per pass instead of
// once per part visit. The parts are dealt to workers by p mod workers;
// each worker sweeps all ids and skips the others'.
//
// spec2 builds part p's levelSpec (with order nil: ascending members);
// progress makes each streamer's progress callback. It returns the
// second-level filters' bytes, all alive at once.
func level2Sweep(d *storage.Dataset, o *Options, part1 []int32, k1, workers int,
	spec2 func(p int, ord []int64) levelSpec, isTrain func(int64) bool,
	progress func() func(add, seen, internal int64)) (int64, error) {
	n := d.NumNodes()
	workers = max(1, min(workers, k1))
	type outcome struct {
		err         error
		errPart     int
		filterBytes int64
	}
	outs := make([]outcome, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			out := &outs[w]
			out.errPart = k1
			ss := make([]*streamer, k1)
			var mine []int
			var doneBits []uint64 // N-bit restream scratch shared by this worker's parts
			for p := w; p < k1; p += workers {
				sp := spec2(p, nil)
				if sp.n == 0 {
					continue
				}
				if sp.filter && o.Passes > 1 {
					if doneBits == nil {
						doneBits = make([]uint64, (n+63)/64)
					}
					sp.done = doneBits
				}
				s := newStreamer(d, o, sp, isTrain)
				s.onProgress = progress()
				out.filterBytes += s.filterBytes
				ss[p] = s
				mine = append(mine, p)
			}
			for pass := range o.Passes {
				for _, p := range mine {
					ss[p].beginPass(pass)
				}
				for v := range n {
					if v&(1<<16-1) == 0 {
						if err := o.ctx.Err(); err != nil {
							out.err = err
							return
						}
					}
					p := int(part1[v])
					if p%workers != w {
						continue
					}
					if err := ss[p].place(v, pass); err != nil {
						out.err, out.errPart = err, p
						return
					}
				}
				for _, p := range mine {
					ss[p].endPass(pass)
				}
			}
		}()
	}
	wg.Wait()
	var fb int64
	var err error
	errPart := k1
	for _, out := range outs {
		fb += out.filterBytes
		if out.err != nil && (err == nil || out.errPart < errPart) {
			err, errPart = out.err, out.errPart
		}
	}
	return fb, err
}
