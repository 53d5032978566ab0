package outpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
)

func TestCheckDir(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "d")
	if err := os.MkdirAll(filepath.Join(in, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out  string
		want string // "" accepted
	}{
		{in, "is the input directory"},
		{in + "/../d", "is the input directory"},
		{link, "is the input directory"},
		{filepath.Join(in, "sub"), "lies inside"},
		{filepath.Join(link, "new", "deeper"), "lies inside"},
		{root, "contains"},
		{filepath.Join(root, "other"), ""},
		{filepath.Join(root, "d2"), ""}, // a sibling whose name extends d's
	} {
		err := CheckDir("OUT", c.out, in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.out, err)
		case c.want != "" && (!errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrInput with %q", c.out, err, c.want)
		}
	}
}

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.npy")
	if err := os.WriteFile(in, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	hard, soft := filepath.Join(dir, "hard.npy"), filepath.Join(dir, "soft.npy")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in, soft); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out  string
		want string
	}{
		{in, "--out " + in + " is an input"},
		{hard, "is " + in},
		{soft, "is " + in},
		{filepath.Join(dir, "new.npy"), ""},
		{filepath.Join(dir, "missing.npy"), ""},
	} {
		err := CheckFile("--out", c.out, "an input", []string{in, filepath.Join(dir, "missing.npy")})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.out, err)
		case c.want != "" && (!errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrInput with %q", c.out, err, c.want)
		}
	}
	if err := CheckFile("--out", filepath.Join(dir, "x", "y"), "a file of d", nil, dir); !errors.Is(err, ErrInput) {
		t.Errorf("inside a protected directory: %v", err)
	}
	if err := CheckParent("--plot", filepath.Join(dir, "nope", "p.png")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing directory: %v", err)
	}
	if err := CheckParent("--plot", filepath.Join(in, "p.png")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as the directory: %v", err)
	}
	if !Same(in, soft) || !Same(in, hard) || !Same(filepath.Join(dir, "a"), dir+"/./a") || Same(in, filepath.Join(dir, "new.npy")) {
		t.Error("Same")
	}
}

// TestCheckParentNameLength: an output name too long for its temporary
// name (atomicfile.MaxNameBytes) is refused up front naming the flag;
// before, infer --out with a 244-byte name ran the whole inference and
// then failed with "file name too long" on the temporary file. The
// longest name allowed is written.
func TestCheckParentNameLength(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		n  int
		ok bool
	}{
		{atomicfile.MaxNameBytes, true},
		{atomicfile.MaxNameBytes + 1, false},
		{255, false},
	} {
		path := filepath.Join(dir, strings.Repeat("p", tc.n))
		err := CheckParent("--out", path)
		if (err == nil) != tc.ok {
			t.Fatalf("%d-byte name: %v, want ok %v", tc.n, err, tc.ok)
		}
		if !tc.ok {
			if !strings.Contains(err.Error(), "--out") || !strings.Contains(err.Error(), fmt.Sprint(atomicfile.MaxNameBytes)) {
				t.Errorf("%d-byte name: %v, want the flag and the limit named", tc.n, err)
			}
			continue
		}
		if err := atomicfile.WriteFile(path, []byte("x")); err != nil {
			t.Errorf("%d-byte name allowed but not writable: %v", tc.n, err)
		}
	}
}
