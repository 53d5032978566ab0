package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/readplan"
)

// FileDevice is the device profile of a dataset directory (docs/format.md).
// It is not listed in dataset.json: it describes the disk the dataset
// sits on, not the data, and is rewritten by every probe.
const FileDevice = "device.json"

// DeviceProfileVersion is the version ProbeDevice writes.
const DeviceProfileVersion = 1

// ErrNoDeviceProfile is returned by ReadDeviceProfile when the directory
// has no device.json.
var ErrNoDeviceProfile = errors.New("storage: no device profile (run ssdgnn probe)")

// DeviceProfile is the measured cost of reading the features file: single
// row reads at random offsets, and large sequential reads.
type DeviceProfile struct {
	Version    int       `json:"version"`
	MeasuredAt time.Time `json:"measured_at"`
	// ReadMode is "direct" or "buffered": how the probe read.
	ReadMode string `json:"read_mode"`
	RowBytes int64  `json:"row_bytes"`
	// Random reads: one row each, RandomDepth in flight, submitted by
	// RandomEngine ("uring" or "pread", as ReadScattered does).
	RandomDepth       int     `json:"random_depth"`
	RandomEngine      string  `json:"random_engine,omitempty"`
	RandomReads       int64   `json:"random_reads"`
	RandomReadsPerSec float64 `json:"random_reads_per_s"`
	// The same random reads at the feature gather's depth (GatherDepth,
	// DefaultGatherDepth when probed), which a deep queue reaches and
	// the gather keeps: the rate the device limit that `bench ooc`
	// reports is priced at (LimitReadSec). The merge gap keeps
	// RandomReadsPerSec (see DefaultGatherDepth). 0 in profiles written
	// before the field existed.
	GatherDepth       int     `json:"gather_depth,omitempty"`
	GatherReadsPerSec float64 `json:"gather_reads_per_s,omitempty"`
	// Sequential reads: SeqReadBytes each, SeqDepth in flight, walking the
	// file from a random start.
	SeqDepth       int     `json:"seq_depth"`
	SeqReadBytes   int64   `json:"seq_read_bytes"`
	SeqBytes       int64   `json:"seq_bytes"`
	SeqBytesPerSec float64 `json:"seq_bytes_per_s"`
	// Rounds is how many times each phase ran, the phases interleaved
	// (ProbeOptions.Rounds); the rates above are the medians of the
	// rounds' rates, which the *Rounds fields list in order (absent in
	// profiles written before rounds existed: one round). On a disk
	// shared with other work, three probes a few seconds apart read
	// 11,707, 22,863 and 29,118 random reads/s, and whichever wrote
	// device.json last set train's merge gap (135, 61 or 38 rows).
	Rounds             int       `json:"rounds,omitempty"`
	RandomRoundsPerS   []float64 `json:"random_reads_per_s_rounds,omitempty"`
	GatherRoundsPerS   []float64 `json:"gather_reads_per_s_rounds,omitempty"`
	SeqRoundsBytesPerS []float64 `json:"seq_bytes_per_s_rounds,omitempty"`
}

// Spread is the largest of the rounds' rates over the smallest, over
// every phase (1 with one round): how much the device's rate moved while
// it was probed.
func (p *DeviceProfile) Spread() float64 {
	s := 1.0
	for _, r := range [][]float64{p.RandomRoundsPerS, p.GatherRoundsPerS, p.SeqRoundsBytesPerS} {
		if len(r) > 1 {
			s = max(s, slices.Max(r)/slices.Min(r))
		}
	}
	return s
}

// median is the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// DefaultDeviceProfile stands for a dataset without device.json: the
// figures fio measured on the development machine's virtio disk
// (docs/ooc.md): 55k random reads/s at depth 16, 690 MiB/s sequential.
func DefaultDeviceProfile(rowBytes int64) *DeviceProfile {
	return &DeviceProfile{Version: DeviceProfileVersion, ReadMode: "direct", RowBytes: rowBytes,
		RandomDepth: 16, RandomReadsPerSec: 55e3, SeqDepth: 1, SeqReadBytes: 1 << 20, SeqBytesPerSec: 690 << 20}
}

