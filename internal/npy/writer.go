package npy

import (
	"bufio"
	"fmt"
	"io"
)

// WriteAtWriter is what a streaming Writer needs from its file: sequential
// writes for the data and one positioned write to patch the header.
type WriteAtWriter interface {
	io.Writer
	io.WriterAt
}

// Writer streams an array whose leading dimension is not known in advance.
// It writes a placeholder header of HeaderSize bytes (NewWriterHeader: a
// chosen size), then the data, and on Close rewrites the header with the
// leading dimension derived from the number of bytes written.
type Writer struct {
	f       WriteAtWriter
	bw      *bufio.Writer
	dtype   DType
	tail    []int64
	rowSize int64
	hdrSize int
	n       int64 // data bytes written
	err     error
	closed  bool
}

// NewWriter starts an array of dtype with trailing dimensions tail (nil for
// a 1-D array). The caller owns f and must not write to it directly.
func NewWriter(f WriteAtWriter, d DType, tail []int64) (*Writer, error) {
	return NewWriterHeader(f, d, tail, HeaderSize)
}

// NewWriterHeader is NewWriter with a header of hdrSize bytes (see
// EncodeHeaderSize), so the data section starts at offset hdrSize.
func NewWriterHeader(f WriteAtWriter, d DType, tail []int64, hdrSize int) (*Writer, error) {
	row := int64(d.Size())
	for _, t := range tail {
		if t <= 0 {
			return nil, fmt.Errorf("npy: trailing dimension %d must be positive", t)
		}
		row *= t
	}
	if row <= 0 {
		return nil, fmt.Errorf("npy: cannot write dtype %v", d)
	}
	// Encode a header with a maximal leading dimension to check it fits.
	shape := append([]int64{1 << 62}, tail...)
	hdr, err := EncodeHeaderSize(d, shape, hdrSize)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, bw: bufio.NewWriterSize(f, 1<<20), dtype: d, tail: tail, rowSize: row, hdrSize: hdrSize}
	if _, err := w.bw.Write(hdr); err != nil {
		return nil, err
	}
	return w, nil
}

// Write appends raw little-endian element bytes.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.bw.Write(p)
	w.n += int64(n)
	if err != nil {
		w.err = err
	}
	return n, err
}

// Bytes is the number of data bytes written so far.
func (w *Writer) Bytes() int64 { return w.n }

// Rows is the number of complete rows written so far.
func (w *Writer) Rows() int64 { return w.n / w.rowSize }

// Close flushes the data and patches the header. It fails if the data is
// not a whole number of rows. It does not close the underlying file.
func (w *Writer) Close() (Header, error) {
	if w.closed {
		return Header{}, fmt.Errorf("npy: writer closed twice")
	}
	w.closed = true
	if w.err != nil {
		return Header{}, w.err
	}
	if err := w.bw.Flush(); err != nil {
		return Header{}, err
	}
	if w.n%w.rowSize != 0 {
		return Header{}, fmt.Errorf("npy: %d data bytes is not a whole number of %d-byte rows", w.n, w.rowSize)
	}
	shape := append([]int64{w.n / w.rowSize}, w.tail...)
	hdr, err := EncodeHeaderSize(w.dtype, shape, w.hdrSize)
	if err != nil {
		return Header{}, err
	}
	if _, err := w.f.WriteAt(hdr, 0); err != nil {
		return Header{}, err
	}
	return Header{DType: w.dtype, Shape: shape, DataOffset: int64(w.hdrSize), Version: 1}, nil
}
