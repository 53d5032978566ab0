// Package exportdir prepares the output directory of an export and writes
// its files atomically: an export is complete only once its metadata file
// exists, so it is written last, and it is removed first when an export is
// overwritten.
//
// Invariants: Prepare never removes a file it does not own (the caller
// lists the names it owns); every file is written under a temporary name,
// fsynced and renamed (package atomicfile), hard links included.
package exportdir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/storage"
)

// ErrExists is wrapped when the output holds a complete export (its
// metadata file exists) or foreign files, and force is not set.
var ErrExists = errors.New("export: output directory exists (use --force to overwrite)")

// ErrDataset is wrapped when the output directory is an ssdgnn dataset
// (it has dataset.json): an export never writes into one, even with
// force, whose owned entries may be the dataset's own (a DistDGL
// export's partitions/ is where a dataset keeps its partitionings).
var ErrDataset = errors.New("export: output directory is an ssdgnn dataset")

// Prepare makes out ready for an export whose metadata file is meta and
// whose other entries (files or directories, relative to out) are owned.
// A complete export (meta present) is refused unless force is set; with
// force its metadata is removed first, then every owned entry. A directory
// holding entries that are neither owned nor temporary files is refused
// unless force is set (those entries are then left alone); a dataset
// directory (dataset.json) is refused even with force (ErrDataset). An
// interrupted export (owned entries, no metadata) is cleaned without
// force.
//
// out may be neither the dataset directory src, nor inside it, nor contain
// it (outpath.CheckDir): force would remove the dataset's own files.
func Prepare(src, out, meta string, owned []string, force bool) error {
	if err := outpath.CheckDir("OUT", out, src); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(out, 0o755)
	case err != nil:
		return fmt.Errorf("export: %w", err)
	}
	for _, e := range ents {
		if e.Name() == storage.ManifestName {
			return fmt.Errorf("%w: %s has %s; an export never writes into a dataset, even with --force (it would remove the dataset's entries of the same names): give OUT a directory of its own",
				ErrDataset, out, storage.ManifestName)
		}
	}
	own := map[string]bool{meta: true}
	for _, o := range owned {
		own[o] = true
	}
	complete := false
	for _, e := range ents {
		switch {
		case e.Name() == meta:
			complete = true
		case own[e.Name()] || atomicfile.IsTemp(e.Name()) || e.Name() == dirlock.Name:
			// The writer's lock (the command holds it) is not content.
		default:
			if !force {
				return fmt.Errorf("%w: %s holds %s, which an export does not write", ErrExists, out, e.Name())
			}
		}
	}
	if complete {
		if !force {
			return fmt.Errorf("%w: %s", ErrExists, out)
		}
		if err := os.Remove(filepath.Join(out, meta)); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := atomicfile.SyncDir(out); err != nil {
			return err
		}
	}
	for _, o := range owned {
		if err := os.RemoveAll(filepath.Join(out, o)); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	_, err = atomicfile.CleanTemps(out)
	return err
}

// Abandon removes what a failed or interrupted export wrote into out
// after Prepare: its metadata file meta, every owned entry and temporary
// file. Prepare left none of them, so they are this run's. The metadata
// goes first: an export fails with its metadata in place when the
// directory's fsync after the metadata's rename fails (atomicfile), and
// removing the entries it names beside it would leave a complete-looking
// export without its files. out itself is left (its lock's release
// removes it when the command made it and it is empty). Errors are
// ignored: the export's own error is the one to report.
func Abandon(out, meta string, owned []string) {
	_ = os.Remove(filepath.Join(out, meta))
	for _, o := range owned {
		_ = os.RemoveAll(filepath.Join(out, o))
	}
	_, _ = atomicfile.CleanTemps(out)
}

// LinkOrCopy makes dst a file with the content of src: a hard link when
// src and dst share a file system (linked is true), else a streaming copy.
// Either way dst appears atomically (temporary name, fsync, rename).
// A src that is a symbolic link (a dataset sharing another's features)
// is followed: link(2) would link the symlink itself, and a relative one
// would then name nothing from dst's directory.
func LinkOrCopy(ctx context.Context, src, dst string) (linked bool, err error) {
	target, err := filepath.EvalSymlinks(src)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	tmp := dst + ".tmp-link" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.Link(target, tmp); err == nil {
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return false, fmt.Errorf("export: %w", err)
		}
		return true, atomicfile.SyncDir(filepath.Dir(dst))
	}
	return false, Copy(ctx, src, dst)
}

// Copy streams src into dst atomically with a fixed buffer.
func Copy(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer in.Close()
	af, err := atomicfile.Create(dst)
	if err != nil {
		return err
	}
	defer af.Abort()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := af.Write(buf[:n]); err != nil {
				return fmt.Errorf("export: copy %s to %s: %w", src, dst, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("export: copy %s to %s: %w", src, dst, rerr)
		}
	}
	return af.Commit()
}
