package cliflags

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Output is an output file flag and its value ("" when not given).
// MayBeInput says the command may replace one of its inputs with it (a
// checkpoint that --resume reads, replaced atomically after it is read).
type Output struct {
	Flag, Path string
	MayBeInput bool
	// Appends: the command appends to the file (train --metrics), so it
	// writes through links: a file with other hard links is refused.
	Appends bool
}

// Input is a file the command reads, and the flag that names it, for
// the message when an output would replace it ("" when not given).
type Input struct {
	Flag, Path string
}

// CheckOutputs checks, before a command on the dataset in dir (manifest
// m) does any work, the output files it was given: each one's directory
// exists, none would replace a file of the dataset (storage.CheckOutput)
// or of another dataset the output lies in, or, unless MayBeInput, one
// of inputs (files the command reads, such as a checkpoint or a list of
// nodes), and no two flags name the same file.
func CheckOutputs(dir string, m *storage.Manifest, inputs []Input, outs ...Output) error {
	return checkOutputs(dir, m, inputs, outs)
}

// CheckOutputFiles is CheckOutputs for a command that works on no
// dataset (bench capped --report): every dataset's files are refused as
// another dataset's are. Before it, bench capped --report checked only
// that the report's directory existed, and run as root --report
// /dev/null turned /dev/null into a regular file, --report d/dataset.json
// replaced a dataset's manifest, and --report DIR failed after the
// command had run.
func CheckOutputFiles(inputs []Input, outs ...Output) error {
	return checkOutputs("", nil, inputs, outs)
}

// checkOutputs is CheckOutputs; dir "" is no dataset of the command's own.
func checkOutputs(dir string, m *storage.Manifest, inputs []Input, outs []Output) error {
	for i, o := range outs {
		if o.Path == "" {
			continue
		}
		if err := outpath.CheckParent(o.Flag, o.Path); err != nil {
			return err
		}
		if err := writable(o); err != nil {
			return err
		}
		if dir != "" {
			if err := storage.CheckOutput(dir, m, o.Flag, o.Path); err != nil {
				return err
			}
		}
		if err := otherDataset(dir, o); err != nil {
			return err
		}
		if o.Appends {
			if st, err := os.Stat(o.Path); err == nil {
				if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
					return fmt.Errorf("%w: %s %s has %d hard links: appending to it writes to every one of them; name another file",
						outpath.ErrInput, o.Flag, o.Path, sys.Nlink)
				}
			}
		}
		if !o.MayBeInput {
			for _, in := range inputs {
				if in.Path == "" {
					continue
				}
				if err := outpath.CheckFile(o.Flag, o.Path, "the "+in.Flag+" file, an input of this command", []string{in.Path}); err != nil {
					return err
				}
			}
		}
		for _, p := range outs[:i] {
			if p.Path != "" && outpath.Same(p.Path, o.Path) {
				return fmt.Errorf("%s and %s both name %s: give each its own file", p.Flag, o.Flag, o.Path)
			}
		}
	}
	return nil
}

// CheckOutputDir refuses an output directory (the value of flag, such as
// train's --checkpoint) that is a dataset's directory: its files would
// land among the dataset's, and its lock is the dataset's writer lock
// (`train --checkpoint d/cora` on another dataset held cora's lock, and
// `partition d/cora` was refused as in use). home is the dataset the
// command works on: the message suggests a directory under it.
//
// It also refuses, naming the flag, a dir that exists and is not a
// directory ("dirlock: open afile/.lock: not a directory" named none) and
// one in /dev, /proc or /sys: train --checkpoint /dev left /dev/.lock
// behind before the checkpoint's own check refused it.
func CheckOutputDir(flag, dir, home string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("%s %s is not a directory: name a directory (made when missing)", flag, dir)
	}
	if d := systemDir(filepath.Join(dir, "x")); d != "" {
		return fmt.Errorf("%s %s lies in %s, a file system of devices or kernel state: name a directory elsewhere", flag, dir, d)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.ManifestName)); err == nil {
		return fmt.Errorf("%w: %s %s is a dataset directory: name another (the default is %s)",
			outpath.ErrInput, flag, dir, filepath.Join(home, "checkpoints"))
	}
	return nil
}

// writable refuses, before any work, an output that names a directory or
// that cannot be written: a file replaced atomically needs a temporary
// file beside it, so its directory must take one; a file appended to must
// itself be writable. `train --plot DIR` trained to the end and then
// failed ("rename plot.tmp-N plot: file exists"), and a --metrics
// directory was refused as a file with hard links.
func writable(o Output) error {
	st, err := os.Stat(o.Path)
	if err == nil && st.IsDir() {
		return fmt.Errorf("%s %s is a directory: name a file", o.Flag, o.Path)
	}
	// Replaced atomically, an output is renamed over what the path names:
	// run as root, infer --out /dev/stdout turned the /dev/stdout link
	// into a regular file of predictions, for every process on the
	// machine (--out /dev/null would have done so to /dev/null).
	if !o.Appends {
		if d := systemDir(o.Path); d != "" {
			return fmt.Errorf("%s %s lies in %s, a file system of devices or kernel state: the output is written to a temporary file renamed over the name, which would replace that entry; name a file elsewhere", o.Flag, o.Path, d)
		}
		if err == nil && !st.Mode().IsRegular() {
			return fmt.Errorf("%s %s is not a regular file (%s): the output is written to a temporary file renamed over it, which would replace it; name a file",
				o.Flag, o.Path, storage.FileKind(st.Mode()))
		}
	}
	target := filepath.Dir(o.Path)
	if o.Appends && err == nil {
		target = o.Path
	}
	if err := unix.Access(target, unix.W_OK); err != nil {
		return fmt.Errorf("%s %s: %s is not writable: %w", o.Flag, o.Path, target, err)
	}
	return nil
}

// systemDir returns the system directory (/dev, /proc, /sys) that path's
// directory is, or lies in, as written or where links lead; "" when none.
func systemDir(path string) string {
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		dirs = append(dirs, real)
	}
	for _, d := range dirs {
		d, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		for _, sys := range []string{"/dev", "/proc", "/sys"} {
			if d == sys || strings.HasPrefix(d, sys+"/") {
				return sys
			}
		}
	}
	return ""
}

// otherDataset refuses an output that would replace a file of a dataset
// other than the one in dir: a dataset's files lie at most two levels
// below it (partitions/NAME/, profile/NAME/), so the output's directory
// and its two parents are looked at, as written and where links lead (a
// symbolic link to a file, or to a directory on the way, of another
// dataset).
func otherDataset(dir string, o Output) error {
	starts := []string{filepath.Dir(o.Path)}
	if real, err := filepath.EvalSymlinks(o.Path); err == nil {
		starts = append(starts, filepath.Dir(real))
	} else if real, err := filepath.EvalSymlinks(filepath.Dir(o.Path)); err == nil {
		starts = append(starts, real)
	}
	for _, d := range starts {
		for range 3 {
			if _, err := os.Stat(filepath.Join(d, storage.ManifestName)); err == nil && (dir == "" || !outpath.Same(d, dir)) {
				m, err := storage.LoadManifest(d)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					m = nil // a damaged manifest: its fixed names are still protected
				}
				if err := storage.CheckForeignOutput(d, m, o.Flag, o.Path); err != nil {
					return err
				}
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return nil
}