// Validate reports whether p is usable.
func (p *DeviceProfile) Validate() error {
	// Rates a device can have: a read a second to 10^10 a second, a
	// KiB/s to 10 TB/s (1e-300 priced a gather at 10^300 seconds).
	rate := func(x, lo, hi float64) bool { return x >= lo && x <= hi }
	switch {
	case p.Version != DeviceProfileVersion:
		return fmt.Errorf("version %d, want %d", p.Version, DeviceProfileVersion)
	case p.RowBytes <= 0:
		return fmt.Errorf("row_bytes %d, want a positive row size", p.RowBytes)
	case p.ReadMode != "direct" && p.ReadMode != "buffered":
		return fmt.Errorf("read_mode %q, want direct or buffered", p.ReadMode)
	case p.RandomDepth < 1 || p.RandomDepth > MaxIODepth:
		return fmt.Errorf("random_depth %d, want 1 to %d", p.RandomDepth, MaxIODepth)
	case !rate(p.RandomReadsPerSec, 1, 1e10):
		return fmt.Errorf("random_reads_per_s %g, want a rate from 1 to 1e10", p.RandomReadsPerSec)
	case p.GatherDepth < 0 || p.GatherDepth > MaxIODepth:
		return fmt.Errorf("gather_depth %d, want 0 (not measured) to %d", p.GatherDepth, MaxIODepth)
	case p.GatherDepth > 0 && !rate(p.GatherReadsPerSec, 1, 1e10):
		return fmt.Errorf("gather_reads_per_s %g at gather_depth %d, want a rate from 1 to 1e10", p.GatherReadsPerSec, p.GatherDepth)
	case p.SeqDepth < 1 || p.SeqDepth > MaxIODepth:
		return fmt.Errorf("seq_depth %d, want 1 to %d", p.SeqDepth, MaxIODepth)
	case p.SeqReadBytes < 1 || p.SeqReadBytes > 1<<30:
		return fmt.Errorf("seq_read_bytes %d, want 1 to %d", p.SeqReadBytes, 1<<30)
	case !rate(p.SeqBytesPerSec, 1<<10, 1e13):
		return fmt.Errorf("seq_bytes_per_s %g, want a rate from 1 KiB/s to 1e13", p.SeqBytesPerSec)
	case p.Rounds < 0 || p.Rounds > maxRounds:
		return fmt.Errorf("rounds %d, want 0 (one) to %d", p.Rounds, maxRounds)
	}
	for _, f := range []struct {
		name   string
		rs     []float64
		lo, hi float64
	}{{"random_reads_per_s_rounds", p.RandomRoundsPerS, 1, 1e10}, {"gather_reads_per_s_rounds", p.GatherRoundsPerS, 1, 1e10},
		{"seq_bytes_per_s_rounds", p.SeqRoundsBytesPerS, 1 << 10, 1e13}} {
		if len(f.rs) > max(p.Rounds, 1) {
			return fmt.Errorf("%s has %d entries, rounds %d", f.name, len(f.rs), p.Rounds)
		}
		for i, x := range f.rs {
			if !rate(x, f.lo, f.hi) {
				return fmt.Errorf("%s[%d] %g, want a rate from %g to %g", f.name, i, x, f.lo, f.hi)
			}
		}
	}
	return nil
}

// RandomReadSec is the device time of one random row read at the probe's
// depth: 1 / RandomReadsPerSec.
func (p *DeviceProfile) RandomReadSec() float64 { return 1 / p.RandomReadsPerSec }

// LimitReadSec is the device time of one random row read that a device
// limit is priced at, and the depth it was measured at: at GatherDepth
// where the profile has it (the depth the gather runs at), else at
// RandomDepth.
func (p *DeviceProfile) LimitReadSec() (sec float64, depth int) {
	if p.HasGatherRate() {
		return 1 / p.GatherReadsPerSec, p.GatherDepth
	}
	return p.RandomReadSec(), p.RandomDepth
}

