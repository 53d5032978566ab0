package storage

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/x448/float16"
	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// Advice is a madvise hint for a mapping.
type Advice int

// Advice values.
const (
	AdviceNormal Advice = iota
	AdviceRandom
	AdviceSequential
	AdviceWillNeed
	AdviceDontNeed
)

func (a Advice) unix() int {
	switch a {
	case AdviceRandom:
		return unix.MADV_RANDOM
	case AdviceSequential:
		return unix.MADV_SEQUENTIAL
	case AdviceWillNeed:
		return unix.MADV_WILLNEED
	case AdviceDontNeed:
		return unix.MADV_DONTNEED
	}
	return unix.MADV_NORMAL
}

// OpenOptions configures Open.
type OpenOptions struct {
	// Advice is applied to the per-node arrays that training reads at
	// random: indptr, indices, features and labels. Default AdviceRandom,
	// which stops the kernel's read-around from inflating bytes read: a
	// fault on a mapping without it reads up to the device's
	// read_ahead_kb (8 MiB on the benchmark VM) around the page, and a
	// sampler that looks up indptr at random then reads megabytes per
	// neighbour list once the page cache cannot hold the array.
	Advice Advice
	// Accounting receives the dataset's I/O counts; nil allocates one.
	Accounting *Accounting
	// SkipChecks opens without the invariant scan (doc.go, "Checked at
	// open"). Only for callers that index nothing with the data: info,
	// which reads the manifest, and Validate, which scans everything
	// itself and reports every problem instead of the first.
	SkipChecks bool
}

// Dataset is an open, memory-mapped dataset.
//
// Every slice a Dataset returns aliases the read-only mapping: writing to
// it faults, and it is valid only until Close. A Dataset is safe for
// concurrent readers.
type Dataset struct {
	dir    string
	m      *Manifest
	manSum string // ManifestChecksum
	acct   *Accounting
	arrays map[string]*Array
	advice Advice // OpenOptions.Advice, what ScanGraph restores

	indptr  []int64
	idx32   []int32
	idx64   []int64
	feat    []byte
	rowSize int64
	labels  []int32
	splits  [3][]int64

	maxDegOnce sync.Once
	maxDeg     int64 // MaxDegree
}

// Open maps the dataset in dir after checking every file against the
// manifest (existence, byte size, and the .npy header's dtype and shape)
// and then, unless OpenOptions.SkipChecks, reads every array except the
// features once to check the invariants readers index with and the
// checksums (doc.go, "Checked at open"). A violation is a *CorruptError
// naming the file, the element and the value.
func Open(dir string, opts *OpenOptions) (*Dataset, error) {
	if opts == nil {
		opts = &OpenOptions{Advice: AdviceRandom}
	}
	m, sum, err := loadManifest(dir)
	if errors.Is(err, ErrNotDataset) {
		if st := PendingReplacement(dir); st != "" {
			return nil, fmt.Errorf("%w (a replacement with --force was interrupted while swapping in the complete new dataset from %s: the next gen, import or relabel into %s finishes it, or says why it cannot)", err, st, dir)
		}
		if what := foreignLayout(dir); what != "" {
			return nil, fmt.Errorf("%w: it holds %s", err, what)
		}
	}
	if err != nil {
		return nil, err
	}
	d := &Dataset{dir: dir, m: m, manSum: sum, acct: opts.Accounting, arrays: map[string]*Array{}, advice: opts.Advice}
	if d.acct == nil {
		d.acct = NewAccounting()
	}
	for i := range m.Files {
		a, err := MapArray(dir, &m.Files[i])
		if err != nil {
			d.Close()
			return nil, err
		}
		d.arrays[a.Entry.Name] = a
	}
	d.indptr = npy.AsInt64(d.data(FileIndptr))
	if IndicesDType(m.NumNodes) == npy.Int32 {
		d.idx32 = npy.AsInt32(d.data(FileIndices))
	} else {
		d.idx64 = npy.AsInt64(d.data(FileIndices))
	}
	d.feat = d.data(FileFeatures)
	d.rowSize = m.FeatRowBytes()
	d.labels = npy.AsInt32(d.data(FileLabels))
	for i, name := range []string{FileTrain, FileValid, FileTest} {
		d.splits[i] = npy.AsInt64(d.data(name))
	}
	if !opts.SkipChecks {
		if err := d.check(); err != nil {
			d.Close()
			return nil, err
		}
	}
	for _, name := range []string{FileIndptr, FileIndices, FileFeatures, FileLabels} {
		if _, ok := d.arrays[name]; ok {
			if err := d.Advise(name, opts.Advice); err != nil {
				d.Close()
				return nil, err
			}
		}
	}
	return d, nil
}

