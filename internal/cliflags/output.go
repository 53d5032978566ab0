package cliflags

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Output is an output file flag and its value ("" when not given).
// MayBeInput says the command may replace one of its inputs with it (a
// checkpoint that --resume reads, replaced atomically after it is read).
type Output struct {
	Flag, Path string
	MayBeInput bool
}

// CheckOutputs checks, before a command on the dataset in dir (manifest
// m) does any work, the output files it was given: each one's directory
// exists, none would replace a file of the dataset (storage.CheckOutput)
// or, unless MayBeInput, one of inputs (files the command reads, such as
// a checkpoint), and no two flags name the same file.
func CheckOutputs(dir string, m *storage.Manifest, inputs []string, outs ...Output) error {
	for i, o := range outs {
		if o.Path == "" {
			continue
		}
		if err := outpath.CheckParent(o.Flag, o.Path); err != nil {
			return err
		}
		if err := storage.CheckOutput(dir, m, o.Flag, o.Path); err != nil {
			return err
		}
		if !o.MayBeInput {
			if err := outpath.CheckFile(o.Flag, o.Path, "an input of this command", inputs); err != nil {
				return err
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
