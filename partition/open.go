package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/namedir"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Partitioning is an open, memory-mapped partitioning.
//
// Every slice it returns aliases a read-only mapping: writing to it faults,
// and it is valid only until Close. A Partitioning is safe for concurrent
// readers.
type Partitioning struct {
	dir    string
	man    *Manifest
	stats  Stats
	arrays map[string]*storage.Array

	part, cross    []int32
	off, members   []int64
	toff, tmembers []int64
	adjPtr         []int64
	adj32          []int32
	adj64          []int64
	adjFile        *storage.FileEntry
	statsJSON      []byte
	// manSum is the xxhash64 of the manifest.json bytes Open read: a
	// partitioning replaced since ('partition --force') has another.
	manSum uint64
}

// expected dtype and shape (-1 = any) of each array, given the manifest.
func (m *Manifest) expect() map[string]struct {
	dtype string
	shape int64
} {
	type e = struct {
		dtype string
		shape int64
	}
	return map[string]e{
		FilePart:           {"int32", m.NumNodes},
		FileCross:          {"int32", m.NumNodes},
		FileMembersOffsets: {"int64", int64(m.K) + 1},
		FileMembers:        {"int64", m.NumNodes},
		FileTrainOffsets:   {"int64", int64(m.K) + 1},
		FileTrainMembers:   {"int64", m.NumTrain},
		FileAdjIndptr:      {"int64", m.NumNodes + 1},
		FileAdjIndices:     {storage.IndicesDType(m.NumNodes).String(), m.NumEdges},
	}
}

// ParseManifest decodes and checks manifest bytes; path is used in errors.
func ParseManifest(b []byte, path string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &CorruptError{File: path, Index: -1, Offset: se.Offset, Msg: "invalid JSON: " + se.Error()}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &CorruptError{File: path, Index: -1, Offset: te.Offset, Msg: "field " + te.Field + ": " + te.Error()}
		}
		return nil, &CorruptError{File: path, Index: -1, Offset: -1, Msg: err.Error()}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrMismatch, path, fmt.Sprintf(format, args...))
	}
	if m.Format != FormatName || m.Version != FormatVersion {
		return nil, bad("format %q version %d, this build reads %q version %d", m.Format, m.Version, FormatName, FormatVersion)
	}
	if m.K < 1 || m.NumNodes < 0 || m.NumEdges < 0 || m.NumTrain < 0 || m.NumTrain > m.NumNodes {
		return nil, bad("bad counts: k=%d nodes=%d edges=%d train=%d", m.K, m.NumNodes, m.NumEdges, m.NumTrain)
	}
	for name, e := range m.expect() {
		f := m.File(name)
		if f == nil {
			return nil, bad("missing entry for %s", name)
		}
		if f.DType != e.dtype || len(f.Shape) != 1 || f.Shape[0] != e.shape {
			return nil, bad("%s: %s%v, want %s[%d]", name, f.DType, f.Shape, e.dtype, e.shape)
		}
		d, _ := npy.ParseDType(e.dtype)
		if f.DataOffset < 0 || f.Bytes != f.DataOffset+e.shape*int64(d.Size()) {
			return nil, bad("%s: bytes %d inconsistent with data_offset %d and shape", name, f.Bytes, f.DataOffset)
		}
	}
	return &m, nil
}

// Exists reports whether the dataset in datasetDir has a committed
// partitioning name (its manifest, written last, is there). It opens
// nothing; Open still checks the files.
func Exists(datasetDir, name string) bool {
	if !plainName(name) {
		return false
	}
	return hasManifest(committedDir(datasetDir, name))
}

// maxNameBytes is the longest partitioning name (--force stages it).
const maxNameBytes = namedir.MaxNameBytes

