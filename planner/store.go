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
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
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
// profile.json, each file atomically. The new profile is written whole
// beside the old one, in DIR/profile/.NAME.new, and then put in its place
// (swapInDir), so that a crash, a kill or a write error while saving
// leaves the profile that was there whole. (Before, profile.json was
// removed first and the arrays rewritten in place: a save cut short lost
// the old profile.) The files of the old directory that are no part of a
// profile, such as the plan.json 'ssdgnn plan' writes beside it, are
// carried over; its saved recounts (SaveRemodel) are not, since they were
// counted from the old profile.
func (p *Profile) Save(dir string) error {
	if !validName(p.Meta.Name) {
		return fmt.Errorf("%w: profile name %q", ErrInvalidOptions, p.Meta.Name)
	}
	out := ProfilePath(dir, p.Meta.Name)
	staged, old := profileSwapNames(out)
	if err := recoverProfileSwap(out, staged, old); err != nil {
		return err
	}
	if err := os.MkdirAll(staged, 0o755); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	m := p.Meta
	err := func() error {
		var err error
		m.Files, err = writeArrays(staged, p.arrays(), m.NumNodes, func(e namedArray) bool { return *e.a == nil && p.optional(e.name) })
		if err != nil {
			return err
		}
		if err := writeManifest(staged, FileProfileJSON, m); err != nil {
			return err
		}
		if err := carryOver(out, staged); err != nil {
			return err
		}
		return swapInDir(out, staged, old)
	}()
	if err != nil {
		_ = os.RemoveAll(staged)
		return err
	}
	p.Meta.Files = m.Files
	return nil
}

// profileSwapNames are the directories beside profile directory out that
// saving it uses: the new profile while it is written (and, after an
// exchange, the old one until it is removed), and the old one moved aside
// where the file system cannot exchange two directories. The leading dot
// keeps them out of ProfileNames.
func profileSwapNames(out string) (staged, old string) {
	parent, base := filepath.Split(filepath.Clean(out))
	return filepath.Join(parent, "."+base+".new"), filepath.Join(parent, "."+base+".old")
}

// recoverProfileSwap resolves what an interrupted save left: a staged or
// exchanged-out copy (.NAME.new) is removed, and an old profile moved
// aside (.NAME.old) goes back to its name when none took it, else is
// removed. The caller holds the dataset's lock.
func recoverProfileSwap(out, staged, old string) error {
	if err := os.RemoveAll(staged); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if _, err := os.Stat(filepath.Join(old, FileProfileJSON)); err == nil {
		if _, err := os.Stat(filepath.Join(out, FileProfileJSON)); errors.Is(err, fs.ErrNotExist) {
			if err := os.RemoveAll(out); err != nil {
				return fmt.Errorf("planner: %w", err)
			}
			if err := os.Rename(old, out); err != nil {
				return fmt.Errorf("planner: %w", err)
			}
		}
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	return nil
}

// profileFile reports whether name is one of a profile's own files (its
// manifest, an array, the saved recounts or a temporary file).
func profileFile(name string) bool {
	if name == FileProfileJSON || name == RemodelDir || atomicfile.IsTemp(name) {
		return true
	}
	for _, e := range (&Profile{}).arrays() {
		if e.name == name {
			return true
		}
	}
	return false
}

// carryOver links (or, where links fail, copies) every regular file of
// the old profile directory out that is no part of a profile into staged.
// The old directory keeps its own until the swap, so nothing is lost
// whatever stops the save.
func carryOver(out, staged string) error {
	ents, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	for _, e := range ents {
		if profileFile(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		src, dst := filepath.Join(out, e.Name()), filepath.Join(staged, e.Name())
		if err := os.Link(src, dst); err == nil {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		if err := atomicfile.WriteFile(dst, b); err != nil {
			return fmt.Errorf("planner: %w", err)
		}
	}
	return nil
}

// exchangeDirs atomically exchanges directories a and b (renameat2
// RENAME_EXCHANGE); tests replace it to take the fallback.
var exchangeDirs = func(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// swapInDir puts the complete profile staged in place of out. With an
// old profile there, one atomic exchange swaps the two directories (the
// commit point), then the old one, now at staged, is removed; a failure
// to remove it leaves it for the next save. Where the file system cannot
// exchange directories, out is moved aside to old first and staged
// renamed into place: a crash between the two renames leaves the old
// profile at old, which the next save moves back (recoverProfileSwap).
func swapInDir(out, staged, old string) error {
	parent := filepath.Dir(filepath.Clean(out))
	err := exchangeDirs(staged, out)
	switch {
	case err == nil:
		_ = atomicfile.SyncDir(parent)
		_ = os.RemoveAll(staged)
		return nil
	case errors.Is(err, unix.ENOENT): // no old profile
		if err := os.Rename(staged, out); err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		return atomicfile.SyncDir(parent)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
	default:
		return fmt.Errorf("planner: replacing %s: %w (the old profile is as it was)", out, err)
	}
	if err := os.Rename(out, old); errors.Is(err, fs.ErrNotExist) { // no old profile
		if err := os.Rename(staged, out); err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		return atomicfile.SyncDir(parent)
	} else if err != nil {
		return fmt.Errorf("planner: replacing %s: %w (the old profile is as it was)", out, err)
	}
	if err := os.Rename(staged, out); err != nil {
		if berr := os.Rename(old, out); berr != nil {
			return fmt.Errorf("planner: replacing %s: %w; moving the old profile back from %s: %v (the next save moves it back)", out, err, old, berr)
		}
		return fmt.Errorf("planner: replacing %s: %w (the old profile is as it was)", out, err)
	}
	_ = atomicfile.SyncDir(parent)
	_ = os.RemoveAll(old)
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
		// Name the profiles that are there: with several and no
		// "default", plan's message said only "run 'ssdgnn profile'".
		if names, _ := ProfileNames(dir); len(names) > 0 {
			return nil, fmt.Errorf("%w: %s (this dataset's profiles: %s; choose one by name (plan --profile NAME, train --profile-name NAME), or run 'ssdgnn profile --name %s'): %w",
				ErrNotFound, mp, strings.Join(names, ", "), name, err)
		}
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
