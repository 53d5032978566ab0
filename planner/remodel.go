package planner

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Saved recounts (RemodelReads) live in DIR/profile/<name>/remodel/<key>/:
// the three arrays RemodelReads recounts, as .npy uint32 [N], and
// remodel.json, written last. Profile.Save removes them all (they belong
// to the profile they were counted from), and SaveRemodel keeps the
// KeepRemodels newest.
const (
	RemodelDir      = "remodel"
	FileRemodelJSON = "remodel.json"
	// KeepRemodels is how many saved recounts a profile keeps.
	KeepRemodels = 2
)

// remodelMeta is remodel.json: the scalars RemodelReads sets, and the
// arrays' checksums.
type remodelMeta struct {
	Format         string     `json:"format"`
	Version        int        `json:"version"`
	Key            string     `json:"key"`
	NumNodes       int64      `json:"num_nodes"`
	Reads          *ReadModel `json:"reads"`
	SumFeat        uint64     `json:"sum_saved_io_feat"`
	SumFeatSingle  uint64     `json:"sum_feat_single_reads"`
	SumFeatHeldOut uint64     `json:"sum_saved_io_feat_heldout"`
	Files          []FileInfo `json:"files"`
}

// remodelArrays are what RemodelReads recounts, by file name (FeatHeldOut
// may be nil: profiles without a held-out epoch).
func (p *Profile) remodelArrays() []struct {
	name string
	a    *[]uint32
} {
	return []struct {
		name string
		a    *[]uint32
	}{{FileSavedIOFeat, &p.Feat}, {FileFeatSingleReads, &p.FeatSingle}, {FileFeatHeldOut, &p.FeatHeldOut}}
}

// SaveRemodel writes what RemodelReads recounted in p (Feat, FeatSingle,
// FeatHeldOut, the read model and their sums) under key in p's profile
// directory of dataset dir, each file atomically and remodel.json last,
// so that a later RemodelReads with the same inputs can be LoadRemodel
// instead. key names everything the recount depended on besides the
// profile (the caller's to make; a valid profile name). It then removes
// all but the KeepRemodels newest saved recounts.
func (p *Profile) SaveRemodel(dir, key string) error {
	if !validName(key) || !validName(p.Meta.Name) {
		return fmt.Errorf("%w: remodel key %q of profile %q", ErrInvalidOptions, key, p.Meta.Name)
	}
	if p.Meta.Reads == nil {
		return fmt.Errorf("%w: profile %q has no read model to save", ErrInvalidOptions, p.Meta.Name)
	}
	root := filepath.Join(ProfilePath(dir, p.Meta.Name), RemodelDir)
	out := filepath.Join(root, key)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if _, err := atomicfile.CleanTemps(out); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := os.Remove(filepath.Join(out, FileRemodelJSON)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("planner: %w", err)
	}
	m := remodelMeta{Format: "ssdgnn-remodel", Version: 1, Key: key, NumNodes: p.Meta.NumNodes, Reads: p.Meta.Reads,
		SumFeat: p.Meta.SumFeat, SumFeatSingle: p.Meta.SumFeatSingle, SumFeatHeldOut: p.Meta.SumFeatHeldOut}
	for _, e := range p.remodelArrays() {
		a := *e.a
		if a == nil {
			continue
		}
		if int64(len(a)) != p.Meta.NumNodes {
			return fmt.Errorf("%w: %s has %d entries, profile %d nodes", ErrInvalidOptions, e.name, len(a), p.Meta.NumNodes)
		}
		sum, err := writeUint32s(filepath.Join(out, e.name), a)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, FileInfo{Name: e.name, DType: npy.Uint32.String(), Shape: []int64{int64(len(a))}, Checksum: sum})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(out, FileRemodelJSON), append(b, '\n')); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := atomicfile.SyncDir(out); err != nil {
		return err
	}
	return pruneRemodels(root, key)
}

// pruneRemodels removes the saved recounts under root beyond the
// KeepRemodels newest (by remodel.json's time; keep is never removed).
func pruneRemodels(root, keep string) error {
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	type saved struct {
		name string
		t    time.Time
	}
	var all []saved
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		var t time.Time // a recount without remodel.json is incomplete: oldest
		if fi, err := os.Stat(filepath.Join(root, e.Name(), FileRemodelJSON)); err == nil {
			t = fi.ModTime()
		}
		all = append(all, saved{e.Name(), t})
	}
	slices.SortFunc(all, func(a, b saved) int { return b.t.Compare(a.t) })
	for i, s := range all {
		if i+1 < KeepRemodels { // keep is the newest
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, s.name)); err != nil {
			return fmt.Errorf("planner: %w", err)
		}
	}
	return nil
}

