package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/internal/namedir"
)

// Profile file names inside DIR/profile/<name>/.
const (
	ProfileDir            = "profile"
	FileProfileJSON       = "profile.json"
	FileSavedIOFeat       = "saved_io_feat.npy"
	FileSavedIOHistSample = "saved_io_hist_sample.npy"
	FileSavedIOHistGather = "saved_io_hist_gather.npy"
	FileNbrLookups        = "nbr_lookups.npy"
	FileHistAppear        = "hist_appear.npy"
	FileHistHits          = "hist_hits.npy"
	FileFeatSingleReads   = "feat_single_reads.npy"
	FileFeatHeldOut       = "saved_io_feat_heldout.npy"
)

// ProfilePath is the directory of profile name under dataset dir.
func ProfilePath(dir, name string) string { return filepath.Join(dir, ProfileDir, name) }

func (p *Profile) arrays() []namedArray {
	return []namedArray{{FileSavedIOFeat, &p.Feat}, {FileSavedIOHistSample, &p.HistSample}, {FileSavedIOHistGather, &p.HistGather}, {FileNbrLookups, &p.Nbr},
		{FileHistAppear, &p.HistAppear}, {FileHistHits, &p.HistHits}, {FileFeatSingleReads, &p.FeatSingle}, {FileFeatHeldOut, &p.FeatHeldOut}}
}

// optional reports whether array file name may be absent: the validity
// arrays of a profile written before the model existed (Staleness 0), the
// single-read counts of one written before the read model (no Reads), and
// the held-out counts of one written before them (HeldOutEpoch 0).
func (p *Profile) optional(name string) bool {
	switch name {
	case FileHistAppear, FileHistHits:
		return p.Meta.Staleness == 0
	case FileFeatSingleReads:
		return p.Meta.Reads == nil
	case FileFeatHeldOut:
		return p.Meta.HeldOutEpoch == 0
	}
	return false
}

// Save writes p to DIR/profile/<p.Meta.Name>/: the arrays as .npy
// uint32 [N] (streamed a block at a time, no copy of an array), then
// profile.json, each file atomically. An existing
// profile.json is removed first, so a crash never leaves a manifest
// describing arrays of another run, and so are the recounts saved from
// it (SaveRemodel).
func (p *Profile) Save(dir string) error {
	if !validName(p.Meta.Name) {
		return fmt.Errorf("%w: profile name %q", ErrInvalidOptions, p.Meta.Name)
	}
	out := ProfilePath(dir, p.Meta.Name)
	if err := prepareDir(out, FileProfileJSON); err != nil {
		return err
	}
	// Saved recounts belong to the profile they were counted from.
	if err := os.RemoveAll(filepath.Join(out, RemodelDir)); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	m := p.Meta
	var err error
	m.Files, err = writeArrays(out, p.arrays(), m.NumNodes, func(e namedArray) bool { return *e.a == nil && p.optional(e.name) })
	if err != nil {
		return err
	}
	if err := writeManifest(out, FileProfileJSON, m); err != nil {
		return err
	}
	p.Meta.Files = m.Files
	return nil
}

// ProfileNames lists the profiles saved in dataset dir (the
// subdirectories of its profile directory that hold a profile.json),
// sorted; none is an empty list.
func ProfileNames(dir string) ([]string, error) {
	names, err := namedir.List(dir, ProfileDir, FileProfileJSON)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	return names, nil
}

// ProfileFor is the profile of dataset dir that a command reads for name:
// name itself when it exists or was asked for (explicit: a missing one is
// then the caller's ErrNotFound to report), else the dataset's only
// profile (train saves its own as "train"), with stood saying so ("" when
// name stands).
func ProfileFor(dir, name string, explicit bool) (chosen, stood string) {
	exists := func(n string) bool {
		_, err := os.Stat(filepath.Join(ProfilePath(dir, n), FileProfileJSON))
		return err == nil
	}
	chosen, stood, _, _ = namedir.Pick("profile", name, explicit, exists, func() ([]string, error) { return ProfileNames(dir) })
	return chosen, stood
}

