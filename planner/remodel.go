package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
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
func (p *Profile) remodelArrays() []namedArray {
	return []namedArray{{FileSavedIOFeat, &p.Feat}, {FileFeatSingleReads, &p.FeatSingle}, {FileFeatHeldOut, &p.FeatHeldOut}}
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
	if err := prepareDir(out, FileRemodelJSON); err != nil {
		return err
	}
	m := remodelMeta{Format: "ssdgnn-remodel", Version: 1, Key: key, NumNodes: p.Meta.NumNodes, Reads: p.Meta.Reads,
		SumFeat: p.Meta.SumFeat, SumFeatSingle: p.Meta.SumFeatSingle, SumFeatHeldOut: p.Meta.SumFeatHeldOut}
	var err error
	m.Files, err = writeArrays(out, p.remodelArrays(), p.Meta.NumNodes, func(e namedArray) bool { return *e.a == nil })
	if err != nil {
		return err
	}
	if err := writeManifest(out, FileRemodelJSON, m); err != nil {
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
			fi := fileEntry(m.Files, e.name)
			switch {
			case (fi == nil) != (*e.a == nil):
				return false, bad("files", "%s: saved %v, profile has it %v", e.name, fi != nil, *e.a != nil)
			case fi == nil:
				continue
			}
			var dst func() []uint32
			if fill {
				dst = func() []uint32 { return *e.a }
			}
			if err := readArrayFile(filepath.Join(out, e.name), int64(len(*e.a)), fi.Checksum, dst); err != nil {
				return false, err
			}
		}
	}
	p.Meta.Reads = m.Reads
	p.Meta.SumFeat, p.Meta.SumFeatSingle, p.Meta.SumFeatHeldOut = m.SumFeat, m.SumFeatSingle, m.SumFeatHeldOut
	return true, nil
}
