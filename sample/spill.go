package sample

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// SpillDirName is the default spill directory under the dataset.
const SpillDirName = "spill"

// Spill defaults.
const (
	DefaultSpillChunk = 16
	DefaultSpillAhead = 4
)

// SpillOptions configures Sampler.SpillEpoch. A nil *SpillOptions means
// the defaults.
type SpillOptions struct {
	// Dir holds the spill file (default DATASET/spill). It is created if
	// missing.
	Dir string
	// ChunkBatches is how many batches are sampled and written before the
	// reader may consume them (default 16).
	ChunkBatches int
	// AheadChunks bounds how many written chunks may wait unread (default
	// 4); the sampler pauses beyond that.
	AheadChunks int
	// Logger receives stale-file cleanup records (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *SpillOptions) Validate() error {
	if o == nil {
		return nil
	}
	if o.ChunkBatches < 0 || o.AheadChunks < 0 {
		return fmt.Errorf("%w: ChunkBatches %d, AheadChunks %d, want >= 0", ErrInvalidOptions, o.ChunkBatches, o.AheadChunks)
	}
	return nil
}

var spillSeq atomic.Int64

// spillName is spill-<pid>-<epoch>-<seq>.bin.
func spillName(pid, epoch int, seq int64) string {
	return fmt.Sprintf("spill-%d-%d-%d.bin", pid, epoch, seq)
}

// spillPID parses the pid out of a spill file name.
func spillPID(name string) (int, bool) {
	if !strings.HasPrefix(name, "spill-") || !strings.HasSuffix(name, ".bin") {
		return 0, false
	}
	rest := strings.TrimPrefix(name, "spill-")
	i := strings.IndexByte(rest, '-')
	if i <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:i])
	return pid, err == nil && pid > 0
}

// CleanStaleSpills removes spill files in dir left by processes that no
// longer exist, and returns how many it removed. A missing dir is not an
// error.
func CleanStaleSpills(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sample: %w", err)
	}
	n := 0
	self := os.Getpid()
	for _, e := range ents {
		pid, ok := spillPID(e.Name())
		if !ok || pid == self {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // alive, or not ours to judge (EPERM)
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("sample: %w", err)
		}
		n++
	}
	return n, nil
}

// chunkMsg announces records written and flushed, or the writer's end.
type chunkMsg struct {
	records int
	err     error
}

// SpillIterator is the decoupled sample stage (OUTRE §4.1): a goroutine
// samples batches ahead and writes them to a spill file in chunks; Next
// reads them back in batch order. Close (which the caller must call)
// stops the writer and deletes the file; so does cancelling the context.
type SpillIterator struct {
	path   string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  chan chunkMsg
	rf     *os.File
	sr     *SpillReader
	avail  int
	read   int
	ended  bool
	err    error
	closed bool
	stats  LookupStats
}

// spillDir is the spill directory SpillOptions.Dir names (dir; "": the
// dataset's SpillDirName).
func (s *Sampler) spillDir(dir string) string {
	if dir == "" {
		return filepath.Join(s.d.Dir(), SpillDirName)
	}
	return dir
}

// CheckSpillDir makes the directory SpillEpoch would spill into under
// opts (created if missing) and writes and removes a file there, so that
// a directory training cannot write into is refused before the first
// epoch rather than at it. The probe is named as a spill file, so one
// left by a crash is removed as stale (CleanStaleSpills).
func (s *Sampler) CheckSpillDir(opts *SpillOptions) error {
	var dir string
	if opts != nil {
		dir = opts.Dir
	}
	dir = s.spillDir(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sample: spill directory: %w", err)
	}
	path := filepath.Join(dir, spillName(os.Getpid(), 0, spillSeq.Add(1)))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("sample: spill directory: %w", err)
	}
	f.Close()
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("sample: spill directory: %w", err)
	}
	return nil
}