// HasGatherRate reports whether p has a usable random rate at the
// gather's depth (GatherDepth, GatherReadsPerSec); profiles written
// before it was measured have none.
func (p *DeviceProfile) HasGatherRate() bool {
	return p.GatherReadsPerSec > 0 && !math.IsInf(p.GatherReadsPerSec, 0) && p.GatherDepth > 0
}

// GapRows is the break-even merge gap for rows of rowBytes
// (readplan.Gap): reading fewer unneeded rows than this between two
// needed ones costs less than a second random read.
func (p *DeviceProfile) GapRows(rowBytes int64) int64 {
	return readplan.Gap(p.RandomReadSec(), p.SeqBytesPerSec, rowBytes)
}

// ReadDeviceProfile reads dir's device.json; ErrNoDeviceProfile when
// there is none.
func ReadDeviceProfile(dir string) (*DeviceProfile, error) {
	path := filepath.Join(dir, FileDevice)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoDeviceProfile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	return ParseDeviceProfile(b, path)
}

// ParseDeviceProfile parses and validates a device profile (device.json's
// bytes, or 'ssdgnn probe --json' output); path names it in errors.
func ParseDeviceProfile(b []byte, path string) (*DeviceProfile, error) {
	var p DeviceProfile
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, &CorruptError{File: path, Index: -1, Offset: -1, Msg: err.Error()}
	}
	if err := p.Validate(); err != nil {
		return nil, &CorruptError{File: path, Index: -1, Offset: -1, Msg: err.Error()}
	}
	return &p, nil
}

// DeviceProfileOrDefault is dir's device.json, or DefaultDeviceProfile
// for rows of rowBytes where there is none; source says which:
// FileDevice or "default". A damaged device.json, or one probed for rows
// of another size (hand-edited, or left by a dataset replaced with other
// features: it survives --force), is an error that says how to mend it,
// not the default.
func DeviceProfileOrDefault(dir string, rowBytes int64) (p *DeviceProfile, source string, err error) {
	p, err = ReadDeviceProfile(dir)
	if errors.Is(err, ErrNoDeviceProfile) {
		return DefaultDeviceProfile(rowBytes), "default", nil
	}
	mend := fmt.Sprintf("re-run 'ssdgnn probe %s', or remove %s to price reads at the default costs", dir, filepath.Join(dir, FileDevice))
	if err != nil {
		return nil, "", fmt.Errorf("%w (%s)", err, mend)
	}
	if p.RowBytes != rowBytes {
		return nil, "", &CorruptError{File: filepath.Join(dir, FileDevice), Index: -1, Offset: -1,
			Msg: fmt.Sprintf("row_bytes %d: probed for rows of %d bytes, but the features' rows are %d bytes (%s)", p.RowBytes, p.RowBytes, rowBytes, mend)}
	}
	return p, FileDevice, nil
}

// WriteDeviceProfile writes p to dir's device.json atomically.
func WriteDeviceProfile(dir string, p *DeviceProfile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, FileDevice), append(b, '\n'))
}

// ProbeOptions tunes ProbeDevice. A nil *ProbeOptions means the defaults.
type ProbeOptions struct {
	// Duration of each phase (random, random at GatherDepth, sequential).
	// Default 1 s.
	Duration time.Duration
	// Depth is the random reads in flight. Default DefaultScatterDepth
	// (see DefaultGatherDepth for why not the gather's depth).
	Depth int
	// GatherDepth is the random reads in flight of a second random
	// phase, which measures DeviceProfile.GatherReadsPerSec. Default
	// DefaultGatherDepth; equal to Depth, the first phase's figure is
	// kept and no second phase runs.
	GatherDepth int
	// SeqReadBytes is the size of one sequential read. Default 1 MiB.
	SeqReadBytes int64
	// Buffered reads through the page cache. By default the probe reads
	// with O_DIRECT where the file system allows it: buffered figures
	// measure the page cache as much as the disk.
	Buffered bool
	// Seed picks the random rows and the sequential start.
	Seed uint64
	// Rounds is how many times each phase runs, for Duration/Rounds
	// each, the phases interleaved, so that a device whose rate moves
	// (other work on a shared disk) is sampled at several moments: the
	// profile keeps each phase's median and the rounds' rates. Default
	// 3, at most maxRounds.
	Rounds int
}

