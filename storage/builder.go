package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/pidstamp"
)

// CreateOptions configures Create.
type CreateOptions struct {
	// Force allows replacing an existing dataset. The new one is written
	// beside it, in a staging directory inside dir, and swapped in by
	// Finish: until then the old dataset stays whole and usable, and an
	// interrupted or failed run leaves it as it was (Abort, or the next
	// Create, removes the staging directory). The swap is journaled
	// (replace.go): once it begins the new dataset is kept, and a swap
	// that fails or is killed half way is finished by the next Create in
	// dir. It removes the old derived directories (partitions/, profile/,
	// spill/), which would be stale, and the old arrays the new manifest
	// does not list. Other entries of dir (a checkpoints directory,
	// plan.json) are left alone. Replacing needs room for both datasets
	// until the swap.
	Force bool
}

// derivedDirs are subdirectories computed from a dataset, removed on
// overwrite.
var derivedDirs = []string{"partitions", "profile", "spill"}

// stagingPrefix names a Force run's staging directory inside the dataset
// directory: stagingPrefix + pidstamp.Stamp() + "-" + random.
const stagingPrefix = ".staged-"

// Builder writes a new dataset directory. Arrays are written one at a time
// or concurrently, each atomically; Finish writes the manifest last, so a
// crash at any point leaves a directory that Open rejects, or, when
// replacing a dataset (CreateOptions.Force), the old dataset whole.
type Builder struct {
	dir string // where arrays are written: final, or the staging directory
	// final is the dataset directory; staged says dir is a staging
	// directory inside it, swapped in by Finish.
	final  string
	staged bool
	// swapping says the swap began (its journal is written): from then on
	// the staged dataset is the one to keep, and Abort leaves it for
	// recoverStaging to finish.
	swapping bool
	mu       struct {
		sync.Mutex
		files map[string]FileEntry
	}
}

// Create prepares dir for a new dataset. With an existing dataset in dir
// it fails with ErrExists unless opts.Force, which stages the new one (see
// CreateOptions).
func Create(dir string, opts *CreateOptions) (*Builder, error) {
	if opts == nil {
		opts = &CreateOptions{}
	}
	recovered, err := recoverStaging(dir)
	if err != nil {
		return nil, err
	}
	b := &Builder{dir: dir, final: dir}
	b.mu.files = map[string]FileEntry{}
	mpath := filepath.Join(dir, ManifestName)
	if _, err := os.Stat(mpath); err == nil {
		if !opts.Force {
			if len(recovered) > 0 {
				return nil, fmt.Errorf("%w: %s (an interrupted --force replacement was finished first: the dataset there is the one it had staged in %s)", ErrExists, dir, recovered[0])
			}
			return nil, fmt.Errorf("%w: %s", ErrExists, dir)
		}
		if _, err := atomicfile.CleanTemps(dir); err != nil {
			return nil, err
		}
		st, err := os.MkdirTemp(dir, stagingPrefix+pidstamp.Stamp()+"-")
		if err != nil {
			return nil, fmt.Errorf("storage: staging the replacement: %w", err)
		}
		b.dir, b.staged = st, true
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if _, err := atomicfile.CleanTemps(dir); err != nil {
		return nil, err
	}
	return b, nil
}

// Replacing reports whether the builder replaces an existing dataset
// (CreateOptions.Force), which stays in place until Finish.
func (b *Builder) Replacing() bool { return b.staged }

// Abort discards what the builder wrote when it replaces a dataset (its
// staging directory; the old dataset is untouched). Without one it does
// nothing: the caller removes what it committed. Abort after Finish does
// nothing.
func (b *Builder) Abort() {
	if b.staged && !b.swapping {
		_ = os.RemoveAll(b.dir)
		b.staged = false
	}
}

// Committed lists the arrays committed so far (by file name), for the
// caller of a failed build that is not a replacement, which removes them
// itself (Abort does not).
func (b *Builder) Committed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.mu.files))
	for name := range b.mu.files {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Dir is where the dataset's files are written until Finish: the dataset
// directory, or the staging directory inside it when replacing a dataset.
// Writers of derived files (partitions/) before Finish write under Dir;
// after Finish, use the dataset directory.
func (b *Builder) Dir() string { return b.dir }

// Entry is the manifest entry of the committed array name, for writers
// that refer to a dataset file (by link) from a derived directory before
// Finish.
func (b *Builder) Entry(name string) (FileEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.mu.files[name]
	return e, ok
}

// ArrayWriter streams one .npy array into the dataset. It is not safe for
// concurrent use, but distinct ArrayWriters may be used concurrently.
type ArrayWriter struct {
	b    *Builder
	name string
	f    *npy.File
	h    *xxhash.Digest
	buf  []byte
	done bool
}

// CreateArray starts the array file name with dtype d and trailing
// dimensions tail. Its leading dimension is the number of rows written.
// FileFeatures gets a header of npy.AlignedHeaderSize bytes, so its rows
// start on a 4096-byte boundary and an O_DIRECT read of a row whose size
// divides 4096 takes only that row's blocks; every other array gets the
// default npy.HeaderSize.
func (b *Builder) CreateArray(name string, d npy.DType, tail []int64) (*ArrayWriter, error) {
	hdr := npy.HeaderSize
	if name == FileFeatures {
		hdr = npy.AlignedHeaderSize
	}
	f, err := npy.CreateHeader(filepath.Join(b.dir, name), d, tail, hdr)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", name, err)
	}
	return &ArrayWriter{b: b, name: name, f: f, h: xxhash.New()}, nil
}