func (d *Dataset) data(name string) []byte {
	if a, ok := d.arrays[name]; ok {
		return a.Data
	}
	return nil
}

// Close unmaps every file. Slices obtained from d must not be used after.
func (d *Dataset) Close() error {
	var first error
	for _, a := range d.arrays {
		if err := a.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.arrays = nil
	return first
}

// Advise applies a madvise hint to the mapping of file name.
func (d *Dataset) Advise(name string, adv Advice) error {
	a, ok := d.arrays[name]
	if !ok {
		return fmt.Errorf("storage: advise: no file %s", name)
	}
	return a.Advise(adv)
}

// ScanGraph advises the graph's mappings (indptr and indices) for
// sequential reads, for a caller about to read most neighbour lists in id
// order (layer-wise inference), and returns the function that restores
// the advice Open gave them. Under OpenOptions' default AdviceRandom a
// fault reads one page, so a scan of the lists would be one synchronous
// read per 4 KiB; sequential advice lets the kernel read ahead. Advice
// is per mapping: random readers of the graph running meanwhile read
// ahead too.
func (d *Dataset) ScanGraph() (restore func()) {
	names := []string{FileIndptr, FileIndices}
	for _, name := range names {
		_ = d.Advise(name, AdviceSequential) // a hint; failure costs only speed
	}
	return func() {
		for _, name := range names {
			_ = d.Advise(name, d.advice)
		}
	}
}

// Dir is the dataset directory.
func (d *Dataset) Dir() string { return d.dir }

// ManifestChecksum is "xxhash64:…" of the dataset.json bytes Open read:
// it names the dataset's contents (the manifest lists every array's
// checksum), as Relabelling.ManifestChecksum names a relabelled copy's
// source.
func (d *Dataset) ManifestChecksum() string { return d.manSum }

// Manifest is the dataset's manifest. Callers must not modify it.
func (d *Dataset) Manifest() *Manifest { return d.m }

// Accounting is the dataset's I/O accounting.
func (d *Dataset) Accounting() *Accounting { return d.acct }

// NumNodes is the number of nodes.
func (d *Dataset) NumNodes() int64 { return d.m.NumNodes }

// NumEdges is the number of directed edges stored.
func (d *Dataset) NumEdges() int64 { return d.m.NumEdges }

// FeatDim is the feature dimension (0 when there are no features).
func (d *Dataset) FeatDim() int { return int(d.m.FeatDim) }

// FeatRowBytes is the size of one feature row on disk.
func (d *Dataset) FeatRowBytes() int64 { return d.rowSize }

// Indptr is the CSR offsets array, N+1 entries.
func (d *Dataset) Indptr() []int64 { return d.indptr }

// Indices32 is the CSR indices array when stored as int32, else nil.
func (d *Dataset) Indices32() []int32 { return d.idx32 }

// Indices64 is the CSR indices array when stored as int64, else nil.
func (d *Dataset) Indices64() []int64 { return d.idx64 }

// CSRBytes is the size of the graph's indptr and indices arrays (their
// data, without the .npy headers).
func (d *Dataset) CSRBytes() int64 {
	e := int64(8)
	if d.idx32 != nil {
		e = 4
	}
	return 8*(d.NumNodes()+1) + e*d.NumEdges()
}

// MaxDegree is the largest Degree (the longest neighbour list), found on
// first use by one pass over indptr.
func (d *Dataset) MaxDegree() int64 {
	d.maxDegOnce.Do(func() {
		for i := 1; i < len(d.indptr); i++ {
			d.maxDeg = max(d.maxDeg, d.indptr[i]-d.indptr[i-1])
		}
	})
	return d.maxDeg
}

// Degree is the out-degree of v.
func (d *Dataset) Degree(v int64) int64 { return d.indptr[v+1] - d.indptr[v] }

// Neighbors returns v's neighbour list as a zero-copy view.
func (d *Dataset) Neighbors(v int64) NodeList {
	lo, hi := d.indptr[v], d.indptr[v+1]
	if d.idx32 != nil {
		return NodeList{i32: d.idx32[lo:hi]}
	}
	return NodeList{i64: d.idx64[lo:hi]}
}

// FeatureBytes returns v's feature row as raw bytes (zero-copy).
func (d *Dataset) FeatureBytes(v int64) []byte {
	off := v * d.rowSize
	return d.feat[off : off+d.rowSize]
}

// FeaturesF32 returns the whole feature matrix as float32 (zero-copy), or
// ErrDType when features are stored as float16.
func (d *Dataset) FeaturesF32() ([]float32, error) {
	if d.m.FeatDType != "float32" {
		return nil, fmt.Errorf("%w: features are %s", ErrDType, d.m.FeatDType)
	}
	if len(d.feat) == 0 {
		return nil, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&d.feat[0])), len(d.feat)/4), nil
}

