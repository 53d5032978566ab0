package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
)

// Replacing a partitioning (Options.Force) swaps a complete staged copy
// into place with two renames, and the directory names are the swap's
// journal. The writer holds the dataset's lock (package dirlock) for the
// whole run, so at most one swap is under way in a dataset, and every
// state a crash can leave names its own outcome:
//
//	state (partitions/)              meaning                   recovery
//	NAME, .NAME.new                  staged, before the swap   remove .NAME.new
//	.NAME.old, .NAME.new, no NAME    between the renames       .NAME.old back to NAME
//	NAME, .NAME.old                  committed                 remove .NAME.old
//
// The commit point is the second rename (.NAME.new to NAME): before it the
// old partitioning is the one, after it the new one. A rename that fails
// is undone at once (the old partitioning goes back to NAME); a kill
// leaves one of the states above. recoverSwaps resolves them all, for
// every name: every partition run does so first, and a reader that finds
// an old partitioning stranded between the renames does so when it can
// take the dataset's lock, else it reads that partitioning where it is
// (committedDir). Recovery is idempotent, so a kill during it is resolved
// by the next.

// renameDir is os.Rename; tests replace it to fail or kill at a rename.
var renameDir = os.Rename

// replaceNames are the directories beside dir that replacing it uses: the
// new partitioning while it is written, and the old one while it is moved
// out of the way. Their leading dot keeps them out of Names and outside
// every partitioning name (plainName).
func replaceNames(dir string) (staged, old string) {
	parent, base := filepath.Split(filepath.Clean(dir))
	return filepath.Join(parent, "."+base+".new"), filepath.Join(parent, "."+base+".old")
}

// prepareDir readies dir for a new partitioning and returns where to write
// it: dir itself, or, when dir holds a finished partitioning and force is
// set, the staging directory beside it that replaceDir moves into place
// once the new one is complete, so that an interrupted or failed --force
// leaves the old partitioning whole. It first finishes or undoes every
// interrupted replacement in the dataset (recoverSwaps). Without force a
// finished partitioning is ErrExists.
func prepareDir(dir string, force bool) (out string, err error) {
	if err := recoverSwaps(filepath.Dir(filepath.Clean(dir))); err != nil {
		return "", err
	}
	staged, _ := replaceNames(dir)
	mpath := filepath.Join(dir, ManifestName)
	if _, err := os.Stat(mpath); err == nil {
		if !force {
			return "", fmt.Errorf("%w: %s", ErrExists, dir)
		}
		// The complete partitioning stays until the new one is.
		if err := os.MkdirAll(staged, 0o755); err != nil {
			return "", fmt.Errorf("partition: %w", err)
		}
		return staged, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("partition: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("partition: %w", err)
	}
	_, err = atomicfile.CleanTemps(dir)
	return dir, err
}

// replaceDir moves the complete partitioning staged (prepareDir) over
// dir: dir aside to .NAME.old, staged into place (the commit point), the
// old one removed. A failed rename before the commit point puts the old
// partitioning back and removes staged, so the error leaves dir as it was;
// a failure after it (syncing, removing the old copy) is logged, since the
// new partitioning is in place, and the next run removes what is left.
func replaceDir(dir, staged string, log *slog.Logger) error {
	_, old := replaceNames(dir)
	if err := renameDir(dir, old); err != nil {
		_ = os.RemoveAll(staged)
		return fmt.Errorf("partition: replacing %s: %w (the old partitioning is as it was)", dir, err)
	}
	if err := renameDir(staged, dir); err != nil {
		if berr := renameDir(old, dir); berr != nil {
			return fmt.Errorf("partition: replacing %s: %w; moving the old partitioning back from %s: %v (readers use it there; the next partition run moves it back)",
				dir, err, old, berr)
		}
		_ = os.RemoveAll(staged)
		return fmt.Errorf("partition: replacing %s: %w (the old partitioning is as it was)", dir, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		log.Warn("partition: syncing the partitions directory after the swap", "err", err)
	}
	if err := os.RemoveAll(old); err != nil {
		log.Warn("partition: removing the replaced partitioning (the next run removes it)", "dir", old, "err", err)
	}
	return nil
}

// swapName splits a staging or old-copy directory name ".NAME.new" or
// ".NAME.old" into NAME and its suffix; ok is false for any other name.
func swapName(entry string) (name, suffix string, ok bool) {
	if !strings.HasPrefix(entry, ".") {
		return "", "", false
	}
	for _, suf := range []string{".new", ".old"} {
		if n, found := strings.CutSuffix(entry[1:], suf); found && plainName(n) {
			return n, suf, true
		}
	}
	return "", "", false
}

func hasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestName))
	return err == nil
}

