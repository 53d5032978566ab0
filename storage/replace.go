package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/pidstamp"
)

// Replacing a dataset (CreateOptions.Force) swaps a complete staged
// dataset into the dataset directory in two journaled phases, so that a
// swap that fails or is killed half way is finished later rather than
// lost:
//
//   - The journal (swapJournal, in the staging directory, written
//     atomically) says the swap began and lists the old arrays the new
//     manifest does not list. From then on the staged dataset is the one
//     to keep: Abort leaves it, and the next Create in the directory
//     finishes the swap (recoverStaging).
//   - "clearing": the old dataset.json is removed (the directory stops
//     being a dataset), then the old derived directories. The journal then
//     says "moving".
//   - "moving": every staged entry is renamed over its namesake, the old
//     arrays listed are removed, and the new dataset.json is renamed in
//     last; the staging directory goes.
//
// Each phase is idempotent from its start, and the phase is recorded
// before the next begins, so finishing from the journal never removes
// what the swap already moved in.

// swapJournal is the journal's name inside the staging directory.
const swapJournal = ".swap.json"

type swapState struct {
	Phase  string   `json:"phase"`  // "clearing" or "moving"
	Remove []string `json:"remove"` // old arrays the new manifest does not list
}

// swap moves b's complete staged dataset (manifest m) into the dataset
// directory.
func (b *Builder) swap(m *Manifest) error {
	st := swapState{Phase: "clearing"}
	if old, err := LoadManifest(b.final); err == nil {
		b.mu.Lock()
		for _, f := range old.Files {
			if _, ok := b.mu.files[f.Name]; !ok {
				st.Remove = append(st.Remove, f.Name)
			}
		}
		b.mu.Unlock()
	}
	if b.staleDevice(m) {
		// Probed for rows of another size: it would price the new
		// features' reads wrongly, and training refuses it.
		st.Remove = append(st.Remove, FileDevice)
	}
	if err := writeSwap(b.dir, st); err != nil {
		return fmt.Errorf("storage: replacing the dataset in %s: %w (the old dataset is untouched)", b.final, err)
	}
	b.swapping = true
	if err := finishSwap(b.final, b.dir, st); err != nil {
		return err
	}
	b.dir, b.staged, b.swapping = b.final, false, false
	return nil
}

// staleDevice reports whether the dataset directory's device.json (which
// survives a replacement) was probed for feature rows of another size
// than those of the staged dataset (manifest m), and m brings none.
func (b *Builder) staleDevice(m *Manifest) bool {
	if _, err := os.Stat(filepath.Join(b.dir, FileDevice)); err == nil {
		return false
	}
	p, err := ReadDeviceProfile(b.final)
	if err != nil {
		return false // none, or damaged: training says so
	}
	return p.RowBytes != m.FeatRowBytes()
}

func writeSwap(staging string, st swapState) error {
	js, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(staging, swapJournal), js)
}

// finishSwap runs the swap of staging into final from st's phase.
func finishSwap(final, staging string, st swapState) error {
	fail := func(err error) error {
		return fmt.Errorf("storage: replacing the dataset in %s: %w; the new dataset is complete in %s, and the next gen, import or relabel into %s finishes moving it in (until then %s is not a dataset)",
			final, err, staging, final, final)
	}
	if st.Phase == "clearing" {
		if err := os.Remove(filepath.Join(final, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
		if err := atomicfile.SyncDir(final); err != nil {
			return fail(err)
		}
		for _, d := range derivedDirs {
			if err := os.RemoveAll(filepath.Join(final, d)); err != nil {
				return fail(err)
			}
		}
		st.Phase = "moving"
		if err := writeSwap(staging, st); err != nil {
			return fail(err)
		}
	}
	ents, err := os.ReadDir(staging)
	if err != nil {
		return fail(err)
	}
	for _, e := range ents {
		if e.Name() == ManifestName || e.Name() == swapJournal || atomicfile.IsTemp(e.Name()) || strings.HasPrefix(e.Name(), ".") {
			// A temporary file of a killed writer, or a writer's hidden
			// scratch directory (an import's .import-tmp-*: no dataset
			// entry starts with "."), goes with the staging directory.
			continue
		}
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(final, e.Name())); err != nil {
			return fail(err)
		}
	}
	for _, name := range st.Remove {
		if err := os.Remove(filepath.Join(final, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
	}
	if err := atomicfile.SyncDir(final); err != nil {
		return fail(err)
	}
	if err := os.Rename(filepath.Join(staging, ManifestName), filepath.Join(final, ManifestName)); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(final); err != nil {
		return fail(err)
	}
	_ = os.RemoveAll(staging)
	return nil
}

// recoverStaging deals with the staging directories in dir whose process
// is gone: one whose swap began (it has a journal) is finished, one whose
// swap finished but was not removed is removed, the others (a run killed
// before its dataset was complete) are removed. It returns the staging
// directories whose swap it finished.
func recoverStaging(dir string) (finished []string, err error) {
	for _, name := range stagingDirs(dir) {
		if !pidstamp.Gone(strings.TrimPrefix(name, stagingPrefix)) {
			continue
		}
		staging := filepath.Join(dir, name)
		js, err := os.ReadFile(filepath.Join(staging, swapJournal))
		if errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(staging)
			continue
		}
		_, serr := os.Stat(filepath.Join(staging, ManifestName))
		if _, ferr := os.Stat(filepath.Join(dir, ManifestName)); err == nil && errors.Is(serr, fs.ErrNotExist) && ferr == nil {
			_ = os.RemoveAll(staging) // the swap's last rename was done
			continue
		}
		var st swapState
		if err == nil {
			err = json.Unmarshal(js, &st)
		}
		if err == nil {
			err = st.check(staging)
		}
		if err != nil {
			return finished, fmt.Errorf("storage: %s: the journal of an interrupted replacement: %w; it cannot be finished from it: the new dataset's files are in %s (some may be in %s already)",
				filepath.Join(staging, swapJournal), err, staging, dir)
		}
		if err := finishSwap(dir, staging, st); err != nil {
			return finished, err
		}
		finished = append(finished, staging)
	}
	return finished, nil
}

// check refuses a journal that finishSwap must not follow: an unknown
// phase, or a name to remove that is not a plain dataset file name (an
// array or device.json) or is an array of the staged dataset.
func (st *swapState) check(staging string) error {
	if st.Phase != "clearing" && st.Phase != "moving" {
		return fmt.Errorf("phase %q, want clearing or moving", st.Phase)
	}
	m, err := LoadManifest(staging)
	if err != nil {
		return fmt.Errorf("the staged manifest: %w", err)
	}
	for i, name := range st.Remove {
		if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".npy") || name == FileDevice) {
			return fmt.Errorf("remove[%d] %q is not the name of a dataset's file", i, name)
		}
		if m.File(name) != nil {
			return fmt.Errorf("remove[%d] %q is an array of the new dataset", i, name)
		}
	}
	return nil
}

// PendingReplacement names the staging directory in dir whose swap began
// and was not finished, "" when there is none: dir then lacks its
// dataset.json until a gen, import or relabel into it finishes the swap.
func PendingReplacement(dir string) string {
	for _, name := range stagingDirs(dir) {
		if _, err := os.Stat(filepath.Join(dir, name, swapJournal)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	return ""
}

// stagingDirs lists the staging directories in dir.
func stagingDirs(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), stagingPrefix) {
			names = append(names, e.Name())
		}
	}
	return names
}
