// Package namedir lists and picks a dataset's named artefacts: the
// partitionings under partitions/ and the profiles under profile/, each a
// subdirectory holding its manifest file.
//
// One rule picks the artefact a command reads (Pick): the name asked for
// when it exists or was given explicitly (a missing one is then the
// caller's error to report), else the dataset's only artefact of the kind,
// said so, else the name. A hidden subdirectory (a staged replacement,
// ".NAME.new") is never listed.
package namedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxNameBytes is the longest artefact name: a replacement is staged as
// ".NAME.new" and the old one moved to ".NAME.old", 5 bytes more, within
// the 255 a file system allows a name.
const MaxNameBytes = 255 - 5

// List names the subdirectories of dir/sub that hold file, in name order.
// A missing dir/sub lists nothing.
func List(dir, sub, file string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, sub))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents { // os.ReadDir sorts by name
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, sub, e.Name(), file)); err == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Pick is the artefact of kind ("partitioning", "profile") a command
// reads for name (see the package documentation): chosen, stood a line
// saying the only one stood in ("" when it did not), and others, the
// artefacts listed (nil when name stood without a listing).
func Pick(kind, name string, explicit bool, exists func(string) bool, list func() ([]string, error)) (chosen, stood string, others []string, err error) {
	if explicit || exists(name) {
		return name, "", nil, nil
	}
	others, err = list()
	if err == nil && len(others) == 1 {
		return others[0], fmt.Sprintf("%s %q, the dataset's only one (no %q)", kind, others[0], name), others, nil
	}
	return name, "", others, err
}