// recoverSwaps resolves every interrupted replacement in the partitions
// directory parts (see the table above): an old copy stranded between the
// renames goes back to its name, and every other .NAME.old and .NAME.new
// is removed. The caller holds the dataset's lock.
func recoverSwaps(parts string) error {
	ents, err := os.ReadDir(parts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	fail := func(err error) error {
		return fmt.Errorf("partition: finishing an interrupted --force in %s: %w", parts, err)
	}
	var stale []string
	for _, e := range ents { // every .old before any .new is removed
		name, suf, ok := swapName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(parts, e.Name())
		if suf == ".new" {
			stale = append(stale, p)
			continue
		}
		dir := filepath.Join(parts, name)
		if hasManifest(dir) || !hasManifest(p) {
			stale = append(stale, p) // committed, or not a whole partitioning
			continue
		}
		// Between the renames: the old partitioning is the one.
		if err := os.RemoveAll(dir); err != nil { // an interrupted plain run's files, if any
			return fail(err)
		}
		if err := renameDir(p, dir); err != nil {
			return fail(err)
		}
		if err := atomicfile.SyncDir(parts); err != nil {
			return fail(err)
		}
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return fail(err)
		}
	}
	return nil
}

// stranded reports whether partitioning name of the dataset in datasetDir
// is stranded between a swap's renames: no committed NAME, a complete
// .NAME.old.
func stranded(datasetDir, name string) bool {
	dir := Dir(datasetDir, name)
	_, old := replaceNames(dir)
	return !hasManifest(dir) && hasManifest(old)
}

// committedDir is the directory that holds committed partitioning name of
// the dataset in datasetDir (a plain name). A partitioning stranded
// between a swap's renames is moved back to its name when the dataset's
// lock can be taken; else (a writer holds the lock, which recovers it
// itself, or the dataset is read-only) it is read where it is.
func committedDir(datasetDir, name string) string {
	dir := Dir(datasetDir, name)
	if !stranded(datasetDir, name) {
		return dir
	}
	if lk, err := dirlock.Acquire(datasetDir); err == nil {
		_ = recoverSwaps(filepath.Join(datasetDir, DirName))
		_ = lk.Release()
	}
	if !stranded(datasetDir, name) {
		return dir
	}
	_, old := replaceNames(dir)
	return old
}

// strandedNames lists the partitionings of the dataset in datasetDir that
// are stranded between a swap's renames.
func strandedNames(datasetDir string) []string {
	ents, err := os.ReadDir(filepath.Join(datasetDir, DirName))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if name, suf, ok := swapName(e.Name()); ok && suf == ".old" && e.IsDir() && stranded(datasetDir, name) {
			names = append(names, name)
		}
	}
	return names
}

// Leftovers lists the directories under DIR/partitions that an
// interrupted or failed replacement left (".NAME.new", ".NAME.old"). None
// is a partitioning; the next partition run removes them, and an old copy
// stranded between the swap's renames is read as NAME until then.
func Leftovers(datasetDir string) []string {
	ents, err := os.ReadDir(filepath.Join(datasetDir, DirName))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if _, _, ok := swapName(e.Name()); ok && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
