package npy

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
)

// File is a .npy array being written atomically (internal/atomicfile):
// elements are streamed through Write, and Commit finishes the header and
// renames the file into place. Until Commit the array is under a temporary
// name, so a crash never leaves a file that looks complete.
type File struct {
	af *atomicfile.File
	w  *Writer
}

// Create starts path as an array of dtype d with trailing dimensions tail
// and a HeaderSize header.
func Create(path string, d DType, tail []int64) (*File, error) {
	return CreateHeader(path, d, tail, HeaderSize)
}

// CreateHeader is Create with a header of hdrSize bytes (see
// EncodeHeaderSize).
func CreateHeader(path string, d DType, tail []int64, hdrSize int) (*File, error) {
	af, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewWriterHeader(af, d, tail, hdrSize)
	if err != nil {
		af.Abort()
		return nil, err
	}
	return &File{af: af, w: w}, nil
}

// Name is the final path.
func (f *File) Name() string { return f.af.Name() }

// Write appends raw little-endian element bytes.
func (f *File) Write(p []byte) (int, error) { return f.w.Write(p) }

// Rows is the number of leading-dimension rows written so far.
func (f *File) Rows() int64 { return f.w.Rows() }

// Commit finishes the header, fsyncs and renames the file into place, and
// returns the header written. On error nothing is left at Name.
func (f *File) Commit() (Header, error) {
	h, err := f.w.Close()
	if err != nil {
		f.af.Abort()
		return Header{}, err
	}
	if err := f.af.Commit(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Defer makes Commit rename without fsyncing (atomicfile.File.Defer): the
// caller calls atomicfile.SyncFS before whatever vouches for the file.
func (f *File) Defer() { f.af.Defer() }

// Abort removes the temporary file; after Commit it does nothing.
func (f *File) Abort() error { return f.af.Abort() }

// WriteFile writes a whole array of dtype d and shape to path atomically;
// data holds its elements (little-endian). It returns the file's size.
func WriteFile(path string, d DType, shape []int64, data []byte) (int64, error) {
	hdr, err := EncodeHeader(d, shape)
	if err != nil {
		return 0, err
	}
	want := int64(d.Size())
	for _, s := range shape {
		want *= s
	}
	if int64(len(data)) != want {
		return 0, fmt.Errorf("npy: %s: %d data bytes for shape %v of %s (want %d)", path, len(data), shape, d, want)
	}
	af, err := atomicfile.Create(path)
	if err != nil {
		return 0, err
	}
	defer af.Abort()
	if _, err := af.Write(hdr); err != nil {
		return 0, err
	}
	if _, err := af.Write(data); err != nil {
		return 0, err
	}
	return int64(len(hdr) + len(data)), af.Commit()
}
