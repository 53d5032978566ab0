package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// ManifestName is the manifest's file name inside a dataset directory.
const ManifestName = "dataset.json"

// FormatName and FormatVersion identify the on-disk format (docs/format.md).
const (
	FormatName    = "ssdgnn-dataset"
	FormatVersion = 1
)

// Canonical file names of a dataset.
const (
	FileIndptr   = "indptr.npy"
	FileIndices  = "indices.npy"
	FileFeatures = "features.npy"
	FileLabels   = "labels.npy"
	FileTrain    = "train_idx.npy"
	FileValid    = "valid_idx.npy"
	FileTest     = "test_idx.npy"
	// FileOrigIDs and FileNewIDs are the id maps of a relabelled
	// (partition-major) dataset: orig_ids[new] = old, new_ids[old] = new.
	FileOrigIDs = "orig_ids.npy"
	FileNewIDs  = "new_ids.npy"
)

// FileEntry describes one array file.
type FileEntry struct {
	Name       string  `json:"name"`
	DType      string  `json:"dtype"`
	Shape      []int64 `json:"shape"`
	Bytes      int64   `json:"bytes"`
	DataOffset int64   `json:"data_offset"`
	// Checksum is "xxhash64:" followed by 16 hex digits, computed over the
	// data section (the bytes after the .npy header) while writing.
	Checksum string `json:"checksum"`
}

// Manifest is the content of dataset.json.
type Manifest struct {
	Format      string `json:"format"`
	Version     int    `json:"version"`
	Name        string `json:"name"`
	NumNodes    int64  `json:"num_nodes"`
	NumEdges    int64  `json:"num_edges"`
	FeatDim     int64  `json:"feat_dim"`
	FeatDType   string `json:"feat_dtype"`
	NumClasses  int64  `json:"num_classes"`
	Symmetrized bool   `json:"symmetrized"`
	// Import statistics, informational.
	Source            string `json:"source,omitempty"`
	SelfLoopsDropped  int64  `json:"self_loops_dropped"`
	DuplicatesDropped int64  `json:"duplicates_dropped"`
	Seed              int64  `json:"seed,omitempty"`
	// RelabelledFrom is set when this dataset is a partition-major copy
	// of another (ssdgnn relabel): its ids are ranks of (part, old id), and
	// orig_ids.npy / new_ids.npy map them to and from the source's ids.
	RelabelledFrom *Relabelling `json:"relabelled_from,omitempty"`

	Files []FileEntry `json:"files"`
}

// Relabelling records where a partition-major dataset came from.
type Relabelling struct {
	// Dir and Name are the source dataset's directory (as given) and
	// name; ManifestChecksum is "xxhash64:…" of its dataset.json bytes.
	Dir              string `json:"dir"`
	Name             string `json:"name"`
	ManifestChecksum string `json:"manifest_checksum"`
	// Partitioning names the partitioning (under partitions/, carried
	// over) whose K parts are the contiguous id ranges.
	Partitioning string `json:"partitioning"`
	K            int    `json:"k"`
	// Order is the order of the nodes within each part: "degree",
	// "heat" or "id" (partition.RelabelOrder); empty in copies written
	// before it was recorded, which are in "id" order. Informational: no
	// reader depends on it.
	Order string `json:"order,omitempty"`
	// Original is set when the source was itself relabelled: the
	// directory (as recorded) of the dataset that is not, whose ids
	// orig_ids.npy and new_ids.npy then speak (the maps are composed).
	Original string `json:"original,omitempty"`
	// OriginalChecksum is that dataset's ManifestChecksum (set with
	// Original; empty in copies written before it was recorded).
	OriginalChecksum string `json:"original_checksum,omitempty"`
}

// FeatRowBytes is the bytes of one feature row (FeatDim × FeatDType's
// size), 0 without features.
func (m *Manifest) FeatRowBytes() int64 {
	fd, err := npy.ParseDType(m.FeatDType)
	if m.FeatDim <= 0 || err != nil {
		return 0
	}
	return m.FeatDim * int64(fd.Size())
}

