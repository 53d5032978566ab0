package cliflags

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// TestCheckOutputsDirectory: an output that names an existing directory
// is refused before the command's work, for a replaced file (--plot,
// --out) and an appended one (--metrics) alike. train --plot DIR trained
// to the end and failed at the rename; --metrics DIR was refused as a
// file with 2 hard links.
func TestCheckOutputsDirectory(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		out  Output
		want string // "" for accepted
	}{
		{"plot directory", Output{Flag: "--plot", Path: sub}, "--plot " + sub + " is a directory: name a file"},
		{"metrics directory", Output{Flag: "--metrics", Path: sub, Appends: true}, "--metrics " + sub + " is a directory: name a file"},
		{"new plot", Output{Flag: "--plot", Path: filepath.Join(sub, "p.png")}, ""},
		{"existing metrics", Output{Flag: "--metrics", Path: file, Appends: true}, ""},
		{"missing parent", Output{Flag: "--plot", Path: filepath.Join(dir, "none", "p.png")}, "does not exist"},
	} {
		err := CheckOutputs(t.TempDir(), nil, nil, tc.out)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckOutputDir: a dataset's directory is no output directory; a
// directory inside it (DIR/checkpoints) or elsewhere is.
func TestCheckOutputDir(t *testing.T) {
	ds := t.TempDir()
	if err := os.WriteFile(filepath.Join(ds, storage.ManifestName), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutputDir("--checkpoint", ds, "d/other"); err == nil || !strings.Contains(err.Error(), "is a dataset directory") || !strings.Contains(err.Error(), filepath.Join("d/other", "checkpoints")) {
		t.Errorf("dataset directory: %v", err)
	}
	for _, ok := range []string{filepath.Join(ds, "checkpoints"), t.TempDir()} {
		if err := CheckOutputDir("--checkpoint", ok, "d/other"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// A file, and a system directory (checked only: nothing is made).
	file := filepath.Join(ds, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{file, "--checkpoint " + file + " is not a directory"},
		{"/dev", "--checkpoint /dev lies in /dev"},
		{"/proc/self", "--checkpoint /proc/self lies in /proc"},
	} {
		if err := CheckOutputDir("--checkpoint", tc.dir, "d/other"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.dir, err, tc.want)
		}
	}
}

// TestCheckOutputsSpecialFiles: an output replaced atomically (--out,
// --plot) that names a device, a FIFO or a link to one is refused before
// any work: run as root, infer --out /dev/stdout replaced the /dev/stdout
// link with a regular file of predictions (stdout redirected to a file,
// so the link led to a regular file). An appended output (--metrics) may
// still be a FIFO. (CheckOutputs writes nothing: /dev is only looked at.)
func TestCheckOutputsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "stdout")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		out  Output
		want string // "" for accepted
	}{
		{"out FIFO", Output{Flag: "--out", Path: fifo}, "--out " + fifo + " is not a regular file (a named pipe)"},
		{"out device", Output{Flag: "--out", Path: "/dev/null"}, "--out /dev/null lies in /dev"},
		// A link to the process's descriptor: a regular file when
		// stdout is redirected to one, and the link was replaced.
		{"out /dev/stdout", Output{Flag: "--out", Path: "/dev/stdout"}, "--out /dev/stdout lies in /dev"},
		{"out new name in /dev", Output{Flag: "--out", Path: "/dev/preds.npy"}, "lies in /dev"},
		{"plot link to a device", Output{Flag: "--plot", Path: link}, "is not a regular file (a character device)"},
		{"metrics FIFO", Output{Flag: "--metrics", Path: fifo, Appends: true}, ""},
	} {
		err := CheckOutputs(t.TempDir(), nil, nil, tc.out)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
