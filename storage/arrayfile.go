package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// ArrayFile is one .npy array opened for sequential reads with pread,
// after the same checks as MapArray. Unlike a mapping, its reads leave no
// resident pages in the process, so a reader that streams a whole array
// keeps its resident memory at the size of its own buffer.
type ArrayFile struct {
	Entry *FileEntry
	Path  string
	f     *os.File
}

// OpenArrayFile opens dir/e.Name after checking that it exists, has
// e.Bytes bytes, and that its .npy header agrees with e's dtype, shape and
// data offset. Errors wrap ErrMismatch and name the file.
func OpenArrayFile(dir string, e *FileEntry) (*ArrayFile, error) {
	f, path, err := openChecked(dir, e)
	if err != nil {
		return nil, err
	}
	return &ArrayFile{Entry: e, Path: path, f: f}, nil
}

// openChecked opens dir/e.Name and checks it against e (checkArrayFile);
// the caller closes the file.
func openChecked(dir string, e *FileEntry) (*os.File, string, error) {
	path := filepath.Join(dir, e.Name)
	if err := CheckRegular(path); err != nil {
		return nil, path, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("%w: %s: listed in the manifest but missing", ErrMismatch, path)
	}
	if err != nil {
		return nil, path, fmt.Errorf("storage: %w", err)
	}
	if err := checkArrayFile(f, path, e); err != nil {
		f.Close()
		return nil, path, err
	}
	return f, path, nil
}

// CheckRegular refuses a path (followed if a symlink) that exists but is
// not a regular file (ErrMismatch, naming it and its kind), before a
// reader opens it: a named pipe would block the open until a writer
// came, past SIGINT and SIGTERM (info hung so), and a directory or device
// was reported by the size it happened to have ("size 4096 bytes").
func CheckRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() {
		return nil // a missing file is the open's error to report
	}
	return fmt.Errorf("%w: %s: not a regular file but %s", ErrMismatch, path, FileKind(st.Mode()))
}

// FileKind names the kind of file, other than a regular one, mode m is
// ("a named pipe", "a directory"), for errors that refuse it.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// checkArrayFile checks f's size and .npy header against e.
func checkArrayFile(f *os.File, path string, e *FileEntry) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if st.Size() != e.Bytes {
		return fmt.Errorf("%w: %s: size %d bytes, manifest says %d", ErrMismatch, path, st.Size(), e.Bytes)
	}
	h, err := npy.ReadHeader(io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMismatch, path, err)
	}
	if h.DType.String() != e.DType || !equalShape(h.Shape, e.Shape) || h.DataOffset != e.DataOffset {
		return fmt.Errorf("%w: %s: header says %s%v at offset %d, manifest says %s%v at offset %d",
			ErrMismatch, path, h.DType, h.Shape, h.DataOffset, e.DType, e.Shape, e.DataOffset)
	}
	return nil
}

// DataBytes is the size of the data section.
func (a *ArrayFile) DataBytes() int64 { return a.Entry.Bytes - a.Entry.DataOffset }

// ShortRead is err, from a ReadAt of bytes a manifest says are there, with
// an io.EOF (the file ended first: another program truncated it under the
// reader) made io.ErrUnexpectedEOF: wrapped, an io.EOF would read as the
// end of an iteration to a caller testing errors.Is(err, io.EOF) (a
// truncated adjacency file ended training's epoch early and hung it).
func ShortRead(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadDataAt reads len(p) bytes of the data section at offset off. It
// fails (io.ErrUnexpectedEOF) when fewer bytes are there.
func (a *ArrayFile) ReadDataAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > a.DataBytes() {
		return fmt.Errorf("storage: %s: read of %d bytes at data offset %d past the end (%d): %w",
			a.Path, len(p), off, a.DataBytes(), io.ErrUnexpectedEOF)
	}
	if _, err := a.f.ReadAt(p, a.Entry.DataOffset+off); err != nil {
		return fmt.Errorf("storage: read %s: %w", a.Path, ShortRead(err))
	}
	return nil
}

// File is the open file, for callers that copy it whole (io.Copy from a
// SectionReader uses copy_file_range between files).
func (a *ArrayFile) File() *os.File { return a.f }

// Close closes the file.
func (a *ArrayFile) Close() error { return a.f.Close() }
