package importer

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/csvnum"
	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// ImportEdgeList imports a text edge list, one "src dst" pair per line
// (gzip if the name ends in .gz), into a new dataset in outDir.
//
// Fields are separated by Options.Delim (default: runs of spaces and
// tabs); lines starting with Options.Comment (default "#") and blank lines
// are skipped; a line with other than two fields is an error. Node ids are
// 0-based. N is Options.NumNodes, else the row count of a .npy FeatFile,
// else the largest id + 1; when N is given, every id is checked against it
// on the line that holds it. Optional Options.FeatFile and
// Options.LabelFile must have one row per node. With labels, a random
// split over labelled nodes is made.
func ImportEdgeList(edgeFile, outDir string, opts *Options) (Report, error) {
	return ImportEdgeListContext(context.Background(), edgeFile, outDir, opts)
}

// ImportEdgeListContext is ImportEdgeList, stopped by ctx: within about a second of its
// cancellation it removes its temporary files and the arrays written so
// far and returns an error wrapping ctx.Err(), with no manifest written.
func ImportEdgeListContext(ctx context.Context, edgeFile, outDir string, opts *Options) (Report, error) {
	source := "edgelist:" + absPath(edgeFile)
	return run(ctx, outDir, baseName(edgeFile), source, opts, false, func(j *job) error {
		var feat *npyStream
		defer func() {
			if feat != nil {
				feat.Close()
			}
		}()
		if j.o.NumNodes > 0 {
			j.setNumNodes(j.o.NumNodes, "--num-nodes (Options.NumNodes)")
		}
		if k := fileKind(edgeFile); k != "" {
			return fileErr(edgeFile, "is a %s, not a text edge list; import npy reads an [E, 2] or [2, E] edge array (as SRC/%s)", k, igbEdges)
		}
		featNPY, err := isNPYSource(j.o.FeatFile)
		if err != nil {
			return err
		}
		labelNPY, err := isNPYSource(j.o.LabelFile)
		if err != nil {
			return err
		}
		if featNPY {
			s, size, err := openNPYFile(j.o.FeatFile, RoleFeat, rawSpec(j, RoleFeat))
			if err != nil {
				return err
			}
			feat = s
			j.addBytesIn(size)
			if j.numNodes < 0 && len(s.h.Shape) > 0 {
				j.setNumNodes(s.h.Shape[0], "the rows of "+s.name+"; pass --num-nodes to set it")
			}
		}
		copts := &csvnum.Options{Delim: j.o.Delim, Comment: j.o.Comment}
		if n, err := j.readTextEdges(edgeFile, copts); err != nil {
			return err
		} else if n == 0 {
			return fileErr(edgeFile, "no edges: the file is empty or holds only comments and blank lines")
		}
		if err := j.writeCSR(); err != nil {
			return err
		}
		switch {
		case feat != nil:
			if err := j.copyNPYFeatures(feat); err != nil {
				return err
			}
		case j.o.FeatFile != "":
			if err := j.copyTextFeatures(j.o.FeatFile); err != nil {
				return err
			}
		}
		switch {
		case labelNPY:
			s, size, err := openNPYFile(j.o.LabelFile, RoleLabel, rawSpec(j, RoleLabel))
			if err != nil {
				return err
			}
			defer s.Close()
			j.addBytesIn(size)
			if err := j.copyNPYLabels(s); err != nil {
				return err
			}
		case j.o.LabelFile != "":
			if err := j.copyTextLabels(j.o.LabelFile); err != nil {
				return err
			}
		}
		return j.randomSplit()
	})
}

// isNPYSource reports whether the feature or label file p is a .npy array
// (its name ends in .npy, in any case, or it starts with the .npy magic)
// rather than text. A zip archive (an .npz) is an error naming it: read as
// text it failed with "invalid float "PK\x03\x04..."", and so did a .npy
// named .NPY or without the suffix.
func isNPYSource(p string) (bool, error) {
	if p == "" {
		return false, nil
	}
	switch fileKind(p) {
	case npyKind:
		return true, nil
	case zipKind:
		return false, fileErr(p, "is a %s: give the array itself as a .npy file (np.save(path, np.load(npz)[name]))", zipKind)
	}
	return strings.EqualFold(filepath.Ext(p), ".npy"), nil
}

const (
	npyKind = ".npy array"
	zipKind = "zip archive (an .npz)"
)

// fileKind is what the first bytes of path say it is: npyKind, zipKind,
// or "" for anything else (text, or a file that cannot be read: its
// reader reports that). Only a regular file is looked at: the bytes read
// from a pipe or FIFO (ssdgnn import edgelist <(zcat edges.gz) OUT) are
// gone for the import that opens it next, which then lost its first edge
// without a word, or failed on the rest of the line.
func fileKind(path string) string {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var m [6]byte
	n, _ := io.ReadFull(f, m[:])
	switch {
	case n == len(m) && string(m[:]) == npy.Magic:
		return npyKind
	case n >= 4 && string(m[:4]) == "PK\x03\x04":
		return zipKind
	}
	return ""
}