// plainName reports whether name may name a partitioning: one directory
// under DIR/partitions, not hidden (the writer's staging directories),
// short enough for its staging names (maxNameBytes).
func plainName(name string) bool {
	return name != "" && len(name) <= maxNameBytes && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

// Names lists the committed partitionings of the dataset in datasetDir
// (those Exists reports), sorted; none is an empty list, not an error. A
// partitioning stranded by an interrupted --force is listed under its
// name (see committedDir).
func Names(datasetDir string) ([]string, error) {
	for _, name := range strandedNames(datasetDir) {
		committedDir(datasetDir, name) // moves it back when it can
	}
	names, err := namedir.List(datasetDir, DirName, ManifestName)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if more := strandedNames(datasetDir); len(more) > 0 {
		names = append(names, more...)
		slices.Sort(names)
	}
	return names, nil
}

// Open maps partitioning name of the dataset in datasetDir. It checks the
// manifest against the dataset's manifest (node and edge counts) and every
// file's size and .npy header against the manifest, then reads every file
// once to check its checksum and the invariants the readers index with
// (doc.go, "Checked at open"). A violation is a *CorruptError naming the
// file, the element and the value; a partitioning that is not there is
// ErrNotFound, with a message that says how to make it.
func Open(datasetDir, name string) (*Partitioning, error) {
	if !plainName(name) {
		// The name a writer may give (Options.Validate): '../x' read
		// another dataset's partitioning.
		return nil, fmt.Errorf("%w: partitioning name %q is not a plain directory name not starting with '.'", ErrOptions, name)
	}
	dir := committedDir(datasetDir, name)
	mpath := filepath.Join(dir, ManifestName)
	if err := storage.CheckRegular(mpath); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no partitioning %q in %s (%s): run 'ssdgnn partition %s' first", ErrNotFound, name, datasetDir, dir, datasetDir)
	}
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	m, err := ParseManifest(b, mpath)
	if err != nil {
		return nil, err
	}
	dm, err := storage.LoadManifest(datasetDir)
	if err != nil {
		return nil, err
	}
	if dm.NumNodes != m.NumNodes || dm.NumEdges != m.NumEdges {
		return nil, fmt.Errorf("%w: %s: made for %d nodes / %d edges, dataset has %d / %d (stale partitioning?)",
			ErrMismatch, mpath, m.NumNodes, m.NumEdges, dm.NumNodes, dm.NumEdges)
	}
	p := &Partitioning{dir: dir, man: m, arrays: map[string]*storage.Array{}, manSum: xxhash.Sum64(b)}
	for name := range m.expect() {
		a, err := storage.MapArray(dir, m.File(name))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%w: %w", ErrMismatch, err)
		}
		p.arrays[name] = a
	}
	sb, err := os.ReadFile(filepath.Join(dir, FileStats))
	if err == nil {
		p.statsJSON = sb
		err = json.Unmarshal(sb, &p.stats)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrMismatch, FileStats, err)
	}
	p.part = npy.AsInt32(p.data(FilePart))
	p.cross = npy.AsInt32(p.data(FileCross))
	p.off = npy.AsInt64(p.data(FileMembersOffsets))
	p.members = npy.AsInt64(p.data(FileMembers))
	p.toff = npy.AsInt64(p.data(FileTrainOffsets))
	p.tmembers = npy.AsInt64(p.data(FileTrainMembers))
	p.adjPtr = npy.AsInt64(p.data(FileAdjIndptr))
	p.adjFile = m.File(FileAdjIndices)
	if p.adjFile.DType == "int32" {
		p.adj32 = npy.AsInt32(p.data(FileAdjIndices))
	} else {
		p.adj64 = npy.AsInt64(p.data(FileAdjIndices))
	}
	if err := p.check(); err != nil {
		p.Close()
		return nil, err
	}
	// Readers look up per node (part, cross) and per part (a few pages of
	// members, offsets and adjacency) at random: without the hint, each
	// fault reads up to read_ahead_kb around the page (8 MiB on the
	// benchmark VM), megabytes per macro batch's part.
	for _, a := range p.arrays {
		if err := a.Advise(storage.AdviceRandom); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// Unchanged checks that the partitioning's directory still holds the
// partitioning Open read: the same manifest.json bytes, so the same
// files. A reader that opens its files again by path while it runs
// (relabel's streamed reads, an export's pread of part.npy) calls it
// before it commits what it wrote: a 'partition --force' that replaced
// the partitioning meanwhile would have handed it some files of the new
// one beside the old mapping, a mix no check of either catches. It errs
// (ErrMismatch) when the manifest differs or is gone. It works after
// Close.
func (p *Partitioning) Unchanged() error {
	mpath := filepath.Join(p.dir, ManifestName)
	b, err := os.ReadFile(mpath)
	if err == nil && xxhash.Sum64(b) == p.manSum {
		return nil
	}
	why := "it has another manifest.json"
	if err != nil {
		why = err.Error()
	}
	return fmt.Errorf("%w: %s: partitioning %q was replaced while it was read (%s; another 'ssdgnn partition --force'?): run again",
		ErrMismatch, p.dir, p.man.Name, why)
}

// data is the data section of file name, or nil.
func (p *Partitioning) data(name string) []byte {
	if a, ok := p.arrays[name]; ok {
		return a.Data
	}
	return nil
}

// Close unmaps every file.
func (p *Partitioning) Close() error {
	var first error
	for _, a := range p.arrays {
		if err := a.Close(); err != nil && first == nil {
			first = err
		}
	}
	p.arrays = nil
	return first
}

// Dir is the partitioning's directory.
func (p *Partitioning) Dir() string { return p.dir }

// Manifest is the parsed manifest. Callers must not modify it.
func (p *Partitioning) Manifest() *Manifest { return p.man }

// Stats is the content of stats.json.
func (p *Partitioning) Stats() Stats { return p.stats }

// K is the number of parts.
func (p *Partitioning) K() int { return p.man.K }

// Part is every node's part id.
func (p *Partitioning) Part() []int32 { return p.part }

// Cross is, per node, the number of its neighbours in other parts.
func (p *Partitioning) Cross() []int32 { return p.cross }

// Members is part q's node ids, ascending.
func (p *Partitioning) Members(q int) []int64 { return p.members[p.off[q]:p.off[q+1]] }

// TrainMembers is part q's training node ids, ascending.
func (p *Partitioning) TrainMembers(q int) []int64 { return p.tmembers[p.toff[q]:p.toff[q+1]] }

// Adjacency is one part's stored adjacency: the neighbour lists (global
// ids) of its members, in Members order, contiguous in adj_indices.npy.
type Adjacency struct {
	// Nodes is the part's members, ascending.
	Nodes []int64
	// Indptr has len(Nodes)+1 global offsets into adj_indices.npy: node
	// Nodes[i]'s neighbours are entries Indptr[i]..Indptr[i+1] of the file,
	// i.e. Indices[Indptr[i]-Indptr[0] : Indptr[i+1]-Indptr[0]].
	Indptr []int64
	// Exactly one of Indices32 / Indices64 is set (by the dataset's index
	// dtype); it covers entries Indptr[0]..Indptr[len(Nodes)].
	Indices32 []int32
	Indices64 []int64
	// FileOffset and FileBytes locate the indices in adj_indices.npy, for
	// loading them with one sequential read instead of the mapping.
	FileOffset, FileBytes int64
}

// Len is the number of nodes.
func (a *Adjacency) Len() int { return len(a.Nodes) }

// AppendNeighbors appends the neighbours of a.Nodes[i] to dst.
func (a *Adjacency) AppendNeighbors(i int, dst []int64) []int64 {
	lo, hi := a.Indptr[i]-a.Indptr[0], a.Indptr[i+1]-a.Indptr[0]
	if a.Indices64 != nil {
		return append(dst, a.Indices64[lo:hi]...)
	}
	for _, u := range a.Indices32[lo:hi] {
		dst = append(dst, int64(u))
	}
	return dst
}

// AdjacencyOf returns part q's adjacency as views of the mappings.
func (p *Partitioning) AdjacencyOf(q int) Adjacency {
	lo, hi := p.off[q], p.off[q+1]
	ptr := p.adjPtr[lo : hi+1]
	a := Adjacency{Nodes: p.members[lo:hi], Indptr: ptr}
	b, e := ptr[0], ptr[len(ptr)-1]
	size := int64(4)
	if p.adj64 != nil {
		size = 8
		a.Indices64 = p.adj64[b:e]
	} else if p.adj32 != nil {
		a.Indices32 = p.adj32[b:e]
	} else {
		a.Indices32 = []int32{}
	}
	a.FileOffset = p.adjFile.DataOffset + b*size
	a.FileBytes = (e - b) * size
	return a
}

// AdjacencyPath is the path of adj_indices.npy, for callers that read
// AdjacencyOf(q).FileOffset/FileBytes themselves.
func (p *Partitioning) AdjacencyPath() string { return filepath.Join(p.dir, FileAdjIndices) }

// Verify reports whether the files passed the checks Open ran: checksums
// and cross-file invariants (membership agrees with part.npy and is
// ascending within each part, offsets are monotone and complete, adjacency
// ids are in range). An open Partitioning always passed them, so Verify
// returns nil; it is kept for callers that want to say so explicitly.
func (p *Partitioning) Verify() error { return nil }