// SpillEpoch starts sampling epoch into a spill file and returns the
// reading side.
func (s *Sampler) SpillEpoch(ctx context.Context, epoch int, opts *SpillOptions) (*SpillIterator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var o SpillOptions
	if opts != nil {
		o = *opts
	}
	o.Dir = s.spillDir(o.Dir)
	if o.ChunkBatches == 0 {
		o.ChunkBatches = DefaultSpillChunk
	}
	if o.AheadChunks == 0 {
		o.AheadChunks = DefaultSpillAhead
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	if n, err := CleanStaleSpills(o.Dir); err != nil {
		return nil, err
	} else if n > 0 {
		o.Logger.Info("removed stale spill files", "dir", o.Dir, "files", n)
	}
	path := filepath.Join(o.Dir, spillName(os.Getpid(), epoch, spillSeq.Add(1)))
	wf, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	sw, err := NewSpillWriter(wf)
	if err == nil {
		err = sw.Flush()
	}
	var rf *os.File
	if err == nil {
		rf, err = os.Open(path)
	}
	if err != nil {
		wf.Close()
		os.Remove(path)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	si := &SpillIterator{path: path, ctx: ctx, cancel: cancel, ready: make(chan chunkMsg, o.AheadChunks), rf: rf}
	si.wg.Add(1)
	go func() {
		defer si.wg.Done()
		defer close(si.ready)
		err := s.spillWrite(ctx, epoch, sw, o.ChunkBatches, si.ready)
		if cerr := wf.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sample: %w", cerr)
		}
		if err != nil {
			select {
			case si.ready <- chunkMsg{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return si, nil
}

// spillWrite samples the epoch into sw, announcing every flushed chunk.
func (s *Sampler) spillWrite(ctx context.Context, epoch int, sw *SpillWriter, chunk int, ready chan<- chunkMsg) error {
	it := s.Epoch(ctx, epoch)
	defer it.Close()
	pending := 0
	announce := func() error {
		if err := sw.Flush(); err != nil {
			return err
		}
		select {
		case ready <- chunkMsg{records: pending}:
		case <-ctx.Done():
			return ctx.Err()
		}
		pending = 0
		return nil
	}
	for {
		b, err := it.Next()
		if err == io.EOF { // the end; a wrapped io.EOF is a failed read
			break
		}
		if err != nil {
			return err
		}
		err = sw.Write(b)
		b.Release()
		if err != nil {
			return err
		}
		pending++
		if pending == chunk {
			if err := announce(); err != nil {
				return err
			}
		}
	}
	if err := sw.Finish(); err != nil {
		return err
	}
	return announce()
}

// Path is the spill file's path.
func (si *SpillIterator) Path() string { return si.path }

// Next returns the next batch read back from the spill file, io.EOF after
// the last one, or the first error.
func (si *SpillIterator) Next() (*Batch, error) {
	if si.err != nil {
		return nil, si.err
	}
	if err := si.ctx.Err(); err != nil {
		si.err = err
		return nil, err
	}
	for si.read == si.avail && !si.ended {
		select {
		case m, ok := <-si.ready:
			if !ok {
				si.ended = true
				break
			}
			if m.err != nil {
				si.err = m.err
				return nil, m.err
			}
			si.avail += m.records
		case <-si.ctx.Done():
			si.err = si.ctx.Err()
			return nil, si.err
		}
	}
	if si.sr == nil {
		sr, err := NewSpillReader(si.rf, si.path)
		if err != nil {
			si.err = err
			return nil, err
		}
		si.sr = sr
	}
	if si.read == si.avail {
		// The writer finished; its end marker must follow.
		if err := si.ctx.Err(); err != nil {
			si.err = err
			return nil, err
		}
		_, err := si.sr.Next()
		if err == nil {
			err = &CorruptError{File: si.path, Offset: si.sr.Offset(), Msg: "record after announced end"}
		}
		si.err = err
		return nil, err
	}
	b, err := si.sr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = &CorruptError{File: si.path, Offset: si.sr.Offset(), Msg: "end marker before announced records"}
		}
		si.err = err
		return nil, err
	}
	b.count()
	si.read++
	si.stats.Add(b.Stats)
	return b, nil
}

// Stats sums the Stats of the batches read so far.
func (si *SpillIterator) Stats() LookupStats { return si.stats }

// Close stops the writer, closes and deletes the spill file.
func (si *SpillIterator) Close() error {
	if si.closed {
		return nil
	}
	si.closed = true
	si.cancel()
	si.wg.Wait()
	err := si.rf.Close()
	if rerr := os.Remove(si.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("sample: %w", rerr)
	}
	if si.err == nil || errors.Is(si.err, io.EOF) {
		si.err = ErrClosed
	}
	return err
}