// writeUint32s writes a as a .npy uint32 [len(a)] at path atomically, a
// block at a time, and returns its data's checksum.
func writeUint32s(path string, a []uint32) (string, error) {
	f, err := npy.Create(path, npy.Uint32, nil)
	if err != nil {
		return "", fmt.Errorf("planner: %w", err)
	}
	h := xxhash.New()
	buf := make([]byte, 0, 64<<10)
	flush := func() error {
		h.Write(buf)
		_, err := f.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, x := range a {
		buf = binary.LittleEndian.AppendUint32(buf, x)
		if len(buf) == cap(buf) {
			if err := flush(); err != nil {
				f.Abort()
				return "", fmt.Errorf("planner: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		f.Abort()
		return "", fmt.Errorf("planner: %w", err)
	}
	if _, err := f.Commit(); err != nil {
		return "", fmt.Errorf("planner: %w", err)
	}
	return storage.FormatChecksum(h.Sum64()), nil
}

// LoadRemodel replaces what RemodelReads recounts in p (see SaveRemodel)
// with the recount saved under key in p's profile directory of dataset
// dir, and reports whether one was there. p's arrays are filled in place
// (no second copy), after every file has been checked. A recount that does
// not fit p (another node count, another set of arrays) or is damaged is
// a *CorruptError naming the file, and p is left as it was.
func (p *Profile) LoadRemodel(dir, key string) (bool, error) {
	if !validName(key) || !validName(p.Meta.Name) {
		return false, fmt.Errorf("%w: remodel key %q of profile %q", ErrInvalidOptions, key, p.Meta.Name)
	}
	out := filepath.Join(ProfilePath(dir, p.Meta.Name), RemodelDir, key)
	mp := filepath.Join(out, FileRemodelJSON)
	b, err := os.ReadFile(mp)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("planner: %w", err)
	}
	var m remodelMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return false, &CorruptError{File: mp, Reason: err.Error()}
	}
	bad := func(field, format string, args ...any) error {
		return &CorruptError{File: mp, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case m.Format != "ssdgnn-remodel" || m.Version != 1:
		return false, bad("format", "%q version %d, want ssdgnn-remodel version 1", m.Format, m.Version)
	case m.Key != key:
		return false, bad("key", "%q, want %q", m.Key, key)
	case m.NumNodes != p.Meta.NumNodes:
		return false, bad("num_nodes", "%d, profile %d", m.NumNodes, p.Meta.NumNodes)
	case m.Reads == nil:
		return false, bad("reads", "missing")
	}
	// Every file is checked before any of p is overwritten, then read
	// into p: two passes over the files, and no second copy of an array.
	for _, fill := range []bool{false, true} {
		for _, e := range p.remodelArrays() {
			var fi *FileInfo
			for i := range m.Files {
				if m.Files[i].Name == e.name {
					fi = &m.Files[i]
				}
			}
			switch {
			case (fi == nil) != (*e.a == nil):
				return false, bad("files", "%s: saved %v, profile has it %v", e.name, fi != nil, *e.a != nil)
			case fi == nil:
				continue
			}
			var dst []uint32
			if fill {
				dst = *e.a
			}
			if err := readUint32s(filepath.Join(out, e.name), dst, int64(len(*e.a)), fi.Checksum); err != nil {
				return false, err
			}
		}
	}
	p.Meta.Reads = m.Reads
	p.Meta.SumFeat, p.Meta.SumFeatSingle, p.Meta.SumFeatHeldOut = m.SumFeat, m.SumFeatSingle, m.SumFeatHeldOut
	return true, nil
}

// readUint32s checks the .npy uint32 [n] at path, a block at a time,
// against checksum, and fills a with it unless a is nil.
func readUint32s(path string, a []uint32, n int64, checksum string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	h, err := npy.ReadHeader(r)
	if err != nil {
		var he *npy.HeaderError
		off := int64(0)
		if errors.As(err, &he) {
			off = he.Offset
		}
		return &CorruptError{File: path, Offset: off, Field: "header", Reason: err.Error()}
	}
	if h.DType != npy.Uint32 || len(h.Shape) != 1 || h.Shape[0] != n {
		return &CorruptError{File: path, Field: "header", Reason: fmt.Sprintf("%v %v, want uint32 [%d]", h.DType, h.Shape, n)}
	}
	d := xxhash.New()
	buf := make([]byte, 64<<10)
	for i := int64(0); i < n; {
		k := min(int64(len(buf)), 4*(n-i))
		if _, err := io.ReadFull(r, buf[:k]); err != nil {
			return &CorruptError{File: path, Offset: h.DataOffset + 4*i, Field: "data", Reason: err.Error()}
		}
		d.Write(buf[:k])
		if a != nil {
			for j := int64(0); j < k; j += 4 {
				a[i+j/4] = binary.LittleEndian.Uint32(buf[j:])
			}
		}
		i += k / 4
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return &CorruptError{File: path, Offset: h.DataOffset + 4*n, Field: "trailing", Reason: "bytes after the elements"}
	}
	if got := storage.FormatChecksum(d.Sum64()); got != checksum {
		return &CorruptError{File: path, Offset: h.DataOffset, Field: "data", Reason: fmt.Sprintf("checksum %s, remodel.json says %s", got, checksum)}
	}
	return nil
}
