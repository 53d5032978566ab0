package partition

import (
	"context"
	"fmt"

	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// refineCaps returns the node and training-node caps that refinement
// keeps for every final part: the final caps the stream keeps too
// (finalCaps, balance.go), ceil((1+ε)·n/k) and ceil((1+ε)·t/k), whatever
// the levels. Every part of the streamed assignment is within them.
func refineCaps(n, t int64, k int, eps float64) (capN, capT int64) {
	return finalCaps(n, t, k, eps)
}

// refine improves the final assignment part (k parts) by up to rounds sweeps of greedy boundary moves: each node, in id
// order, moves to the part holding most of its neighbours when that part
// holds strictly more of them than the node's own part (so every move
// strictly lowers the edge cut) and the target's caps (refineCaps) hold.
// Ties go to the smaller part, then the lower id. Sizes and training loads
// are updated in place, so the result is a deterministic function of the
// input. A sweep without a move ends refinement early. train is the sorted
// training ids. It returns the number of moves.
func refine(d *storage.Dataset, part []int32, train []int64, k int, eps float64, rounds int,
	rep progress.Reporter) int64 {
	return refineContext(context.Background(), d, part, train, k, eps, rounds, rep)
}

// refineContext is refine, stopped early (with part still a valid
// assignment) once ctx is cancelled; the caller checks ctx.Err().
func refineContext(ctx context.Context, d *storage.Dataset, part []int32, train []int64, k int, eps float64, rounds int,
	rep progress.Reporter) int64 {
	if rounds <= 0 || k <= 1 {
		return 0
	}
	n := int64(len(part))
	size := make([]int64, k)
	load := make([]int64, k)
	for _, p := range part {
		size[p]++
	}
	for _, v := range train {
		load[part[v]]++
	}
	capN, capT := refineCaps(n, int64(len(train)), k, eps)
	counts := make([]int32, k)
	var touched []int32
	indptr := d.Indptr()
	idx32 := d.Indices32()
	var buf []int64
	var total int64
	task := progress.Or(rep).Start(fmt.Sprintf("partition refine (%d rounds)", rounds), n*int64(rounds), progress.Items)
	defer task.Done()
	for range rounds {
		var moves int64
		ti := 0 // next training id
		for v := range n {
			isTrain := ti < len(train) && train[ti] == v
			if isTrain {
				ti++
			}
			if (v+1)%(1<<16) == 0 {
				task.Add(1 << 16)
				if ctx.Err() != nil {
					return total + moves
				}
			}
			a := part[v]
			// Count the neighbours per part.
			if idx32 != nil {
				for _, u := range idx32[indptr[v]:indptr[v+1]] {
					if int64(u) == v {
						continue
					}
					q := part[u]
					if counts[q] == 0 {
						touched = append(touched, q)
					}
					counts[q]++
				}
			} else {
				buf = d.Neighbors(v).AppendTo(buf[:0])
				for _, u := range buf {
					if u == v {
						continue
					}
					q := part[u]
					if counts[q] == 0 {
						touched = append(touched, q)
					}
					counts[q]++
				}
			}
			best, bestC := int32(-1), counts[a]
			for _, q := range touched {
				c := counts[q]
				if c < bestC || q == a || (c == bestC && best < 0) {
					continue
				}
				if size[q] >= capN || (isTrain && load[q] >= capT) {
					continue
				}
				if c > bestC || size[q] < size[best] || (size[q] == size[best] && q < best) {
					best, bestC = q, c
				}
			}
			for _, q := range touched {
				counts[q] = 0
			}
			touched = touched[:0]
			if best < 0 {
				continue
			}
			part[v] = best
			size[a]--
			size[best]++
			if isTrain {
				load[a]--
				load[best]++
			}
			moves++
		}
		task.Add(n % (1 << 16))
		total += moves
		if moves == 0 {
			break
		}
	}
	return total
}