// maxRounds bounds ProbeOptions.Rounds.
const maxRounds = 100

// seqDepth is the sequential reads in flight of ProbeDevice.
const seqDepth = 4

// The bounds of ProbeOptions.SeqReadBytes: a block, and a read past which
// sequential throughput does not change (1 TiB asked for that much
// memory; 1 byte priced a "sequential" read that no gather makes).
const (
	minSeqReadBytes = 4 << 10
	maxSeqReadBytes = 64 << 20
)

// ProbeDevice measures random single-row reads (at o.Depth and at
// o.GatherDepth) and sequential reads of d's features file for
// o.Duration each, and at least one batch of reads per phase however
// short o.Duration is. The counts go to a private
// stage, not to the dataset's accounting.
func (d *Dataset) ProbeDevice(ctx context.Context, o *ProbeOptions) (*DeviceProfile, error) {
	var opt ProbeOptions
	if o != nil {
		opt = *o
	}
	if opt.Duration <= 0 {
		opt.Duration = time.Second
	}
	if opt.Depth <= 0 {
		opt.Depth = DefaultScatterDepth
	}
	if opt.GatherDepth <= 0 {
		opt.GatherDepth = DefaultGatherDepth
	}
	if opt.SeqReadBytes <= 0 {
		opt.SeqReadBytes = 1 << 20
	}
	if opt.Rounds <= 0 {
		opt.Rounds = 3
	}
	switch {
	case opt.Rounds > maxRounds:
		return nil, opterr.Errorf(ErrInvalidOptions, "%s %d: want at most %d", opterr.Field("Rounds"), opt.Rounds, maxRounds)
	case opt.Depth > MaxIODepth:
		return nil, opterr.Errorf(ErrInvalidOptions, "%s %d: want at most %d reads in flight", opterr.Field("Depth"), opt.Depth, MaxIODepth)
	case opt.GatherDepth > MaxIODepth:
		return nil, opterr.Errorf(ErrInvalidOptions, "%s %d: want at most %d reads in flight", opterr.Field("GatherDepth"), opt.GatherDepth, MaxIODepth)
	case opt.SeqReadBytes < minSeqReadBytes || opt.SeqReadBytes > maxSeqReadBytes:
		return nil, opterr.Errorf(ErrInvalidOptions, "%s %d bytes: want %d (a block) to %d bytes", opterr.Field("SeqReadBytes"), opt.SeqReadBytes, minSeqReadBytes, maxSeqReadBytes)
	}
	mode := ReadAuto
	if opt.Buffered {
		mode = ReadBuffered
	}
	st := NewAccounting().Stage("probe")
	r, err := d.OpenRowReader(FileFeatures, mode, st)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rows := (r.dataEnd - r.dataOff) / r.rowBytes
	if rows == 0 {
		return nil, fmt.Errorf("storage: probe: %s has no rows", r.name)
	}
	p := &DeviceProfile{Version: DeviceProfileVersion, MeasuredAt: time.Now().UTC().Truncate(time.Second),
		ReadMode: r.Mode().String(), RowBytes: r.rowBytes, RandomDepth: opt.Depth, SeqReadBytes: opt.SeqReadBytes}

	// run calls read from depth goroutines until the phase ends; read
	// returns the bytes it read.
	phase := max(opt.Duration/time.Duration(opt.Rounds), time.Nanosecond)
	run := func(depth int, read func(rng *rand.Rand, buf []byte) (int64, error)) (n, bytes int64, sec float64, err error) {
		pctx, cancel := context.WithTimeout(ctx, phase)
		defer cancel()
		var calls, total atomic.Int64
		errs := make([]error, depth)
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range depth {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(opt.Seed, uint64(w)))
				buf := make([]byte, max(opt.SeqReadBytes, r.rowBytes))
				// At least one read each, however short the phase: a
				// phase that ended before its first read measured a rate
				// of 0, refused as "random_reads_per_s 0" (probe
				// --duration 1ns).
				for first := true; ctx.Err() == nil && (first || pctx.Err() == nil); first = false {
					b, err := read(rng, buf)
					if err != nil {
						errs[w] = err
						return
					}
					calls.Add(1)
					total.Add(b)
				}
			})
		}
		wg.Wait()
		sec = time.Since(t0).Seconds()
		if err := errors.Join(errs...); err != nil {
			return 0, 0, 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, 0, err
		}
		return calls.Load(), total.Load(), sec, nil
	}

	// Random: batches of single-row reads through ReadScattered with the
	// engine training will use (io_uring where the kernel allows it), so
	// the figure is the device's rate as the gather reaches it, not the
	// cost of a pread system call on a busy core.
	if err := r.SetEngine(IOAuto); err != nil {
		return nil, err
	}
	p.RandomEngine = r.Engine().String()
	const batch = 1024
	reqs := make([]RowReq, batch)
	dst := make([]byte, batch*r.rowBytes)
	random := func(depth int) (float64, int64, error) {
		n, _, sec, err := run(1, func(rng *rand.Rand, _ []byte) (int64, error) {
			for k := range reqs {
				reqs[k] = RowReq{ID: rng.Int64N(rows), Pos: int64(k)}
			}
			return 0, r.ReadScattered(reqs, dst, ScatterOptions{Depth: depth})
		})
		if err != nil {
			return 0, 0, fmt.Errorf("storage: probe random reads at depth %d: %w", depth, err)
		}
		return float64(n*batch) / sec, n * batch, nil
	}

	// Sequential: seqDepth readers walking the file together in
	// SeqReadBytes steps, as merged extents are read a few at a time.
	p.SeqDepth = seqDepth
	perRead := max(1, opt.SeqReadBytes/r.rowBytes)
	if whole := rows * r.rowBytes; whole < p.SeqReadBytes {
		// Every read is of the whole file: record the size read, not the
		// size asked for (a 10-row, 160-byte features file printed
		// "sequential 1.0 MiB reads: 3.5 MiB/s" and stored 1 MiB).
		p.SeqReadBytes = whole
	}
	var cursor atomic.Int64
	cursor.Store(rand.New(rand.NewPCG(opt.Seed, 99)).Int64N(rows))
	sequential := func() (float64, int64, error) {
		_, bytes, sec, err := run(p.SeqDepth, func(_ *rand.Rand, buf []byte) (int64, error) {
			first := cursor.Add(perRead) - perRead
			if first >= rows {
				first = 0
				cursor.Store(perRead)
			}
			k := min(perRead, rows-first)
			return k * r.rowBytes, r.ReadRange(first, k, buf[:k*r.rowBytes])
		})
		if err != nil {
			return 0, 0, fmt.Errorf("storage: probe sequential reads: %w", err)
		}
		return float64(bytes) / sec, bytes, nil
	}

	p.Rounds = opt.Rounds
	p.GatherDepth = opt.Depth
	if opt.GatherDepth != opt.Depth {
		p.GatherDepth = opt.GatherDepth
	}
	for range opt.Rounds {
		rate, n, err := random(opt.Depth)
		if err != nil {
			return nil, err
		}
		p.RandomRoundsPerS, p.RandomReads = append(p.RandomRoundsPerS, rate), p.RandomReads+n
		if opt.GatherDepth != opt.Depth {
			if rate, _, err = random(opt.GatherDepth); err != nil {
				return nil, err
			}
			p.GatherRoundsPerS = append(p.GatherRoundsPerS, rate)
		}
		rate, bytes, err := sequential()
		if err != nil {
			return nil, err
		}
		p.SeqRoundsBytesPerS, p.SeqBytes = append(p.SeqRoundsBytesPerS, rate), p.SeqBytes+bytes
	}
	p.RandomReadsPerSec, p.SeqBytesPerSec = median(p.RandomRoundsPerS), median(p.SeqRoundsBytesPerS)
	p.GatherReadsPerSec = p.RandomReadsPerSec
	if len(p.GatherRoundsPerS) > 0 {
		p.GatherReadsPerSec = median(p.GatherRoundsPerS)
	}
	return p, p.Validate()
}