// File returns the entry named name, or nil.
func (m *Manifest) File(name string) *FileEntry {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

// IndicesDType is the dtype indices.npy must have for n nodes.
func IndicesDType(numNodes int64) npy.DType {
	if numNodes < 1<<31 {
		return npy.Int32
	}
	return npy.Int64
}

// expectation is what the manifest's header fields demand of a file.
type expectation struct {
	name     string
	dtype    npy.DType
	shape    []int64 // -1 = any
	optional bool
}

func (m *Manifest) expectations() ([]expectation, error) {
	fd, err := npy.ParseDType(m.FeatDType)
	if err != nil && m.FeatDim > 0 {
		return nil, fmt.Errorf("%s: feat_dtype: %w", ManifestName, err)
	}
	if m.FeatDim > 0 && fd != npy.Float32 && fd != npy.Float16 {
		return nil, fmt.Errorf("%s: feat_dtype %q: want float32 or float16", ManifestName, m.FeatDType)
	}
	return []expectation{
		{FileIndptr, npy.Int64, []int64{m.NumNodes + 1}, false},
		{FileIndices, IndicesDType(m.NumNodes), []int64{m.NumEdges}, false},
		{FileFeatures, fd, []int64{m.NumNodes, m.FeatDim}, m.FeatDim == 0},
		{FileLabels, npy.Int32, []int64{m.NumNodes}, true},
		{FileTrain, npy.Int64, []int64{-1}, true},
		{FileValid, npy.Int64, []int64{-1}, true},
		{FileTest, npy.Int64, []int64{-1}, true},
		{FileOrigIDs, npy.Int64, []int64{m.NumNodes}, m.RelabelledFrom == nil},
		{FileNewIDs, npy.Int64, []int64{m.NumNodes}, m.RelabelledFrom == nil},
	}, nil
}

// Validate checks the manifest's own consistency: counts, dtypes, and that
// every required file is listed with the right dtype and shape.
func (m *Manifest) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: field %q: %s", ErrMismatch, ManifestName, field, fmt.Sprintf(format, args...))
	}
	if m.Format != FormatName {
		return bad("format", "got %q, want %q", m.Format, FormatName)
	}
	if m.Version != FormatVersion {
		return bad("version", "got %d, this build reads %d", m.Version, FormatVersion)
	}
	if m.NumNodes < 0 {
		return bad("num_nodes", "negative (%d)", m.NumNodes)
	}
	if m.NumEdges < 0 {
		return bad("num_edges", "negative (%d)", m.NumEdges)
	}
	if m.FeatDim < 0 {
		return bad("feat_dim", "negative (%d)", m.FeatDim)
	}
	if m.NumClasses < 0 {
		return bad("num_classes", "negative (%d)", m.NumClasses)
	}
	if r := m.RelabelledFrom; r != nil && (r.K < 1 || r.Partitioning == "") {
		return bad("relabelled_from", "needs a partitioning name and k >= 1 (got %q, %d)", r.Partitioning, r.K)
	}
	if m.RelabelledFrom == nil && (m.File(FileOrigIDs) != nil || m.File(FileNewIDs) != nil) {
		return bad("files", "%s / %s listed without relabelled_from", FileOrigIDs, FileNewIDs)
	}
	exps, err := m.expectations()
	if err != nil {
		return err
	}
	if m.NumClasses > 0 && m.File(FileLabels) == nil {
		return bad("num_classes", "dataset has %d classes but no labels (%s is not listed in files)", m.NumClasses, FileLabels)
	}
	for _, e := range exps {
		f := m.File(e.name)
		if f == nil {
			if e.optional {
				continue
			}
			return bad("files", "missing entry for %s", e.name)
		}
		if f.DType != e.dtype.String() {
			return bad("files", "%s: dtype %s, want %s", e.name, f.DType, e.dtype)
		}
		if len(f.Shape) != len(e.shape) {
			return bad("files", "%s: shape %v, want %d dimensions", e.name, f.Shape, len(e.shape))
		}
		for i, s := range e.shape {
			if s >= 0 && f.Shape[i] != s {
				return bad("files", "%s: shape %v, want %v", e.name, f.Shape, e.shape)
			}
			if f.Shape[i] < 0 {
				return bad("files", "%s: negative dimension in shape %v", e.name, f.Shape)
			}
		}
		h := npy.Header{DType: e.dtype, Shape: f.Shape}
		if db := h.DataBytes(); db < 0 || f.Bytes != f.DataOffset+db {
			return bad("files", "%s: bytes %d, want data_offset %d + %d", e.name, f.Bytes, f.DataOffset, db)
		}
	}
	return nil
}

// LoadManifest reads and validates DIR/dataset.json.
func LoadManifest(dir string) (*Manifest, error) {
	m, _, err := loadManifest(dir)
	return m, err
}

// LoadManifestChecksum is LoadManifest with the checksum of the file's
// bytes ("xxhash64:…", Dataset.ManifestChecksum's spelling), for a reader
// that opens the dataset's files by path as it goes and checks with
// ManifestUnchanged, before it commits what it made of them, that no
// replacement (gen, import or relabel --force) came in between.
func LoadManifestChecksum(dir string) (*Manifest, string, error) { return loadManifest(dir) }

// ManifestUnchanged checks that dir's dataset.json still has checksum sum
// (from LoadManifestChecksum or Dataset.ManifestChecksum): ErrMismatch,
// naming the directory, when it differs or is gone.
func ManifestUnchanged(dir, sum string) error {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err == nil && FormatChecksum(xxhash.Sum64(b)) == sum {
		return nil
	}
	why := "it has another " + ManifestName
	if err != nil {
		why = err.Error()
	}
	return fmt.Errorf("%w: the dataset in %s was replaced while it was read (%s; a gen, import or relabel --force into it?): run again",
		ErrMismatch, dir, why)
}

// loadManifest is LoadManifest with the checksum of the file's bytes
// ("xxhash64:…", as Relabelling.ManifestChecksum records a source's).
func loadManifest(dir string) (*Manifest, string, error) {
	path := filepath.Join(dir, ManifestName)
	if err := CheckRegular(path); err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: %s", ErrNotDataset, dir)
	}
	if err != nil {
		return nil, "", fmt.Errorf("storage: %w", err)
	}
	m, err := ParseManifest(b, path)
	if err != nil {
		return nil, "", err
	}
	return m, FormatChecksum(xxhash.Sum64(b)), nil
}

// ParseManifest decodes and validates manifest bytes; path is used in
// error messages.
func ParseManifest(b []byte, path string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &CorruptError{File: path, Index: -1, Offset: se.Offset, Msg: "invalid JSON: " + se.Error()}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &CorruptError{File: path, Field: te.Field, Index: -1, Offset: te.Offset, Msg: "field " + te.Field + ": " + te.Error()}
		}
		return nil, &CorruptError{File: path, Index: -1, Offset: -1, Msg: err.Error()}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}