// LoadProfile reads the profile name of dataset dir and verifies every
// array against profile.json (dtype, shape, checksum). A missing profile
// wraps ErrNotFound; damage is a *CorruptError.
func LoadProfile(dir, name string) (*Profile, error) {
	return loadProfile(dir, name, nil)
}

// LoadProfileFeat reads only profile.json and the feature counts
// (Profile.Feat, saved_IO_feat) of the profile name of dataset dir,
// verified as LoadProfile verifies them: for callers that need one
// number per node, in a quarter of LoadProfile's memory.
func LoadProfileFeat(dir, name string) (*Profile, error) {
	return loadProfile(dir, name, func(file string) bool { return file == FileSavedIOFeat })
}

// loadProfile is LoadProfile restricted to the arrays want accepts (nil:
// all of them).
func loadProfile(dir, name string, want func(file string) bool) (*Profile, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%w: profile name %q", ErrInvalidOptions, name)
	}
	out := ProfilePath(dir, name)
	mp := filepath.Join(out, FileProfileJSON)
	b, err := os.ReadFile(mp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (run 'ssdgnn profile' first): %w", ErrNotFound, mp, err)
	}
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	m, err := ParseMeta(b, mp)
	if err != nil {
		return nil, err
	}
	p := &Profile{Meta: *m}
	for _, e := range p.arrays() {
		if want != nil && !want(e.name) {
			continue
		}
		fi := fileEntry(m.Files, e.name)
		if fi == nil && p.optional(e.name) {
			continue
		}
		if fi == nil {
			return nil, &CorruptError{File: mp, Field: "files", Reason: "no entry for " + e.name}
		}
		err := readArrayFile(filepath.Join(out, e.name), m.NumNodes, fi.Checksum, func() []uint32 {
			*e.a = make([]uint32, m.NumNodes)
			return *e.a
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ParseMeta parses and checks profile.json; path names it in errors.
func ParseMeta(b []byte, path string) (*Meta, error) {
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		ce := &CorruptError{File: path, Reason: err.Error()}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			ce.Offset = se.Offset
		case errors.As(err, &te):
			ce.Offset, ce.Field = te.Offset, te.Field
		}
		return nil, ce
	}
	bad := func(field, format string, args ...any) error {
		return &CorruptError{File: path, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case m.Format != "ssdgnn-profile":
		return nil, bad("format", "format %q, want ssdgnn-profile", m.Format)
	case m.Version != 1:
		return nil, bad("version", "version %d, want 1", m.Version)
	case m.NumNodes < 0:
		return nil, bad("num_nodes", "%d, want >= 0", m.NumNodes)
	case m.FeatRowBytes < 0:
		return nil, bad("feat_row_bytes", "%d, want >= 0", m.FeatRowBytes)
	case m.IDBytes != 4 && m.IDBytes != 8:
		return nil, bad("id_bytes", "%d, want 4 or 8", m.IDBytes)
	case !(m.Beta > 0):
		return nil, bad("beta", "%v, want > 0", m.Beta)
	case m.PresampleEpochs < 1:
		return nil, bad("presample_epochs", "%d, want >= 1", m.PresampleEpochs)
	case m.HeldOutEpoch != 0 && m.HeldOutEpoch != m.PresampleEpochs:
		return nil, bad("held_out_epoch", "%d, want 0 or presample_epochs (%d)", m.HeldOutEpoch, m.PresampleEpochs)
	}
	if r := m.Reads; r != nil {
		ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
		switch {
		case !ok(r.RandomReadsPerSec) || !ok(r.SeqBytesPerSec):
			return nil, bad("reads", "costs %v reads/s and %v bytes/s, want positive and finite", r.RandomReadsPerSec, r.SeqBytesPerSec)
		case r.Rows < 0 || r.BlockRows < 0 || r.Reads < 0 || r.BytesRead < 0 || r.SingleReads < 0 || r.SingleBytes < 0:
			return nil, bad("reads", "negative count")
		case r.Reads > r.Rows || r.SingleReads > r.Reads || r.SingleBytes > r.BytesRead:
			return nil, bad("reads", "%d reads of %d rows with %d single reads (%d of %d bytes): want single reads <= reads <= rows",
				r.Reads, r.Rows, r.SingleReads, r.SingleBytes, r.BytesRead)
		}
	}
	return &m, nil
}
