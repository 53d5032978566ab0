package planner

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// The profile and its saved recounts are the same kind of directory: .npy
// uint32 [N] arrays and a JSON manifest, written last, that lists each
// array's checksum. This file writes and reads them, for both.

// namedArray is one per-node array of a Profile and its file name.
type namedArray struct {
	name string
	a    *[]uint32
}

// prepareDir makes out and removes its temporary files and its manifest
// (the file named manifest), so that a crash while the arrays are written
// never leaves a manifest describing arrays of another run.
func prepareDir(out, manifest string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if _, err := atomicfile.CleanTemps(out); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := os.Remove(filepath.Join(out, manifest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("planner: %w", err)
	}
	return nil
}

// writeArray writes a as a .npy uint32 [len(a)] named name in out,
// atomically, a block at a time (no copy of the array), and returns its
// manifest entry.
func writeArray(out, name string, a []uint32) (FileInfo, error) {
	f, err := npy.Create(filepath.Join(out, name), npy.Uint32, nil)
	if err != nil {
		return FileInfo{}, fmt.Errorf("planner: %w", err)
	}
	h := xxhash.New()
	buf := make([]byte, 0, 64<<10)
	flush := func() error {
		h.Write(buf)
		_, err := f.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, x := range a {
		buf = binary.LittleEndian.AppendUint32(buf, x)
		if len(buf) == cap(buf) {
			if err := flush(); err != nil {
				f.Abort()
				return FileInfo{}, fmt.Errorf("planner: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		f.Abort()
		return FileInfo{}, fmt.Errorf("planner: %w", err)
	}
	if _, err := f.Commit(); err != nil {
		return FileInfo{}, fmt.Errorf("planner: %w", err)
	}
	return FileInfo{Name: name, DType: npy.Uint32.String(), Shape: []int64{int64(len(a))},
		Checksum: storage.FormatChecksum(h.Sum64())}, nil
}

// writeArrays writes each array of arrays with n entries to out
// (writeArray), skipping those skip names, and returns their manifest
// entries. An array of another length is refused before it is written.
func writeArrays(out string, arrays []namedArray, n int64, skip func(namedArray) bool) ([]FileInfo, error) {
	var files []FileInfo
	for _, e := range arrays {
		if skip(e) {
			continue
		}
		a := *e.a
		if int64(len(a)) != n {
			return nil, fmt.Errorf("%w: %s has %d entries, profile %d nodes", ErrInvalidOptions, e.name, len(a), n)
		}
		fi, err := writeArray(out, e.name, a)
		if err != nil {
			return nil, err
		}
		files = append(files, fi)
	}
	return files, nil
}

// writeManifest writes v as indented JSON to out/name atomically, then
// syncs out.
func writeManifest(out, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(out, name), append(b, '\n')); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	return atomicfile.SyncDir(out)
}

// fileEntry is the manifest entry of file name, nil when there is none.
func fileEntry(files []FileInfo, name string) *FileInfo {
	for i := range files {
		if files[i].Name == name {
			return &files[i]
		}
	}
	return nil
}

// readArrayFile checks the array file path against its manifest entry
// (uint32 [n], checksum) a block at a time and fills the slice dst returns
// (nil: check only). dst is called once the file's size has been checked,
// so a damaged length allocates nothing.
func readArrayFile(path string, n int64, checksum string, dst func() []uint32) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	return readArray(bufio.NewReaderSize(f, 64<<10), st.Size(), path, n, checksum, dst)
}

// readArray reads an array file of size bytes from r: a .npy uint32 [n]
// whose data has checksum (the manifest's). Damage is a *CorruptError
// naming path, the field (header, data, trailing) and the byte offset.
// The sizes are checked against size before dst is called or any data
// read; the data is then read a block at a time into dst's slice (nil:
// checked only) and checked against checksum.
func readArray(r io.Reader, size int64, path string, n int64, checksum string, dst func() []uint32) error {
	h, err := npy.ReadHeader(r)
	if err != nil {
		var he *npy.HeaderError
		off := int64(0)
		if errors.As(err, &he) {
			off = he.Offset
		}
		return &CorruptError{File: path, Offset: off, Field: "header", Reason: err.Error()}
	}
	if h.DType != npy.Uint32 || len(h.Shape) != 1 || h.Shape[0] != n {
		return &CorruptError{File: path, Field: "header", Reason: fmt.Sprintf("%v %v, want uint32 [%d]", h.DType, h.Shape, n)}
	}
	switch left := size - h.DataOffset; {
	case left < 4*n:
		return &CorruptError{File: path, Offset: h.DataOffset, Field: "data",
			Reason: fmt.Sprintf("truncated: %d elements of 4 bytes, %d bytes left", n, left)}
	case left > 4*n:
		return &CorruptError{File: path, Offset: h.DataOffset + 4*n, Field: "trailing",
			Reason: fmt.Sprintf("%d bytes after the %d elements", left-4*n, n)}
	}
	var a []uint32
	if dst != nil {
		a = dst()
	}
	d := xxhash.New()
	buf := make([]byte, min(64<<10, 4*n))
	for i := int64(0); i < n; {
		k := min(int64(len(buf)), 4*(n-i))
		if _, err := io.ReadFull(r, buf[:k]); err != nil {
			return &CorruptError{File: path, Offset: h.DataOffset + 4*i, Field: "data", Reason: err.Error()}
		}
		d.Write(buf[:k])
		if a != nil {
			for j := int64(0); j < k; j += 4 {
				a[i+j/4] = binary.LittleEndian.Uint32(buf[j:])
			}
		}
		i += k / 4
	}
	if got := storage.FormatChecksum(d.Sum64()); got != checksum {
		return &CorruptError{File: path, Offset: h.DataOffset, Field: "data", Reason: fmt.Sprintf("checksum %s, manifest says %s", got, checksum)}
	}
	return nil
}
