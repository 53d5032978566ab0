// Package radix sorts uint64 keys in place with an MSD radix sort
// (American flag sort on bytes): no memory beyond the stack, about 3×
// slices.Sort on random packed keys. Callers that sort records by an
// integer field pack the field and the record's index into one key (the
// field in the high bits), so ties keep index order and the result equals
// a stable comparison sort's.
package radix

import (
	"math/bits"
	"slices"
)

// cutoff is the bucket size at or below which Sort hands over to
// slices.Sort: a radix pass costs three sweeps over 256 counters, which
// does not pay off for small buckets. 48 was the best of 32..256 in
// BenchmarkSort (then in extsort); the radix sort is about 3× faster than
// slices.Sort on full buffers of random packed edges.
const cutoff = 48

// Sort sorts a in ascending order in place, with no extra memory beyond
// the stack: an MSD radix sort (American flag sort) on bytes, starting at
// the most significant byte in which any two keys differ. Packed edges of
// small graphs share their high bytes, so those passes are skipped.
func Sort(a []uint64) {
	if len(a) < 2 {
		return
	}
	var diff uint64
	first := a[0]
	for _, v := range a[1:] {
		diff |= v ^ first
	}
	if diff == 0 {
		return
	}
	top := uint(63-bits.LeadingZeros64(diff)) / 8 * 8
	pass(a, top)
}

func pass(a []uint64, shift uint) {
	for {
		if len(a) <= cutoff {
			slices.Sort(a)
			return
		}
		var count [256]int
		for _, v := range a {
			count[byte(v>>shift)]++
		}
		if count[byte(a[0]>>shift)] == len(a) {
			// Every key has the same byte here: nothing to permute.
			if shift == 0 {
				return
			}
			shift -= 8
			continue
		}
		var head, tail [256]int
		off := 0
		for b, c := range count {
			head[b] = off
			off += c
			tail[b] = off
		}
		// Cycle leader permutation: take the first misplaced key of bucket b
		// and keep swapping it into its own bucket until one belonging to b
		// comes back.
		for b := range 256 {
			for head[b] < tail[b] {
				v := a[head[b]]
				d := byte(v >> shift)
				for int(d) != b {
					v, a[head[d]] = a[head[d]], v
					head[d]++
					d = byte(v >> shift)
				}
				a[head[b]] = v
				head[b]++
			}
		}
		if shift == 0 {
			return
		}
		start := 0
		for _, c := range count {
			if c > 1 {
				pass(a[start:start+c], shift-8)
			}
			start += c
		}
		return
	}
}