// FeatureRow decodes v's feature row into dst as float32, converting from
// float16 where needed, and returns dst[:FeatDim].
func (d *Dataset) FeatureRow(v int64, dst []float32) []float32 {
	return DecodeFeatureRow(d.m.FeatDType, d.FeatureBytes(v), dst)
}

// DecodeFeatureRow converts one stored row (float32 or float16 bytes) to
// float32.
func DecodeFeatureRow(dtype string, row []byte, dst []float32) []float32 {
	if dtype == "float16" {
		n := len(row) / 2
		if cap(dst) < n {
			dst = make([]float32, n)
		}
		dst = dst[:n]
		for i := range dst {
			dst[i] = float16.Frombits(uint16(row[2*i]) | uint16(row[2*i+1])<<8).Float32()
		}
		return dst
	}
	n := len(row) / 4
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	if n > 0 {
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(&row[0])), n))
	}
	return dst
}

// Labels is the per-node class array (-1 = unlabelled), or nil.
func (d *Dataset) Labels() []int32 { return d.labels }

// TrainIdx is the sorted training node ids.
func (d *Dataset) TrainIdx() []int64 { return d.splits[0] }

// ValidIdx is the sorted validation node ids.
func (d *Dataset) ValidIdx() []int64 { return d.splits[1] }

// TestIdx is the sorted test node ids.
func (d *Dataset) TestIdx() []int64 { return d.splits[2] }

// BytesOnDisk is the total size of the dataset's array files.
func (d *Dataset) BytesOnDisk() int64 {
	var n int64
	for _, f := range d.m.Files {
		n += f.Bytes
	}
	return n
}

// NodeList is a zero-copy view of a neighbour list, stored as int32 or
// int64 ids.
type NodeList struct {
	i32 []int32
	i64 []int64
}

// Len is the number of ids.
func (l NodeList) Len() int {
	if l.i64 != nil {
		return len(l.i64)
	}
	return len(l.i32)
}

// At returns the i-th id.
func (l NodeList) At(i int) int64 {
	if l.i64 != nil {
		return l.i64[i]
	}
	return int64(l.i32[i])
}

// AppendTo appends all ids to dst.
func (l NodeList) AppendTo(dst []int64) []int64 {
	if l.i64 != nil {
		return append(dst, l.i64...)
	}
	for _, v := range l.i32 {
		dst = append(dst, int64(v))
	}
	return dst
}

// Int32 returns the underlying int32 slice, or nil for int64 storage.
func (l NodeList) Int32() []int32 { return l.i32 }

// Int64 returns the underlying int64 slice, or nil for int32 storage.
func (l NodeList) Int64() []int64 { return l.i64 }

// Bytes is the storage size of the list.
func (l NodeList) Bytes() int64 {
	if l.i64 != nil {
		return int64(len(l.i64)) * 8
	}
	return int64(len(l.i32)) * 4
}
