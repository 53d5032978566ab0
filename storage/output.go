package storage

import (
	"io/fs"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
)

// CheckOutput returns an error wrapping outpath.ErrInput when writing the
// file path (the value of flag, for the message) would replace a file that
// commands read from the dataset in dir: one its manifest lists,
// dataset.json, device.json, its lock, or a file of a partitioning or a
// profile other than a plan.json, which 'ssdgnn plan'
// rewrites. A path that does not exist yet replaces nothing.
func CheckOutput(dir string, m *Manifest, flag, path string) error {
	return checkOutput(dir, m, flag, path, true)
}

// CheckForeignOutput is CheckOutput for a dataset the command does not
// work on: its plans are protected too (only 'ssdgnn plan' on that
// dataset rewrites them).
func CheckForeignOutput(dir string, m *Manifest, flag, path string) error {
	return checkOutput(dir, m, flag, path, false)
}

func checkOutput(dir string, m *Manifest, flag, path string, plansOurs bool) error {
	files := []string{ManifestName, FileDevice, dirlock.Name}
	if m != nil {
		for _, e := range m.Files {
			files = append(files, e.Name)
		}
	}
	for i, f := range files {
		files[i] = filepath.Join(dir, f)
	}
	for _, sub := range []string{"partitions", "profile"} { // not spill: its files are a run's own
		_ = filepath.WalkDir(filepath.Join(dir, sub), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() && (e.Name() != "plan.json" || !plansOurs) {
				files = append(files, p)
			}
			return nil
		})
	}
	return outpath.CheckFile(flag, path, "a file of dataset "+dir, files)
}

// CheckOutput is CheckOutput for d.
func (d *Dataset) CheckOutput(flag, path string) error { return CheckOutput(d.dir, d.m, flag, path) }
