package train

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/namedir"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// AutoSelection resolves sample.ModeAuto for the dataset in dir: partition
// batches (OUTRE's selection, which cuts neighbourhood redundancy) from
// the partitioning name when the dataset has it, or from the one
// PartitionFor stands in for it; otherwise random batches. chosen is the
// partitioning to read. note is one line for the user saying which was
// chosen and, for random, how to partition or which partitioning to name.
// A partitioning named explicitly is partition batches whether or not it
// exists: reading it then fails, naming it.
func AutoSelection(dir, name string, explicit bool) (mode sample.Mode, chosen, note string) {
	chosen, stood, others, err := PartitionFor(dir, name, explicit)
	switch {
	case partition.Exists(dir, chosen):
		return sample.ModePartition, chosen, "selection: partition batches from " + cmp.Or(stood, fmt.Sprintf("partitioning %q", name))
	case explicit:
		// A partitioning the user named is never replaced by random
		// batches (a typo would train another method): opening it
		// reports that it is missing, as rr does.
		return sample.ModePartition, name, fmt.Sprintf("selection: partition batches from partitioning %q (--partition)", name)
	case err != nil:
		return sample.ModeRandom, name, fmt.Sprintf("selection: random batches (no partitioning %q, and the others could not be listed: %v)", name, err)
	case len(others) > 1:
		return sample.ModeRandom, name, fmt.Sprintf("selection: random batches (no partitioning %q; the dataset has %s: --partition NAME picks one)", name, strings.Join(quoted(others), ", "))
	}
	return sample.ModeRandom, name, fmt.Sprintf("selection: random batches (no partitioning %q; 'ssdgnn partition %s' enables partition batches)", name, dir)
}

// PartitionFor is the partitioning of the dataset in dir that commands
// read for name: name itself when the dataset has it or when it was asked
// for (explicit; a missing one is then the caller's error to report),
// else the dataset's only partitioning when it has exactly one, with
// stood saying so for the user ("" when name stands). others lists the
// dataset's partitionings when name is missing and was not asked for.
func PartitionFor(dir, name string, explicit bool) (chosen, stood string, others []string, err error) {
	return namedir.Pick("partitioning", name, explicit, func(n string) bool { return partition.Exists(dir, n) },
		func() ([]string, error) { return partition.Names(dir) })
}

func quoted(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

// AutoFeatRead resolves storage.ReadAuto for training d: O_DIRECT (where
// the file system accepts it) when the page cache would compete with the
// budget, that is when the process runs under a memory cgroup limit (which
// charges the page cache) or the feature file is larger than half the
// memory the kernel reports available; otherwise buffered reads, which a
// feature file that fits in the page cache serves from memory after the
// first touch. note says which and why.
func AutoFeatRead(d *storage.Dataset) (mode storage.ReadMode, note string) {
	l, ok := cgroup.SelfMemoryLimit()
	if !ok {
		l = 0
	}
	return AutoFeatReadIn(d, l)
}

// AutoFeatReadIn is AutoFeatRead for a process whose memory cgroup limit
// is limit bytes (0: none): what a child started under that limit will
// choose.
func AutoFeatReadIn(d *storage.Dataset, limit int64) (mode storage.ReadMode, note string) {
	feat := d.FeatRowBytes() * d.NumNodes()
	if limit > 0 {
		return storage.ReadAuto, fmt.Sprintf("feature reads: O_DIRECT where supported (memory cgroup limit %s charges the page cache)", ibytes(limit))
	}
	if avail := memstat.Available(); avail > 0 && feat > avail/2 {
		return storage.ReadAuto, fmt.Sprintf("feature reads: O_DIRECT where supported (features %s > half of available memory %s)", ibytes(feat), ibytes(avail))
	}
	return storage.ReadBuffered, fmt.Sprintf("feature reads: buffered (features %s fit the page cache)", ibytes(feat))
}

// AutoSource resolves the sampler's "auto" source for d:
// sample.SourceBatch (a hop's uncached lists read together, O_DIRECT where
// supported) when the graph (indptr and indices) is larger than half of
// the room the page cache has for it, else sample.SourceMmap, whose pages
// a graph that fits keeps after the first touch. The room is the lesser
// of the process's memory cgroup limit (which charges the page cache) and
// the memory the kernel reports available (cgroup.SelfMemoryRoom, as
// partition's order decision takes it); with a budget of
// budget bytes (train's --mem; 0: none) it is what the budget leaves of
// that, plus the half of the budget's RuntimeReserve that is kept for
// memory outside the Go heap, page cache included (SoftMemoryLimit). note
// says which and why.
func AutoSource(d *storage.Dataset, budget int64) (src sample.Source, note string) {
	room, fromLimit := cgroup.SelfMemoryRoom()
	what := "available memory"
	if fromLimit {
		what = "the memory cgroup limit"
	}
	return autoSource(d, room, what, budget)
}

// AutoSourceIn is AutoSource for a process whose memory room (its memory
// cgroup's limit, or the memory available) is room bytes: what a child
// started under that limit will choose.
func AutoSourceIn(d *storage.Dataset, room, budget int64) (src sample.Source, note string) {
	return autoSource(d, room, "a room of "+ibytes(room), budget)
}

func autoSource(d *storage.Dataset, room int64, what string, budget int64) (src sample.Source, note string) {
	graph := d.CSRBytes()
	if budget > 0 {
		room = pageCacheRoom(room, budget)
		what += " less --mem, plus half its runtime reserve"
	}
	if batchedReads(graph, room) {
		return sample.SourceBatch, fmt.Sprintf("neighbour reads: batched per hop (graph %s > half of %s, %s)", ibytes(graph), what, ibytes(room))
	}
	return sample.SourceMmap, fmt.Sprintf("neighbour reads: through the mapping (graph %s fits %s, %s)", ibytes(graph), what, ibytes(room))
}

// pageCacheRoom is what a budget of budget bytes (> 0) leaves the page
// cache of room bytes of memory: room less the budget, plus the half of
// its runtime reserve kept for memory outside the Go heap.
func pageCacheRoom(room, budget int64) int64 { return room - budget + RuntimeReserve(budget)/2 }

// batchedReads says whether graph bytes compete with room bytes of page
// cache (AutoSource): more than half of it; always when no room is left
// (room <= 0).
func batchedReads(graph, room int64) bool { return graph > room/2 }
