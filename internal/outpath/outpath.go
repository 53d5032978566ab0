// Package outpath keeps a command's outputs off its inputs: an output
// path that names one of the command's input files (the same file, through
// any symbolic or hard link), or a directory that contains an input or
// lies inside one, is refused before anything is written.
//
// Paths are compared after making them absolute and resolving the
// symbolic links of their longest existing prefix, so "d/../d/x", a link
// to d and d itself compare equal. Files are compared with os.SameFile.
package outpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
)

// ErrInput is wrapped by every refusal.
var ErrInput = errors.New("output would overwrite an input")

// resolve is path made absolute, with the symbolic links of its longest
// existing prefix resolved.
func resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	rest := ""
	for p := abs; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// Within reports whether path is dir or lies inside it.
func Within(dir, path string) bool {
	rel, err := filepath.Rel(resolve(dir), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// CheckDir refuses an output directory out (the value of flag) that is
// the input directory in, lies inside it, or contains it.
func CheckDir(flag, out, in string) error {
	if err := CheckIsDir(flag, out); err != nil {
		return err
	}
	switch {
	case resolve(in) == resolve(out):
		return fmt.Errorf("%w: %s %s is the input directory %s; write it elsewhere", ErrInput, flag, out, in)
	case Within(in, out):
		return fmt.Errorf("%w: %s %s lies inside %s; write it elsewhere", ErrInput, flag, out, in)
	case Within(out, in):
		return fmt.Errorf("%w: %s %s contains %s; write it elsewhere", ErrInput, flag, out, in)
	}
	return nil
}

// CheckIsDir refuses an output directory out (the value of flag) that
// exists and is not a directory; one that does not exist is made later.
func CheckIsDir(flag, out string) error {
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return fmt.Errorf("%w: %s %s is a file, not a directory: name a directory (it is made if missing)", ErrInput, flag, out)
	}
	return nil
}

// CheckFile refuses an output file out (the value of flag) that is an
// existing file among inputs, or lies inside one of dirs. what names the
// inputs in the message ("a file of dataset d"). An input that does not
// exist cannot be overwritten and is skipped.
func CheckFile(flag, out, what string, inputs []string, dirs ...string) error {
	for _, d := range dirs {
		if Within(d, out) {
			return fmt.Errorf("%w: %s %s lies inside %s, %s; write it elsewhere", ErrInput, flag, out, d, what)
		}
	}
	so, err := os.Stat(out)
	if err != nil {
		return nil // a new file replaces nothing
	}
	for _, in := range inputs {
		if si, err := os.Stat(in); err == nil && os.SameFile(so, si) {
			if filepath.Clean(in) == filepath.Clean(out) {
				return fmt.Errorf("%w: %s %s is %s; write it elsewhere", ErrInput, flag, out, what)
			}
			return fmt.Errorf("%w: %s %s is %s, %s; write it elsewhere", ErrInput, flag, out, in, what)
		}
	}
	return nil
}

// CheckParent refuses an output file path (the value of flag) whose
// directory does not exist or is not a directory, or whose name is too
// long to be written under a temporary name (atomicfile.MaxNameBytes), so
// that a command fails before its work rather than after it.
func CheckParent(flag, path string) error {
	if n := len(filepath.Base(path)); n > atomicfile.MaxNameBytes {
		return fmt.Errorf("%s %s: the file name has %d bytes, at most %d can be written (its temporary name while it is written adds up to %d to the 255 a file system allows)",
			flag, path, n, atomicfile.MaxNameBytes, 255-atomicfile.MaxNameBytes)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: directory %s: %w", flag, path, dir, err)
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// Same reports whether paths a and b name the same file: the same path
// once resolved, or (both existing) the same file.
func Same(a, b string) bool {
	if resolve(a) == resolve(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