// Write appends raw little-endian element bytes.
func (a *ArrayWriter) Write(p []byte) (int, error) {
	a.h.Write(p)
	n, err := a.f.Write(p)
	if err != nil {
		return n, fmt.Errorf("storage: write %s: %w", a.name, err)
	}
	return n, nil
}

// WriteInt64s appends int64 elements.
func (a *ArrayWriter) WriteInt64s(v []int64) error {
	_, err := a.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8))
	return err
}

// WriteInt32s appends int32 elements.
func (a *ArrayWriter) WriteInt32s(v []int32) error {
	_, err := a.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4))
	return err
}

// WriteFloat32s appends float32 elements.
func (a *ArrayWriter) WriteFloat32s(v []float32) error {
	_, err := a.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4))
	return err
}

// WriteFloat32sAsFloat16 converts float32 elements to IEEE half precision
// (round to nearest even) and appends them.
func (a *ArrayWriter) WriteFloat32sAsFloat16(v []float32) error {
	if cap(a.buf) < 2*len(v) {
		a.buf = make([]byte, 2*len(v))
	}
	buf := a.buf[:2*len(v)]
	for i, x := range v {
		h := float16.Fromfloat32(x).Bits()
		buf[2*i], buf[2*i+1] = byte(h), byte(h>>8)
	}
	_, err := a.Write(buf)
	return err
}

// WriteIDs appends node ids, narrowing to int32 when the array is int32.
// The caller guarantees ids fit.
func (a *ArrayWriter) WriteIDs(d npy.DType, v []int64) error {
	if d == npy.Int64 {
		return a.WriteInt64s(v)
	}
	if cap(a.buf) < 4*len(v) {
		a.buf = make([]byte, 4*len(v))
	}
	out := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(a.buf))), len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	_, err := a.Write(a.buf[:4*len(v)])
	return err
}

// Rows is the number of complete rows written so far.
func (a *ArrayWriter) Rows() int64 { return a.f.Rows() }

// Commit finishes the array: it patches the header, fsyncs, renames the
// file into place and records its entry for the manifest.
func (a *ArrayWriter) Commit() error {
	if a.done {
		return atomicfile.ErrDone
	}
	a.done = true
	hdr, err := a.f.Commit()
	if err != nil {
		return fmt.Errorf("storage: %s: %w", a.name, err)
	}
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	a.b.mu.files[a.name] = FileEntry{
		Name:       a.name,
		DType:      hdr.DType.String(),
		Shape:      hdr.Shape,
		Bytes:      hdr.DataOffset + hdr.DataBytes(),
		DataOffset: hdr.DataOffset,
		Checksum:   FormatChecksum(a.h.Sum64()),
	}
	return nil
}

// Abort discards the array. It is a no-op after Commit.
func (a *ArrayWriter) Abort() {
	if !a.done {
		a.done = true
		a.f.Abort()
	}
}

// FormatChecksum is the manifest's spelling of an xxhash64 sum of a file's
// data ("xxhash64:" and 16 hex digits); every manifest this project
// writes uses it.
func FormatChecksum(s uint64) string { return fmt.Sprintf("xxhash64:%016x", s) }

// Finish fills m.Files from the committed arrays, validates the manifest
// and writes it atomically. Until Finish returns nil the directory is not
// a dataset.
func (b *Builder) Finish(m Manifest) error {
	m.Format, m.Version = FormatName, FormatVersion
	m.Files = m.Files[:0]
	b.mu.Lock()
	for _, f := range b.mu.files {
		m.Files = append(m.Files, f)
	}
	b.mu.Unlock()
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
	if err := m.Validate(); err != nil {
		return err
	}
	js, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(b.dir, ManifestName), append(js, '\n')); err != nil {
		return err
	}
	if b.staged {
		return b.swap(&m)
	}
	return nil
}

// CSRWriter writes indptr.npy and indices.npy from neighbour lists
// (Append) or single edges (AppendEdge) given in ascending node order.
// Memory is O(1) in the graph size and in the degrees.
//
// A node is open while edges may still be added to it and closed once its
// end offset is due in indptr: Append closes its node, AppendEdge leaves
// its source open until a later node, or Commit, closes it.
type CSRWriter struct {
	numNodes int64
	idType   npy.DType
	indptr   *ArrayWriter
	indices  *ArrayWriter
	next     int64 // next node whose indptr entry is due (nodes below are closed)
	edges    int64
	ptrBuf   []int64
	idxBuf   []int64 // destinations of AppendEdge not yet written
}

