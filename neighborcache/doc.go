// Package neighborcache is ssdgnn's global neighbour cache: a static,
// host-memory cache of whole neighbour lists, chosen once before training
// under a byte budget and never changed afterwards.
//
// # Selection
//
// Every node gets a score, and the highest-scoring nodes are cached until
// the budget is spent:
//
//   - PolicyDegree (Ginex, PaGraph): the score is the node's degree.
//   - PolicyCross (OUTRE §4.2): the score is the number of the node's
//     neighbours that lie in another partition (Options.Cross, from the
//     partitioning). Under partition-based batch construction, in-partition
//     lists are served by the macro batch's dynamic cache, so the global
//     cache is best spent on nodes that batches reach from outside.
//
// Nodes with score 0 are never cached. Ties are broken by ascending node
// id. Selection uses a histogram of scores, not a sort of all N nodes, so
// it needs O(distinct scores) memory beyond the table itself. All nodes
// above a threshold score are cached; nodes with exactly the threshold
// score are taken in id order while they still fit; lower scores are not
// considered.
//
// # Layout
//
// The cache holds four arrays:
//
//	bitmap   []uint64  N bits; bit v set iff node v is cached
//	rank     []uint32  rank[j] = number of set bits in bitmap words [0, 8j)
//	                   (one entry per 512 bits, plus a final total)
//	offsets  []int64   slot s's list is ids[offsets[s]:offsets[s+1]]
//	ids      []int32 or []int64, the dataset's id width
//
// A cached node's slot is its rank among cached nodes: rank[v>>9] plus the
// popcount of the bitmap words before v's word in its 512-bit block plus
// the bits below v in its own word. The table costs N/8 + N/128 + 8·(C+1)
// bytes for C cached nodes instead of the 8·N of a dense offset array.
// Slots are in node-id order, and the cache is filled with one sequential
// pass over indptr and indices in node order.
//
// # Budget
//
// Bytes() counts the table (bitmap, rank directory, offsets) and the ids
// buffer, and never exceeds Options.Budget. When the budget cannot even
// hold the bitmap and the rank directory, the cache is empty and uses 0
// bytes.
//
// # Concurrency
//
// A built Cache is immutable and safe for concurrent readers. Lists
// returned by Lookup alias the cache's buffer and must not be modified.
package neighborcache