// csrPtrBuf and csrIdxBuf are the numbers of indptr and indices entries
// buffered before a write.
const (
	csrPtrBuf = 8192
	csrIdxBuf = 1 << 16
)

// CreateCSR starts the CSR of a graph with numNodes nodes.
func (b *Builder) CreateCSR(numNodes int64) (*CSRWriter, error) {
	ip, err := b.CreateArray(FileIndptr, npy.Int64, nil)
	if err != nil {
		return nil, err
	}
	idt := IndicesDType(numNodes)
	ix, err := b.CreateArray(FileIndices, idt, nil)
	if err != nil {
		ip.Abort()
		return nil, err
	}
	c := &CSRWriter{numNodes: numNodes, idType: idt, indptr: ip, indices: ix}
	c.ptrBuf = append(make([]int64, 0, csrPtrBuf), 0)
	return c, nil
}

// closeBelow closes every node below v, writing full indptr buffers.
func (c *CSRWriter) closeBelow(v int64) error {
	for c.next < v {
		c.ptrBuf = append(c.ptrBuf, c.edges)
		c.next++
		if len(c.ptrBuf) >= csrPtrBuf {
			if err := c.indptr.WriteInt64s(c.ptrBuf); err != nil {
				return err
			}
			c.ptrBuf = c.ptrBuf[:0]
		}
	}
	return nil
}

// flushIdx writes the buffered AppendEdge destinations.
func (c *CSRWriter) flushIdx() error {
	if len(c.idxBuf) == 0 {
		return nil
	}
	if err := c.indices.WriteIDs(c.idType, c.idxBuf); err != nil {
		return err
	}
	c.idxBuf = c.idxBuf[:0]
	return nil
}

// Append adds the neighbour list of node v and closes v. Nodes must come
// in strictly ascending order (v may be the node still open after
// AppendEdge); nodes skipped get empty lists. Neighbour ids must be in
// [0, numNodes).
func (c *CSRWriter) Append(v int64, nbrs []int64) error {
	if v < c.next || v >= c.numNodes {
		return fmt.Errorf("storage: CSR node %d out of order or range (next %d, num_nodes %d)", v, c.next, c.numNodes)
	}
	for _, u := range nbrs {
		if u < 0 || u >= c.numNodes {
			return fmt.Errorf("storage: node %d: neighbour %d out of range [0,%d)", v, u, c.numNodes)
		}
	}
	if err := c.closeBelow(v); err != nil {
		return err
	}
	if err := c.flushIdx(); err != nil {
		return err
	}
	if err := c.indices.WriteIDs(c.idType, nbrs); err != nil {
		return err
	}
	c.edges += int64(len(nbrs))
	return c.closeBelow(v + 1)
}

// AppendEdge adds the edge src→dst. Edges must come in ascending src
// order, and after Append(v, …) src must exceed v; edges of one source
// keep their order. Both ids must be in [0, numNodes).
func (c *CSRWriter) AppendEdge(src, dst int64) error {
	if src < c.next || src >= c.numNodes {
		return fmt.Errorf("storage: CSR node %d out of order or range (next %d, num_nodes %d)", src, c.next, c.numNodes)
	}
	if dst < 0 || dst >= c.numNodes {
		return fmt.Errorf("storage: node %d: neighbour %d out of range [0,%d)", src, dst, c.numNodes)
	}
	if err := c.closeBelow(src); err != nil {
		return err
	}
	if c.idxBuf == nil {
		c.idxBuf = make([]int64, 0, csrIdxBuf)
	}
	c.idxBuf = append(c.idxBuf, dst)
	c.edges++
	if len(c.idxBuf) == cap(c.idxBuf) {
		return c.flushIdx()
	}
	return nil
}

// Edges is the number of edges appended so far.
func (c *CSRWriter) Edges() int64 { return c.edges }

// Commit closes the open and the trailing nodes and commits both arrays.
// On error the arrays not yet committed are discarded (indptr.npy stays
// if only indices.npy fails; no manifest names it).
func (c *CSRWriter) Commit() error {
	err := c.flushIdx()
	if err == nil {
		err = c.closeBelow(c.numNodes)
	}
	if err == nil && len(c.ptrBuf) > 0 {
		err = c.indptr.WriteInt64s(c.ptrBuf)
		c.ptrBuf = c.ptrBuf[:0]
	}
	if err == nil {
		err = c.indptr.Commit()
	}
	if err != nil {
		c.Abort()
		return err
	}
	return c.indices.Commit()
}

// Abort discards both arrays. It is a no-op for an array already
// committed.
func (c *CSRWriter) Abort() {
	c.indptr.Abort()
	c.indices.Abort()
}
