// Package cliflags holds the command-line flags that more than one place
// parses: the size flag type, the read and neighbour-source flags that
// train, profile and rr share, and train's whole flag set.
//
// Train's flags live here, not in cmd/ssdgnn, because bench ooc must know
// the options its training children will run with before it starts them
// (it plans their caches for the share their budget leaves): ParseTrain
// parses a child's argument list with the very flag set the child's train
// command registers, so the two cannot drift apart.
//
// Invariants: every parse is of flags alone. What depends on the dataset
// (an "auto" selection, feature read mode or neighbour source, the
// partition files, the memory plan) is resolved by the caller, which has
// the dataset open.
package cliflags

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"

	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
)

// DefaultFanouts is the --fanouts default of train, profile and rr: the
// trainer's default model is 2 layers, and a bare profile must predict
// what a bare train does (a 3-hop profile overstated a 2-hop training's
// feature-cache savings 10.9-fold, docs/train.md).
const DefaultFanouts = "10,10"

// BatchSizeUsage is the help text of every command's --batch-size.
const BatchSizeUsage = "training nodes per batch (partition batches: a macro batch cut evenly into batches of at most 1.25x this)"

// MaxByteSize is the largest size flag accepted, 1 EiB: far beyond any
// machine, and small enough that sums of a few sizes cannot overflow int64.
const MaxByteSize = 1 << 60

// ByteSize is a pflag.Value for sizes such as "512MiB" or "4GB".
type ByteSize int64

func (b *ByteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return humanize.IBytes(uint64(*b))
}

// Set parses s; sizes above MaxByteSize are refused.
func (b *ByteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("size %q: want a number with an optional unit such as 512MiB or 4GB", s)
	}
	if n > MaxByteSize {
		return fmt.Errorf("size %q is %s, beyond the largest accepted (%s)", s, humanize.IBytes(n), humanize.IBytes(MaxByteSize))
	}
	// Without a unit (or with B alone) the number is a count of bytes and
	// must be whole: "1.9B" was 1 byte.
	num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "b"))
	if f, err := strconv.ParseFloat(num, 64); err == nil && f != math.Trunc(f) {
		return fmt.Errorf("size %q: a byte count must be a whole number (or give a unit such as KiB)", s)
	}
	*b = ByteSize(n)
	return nil
}

// Type names the value in usage text.
func (b *ByteSize) Type() string { return "size" }

// RegisterGlobal registers the flags every ssdgnn command shares.
func RegisterGlobal(f *pflag.FlagSet, quiet, verbose *bool) {
	f.BoolVarP(quiet, "quiet", "q", false, "no progress bars")
	f.BoolVarP(verbose, "verbose", "v", false, "debug logging on stderr")
}

// Inapplicable refuses any of the named flags given explicitly while off
// holds (by says what makes them meaningless: "with --no-hist"): a value the run would
// silently ignore ('--no-hist --hist-cache 10MiB', '--heads 3' for
// GraphSAGE) is a mistake the user should hear of.
func Inapplicable(f *pflag.FlagSet, off bool, by string, names ...string) error {
	if !off {
		return nil
	}
	for _, name := range names {
		if f.Changed(name) {
			return fmt.Errorf("--%s has no effect %s", name, by)
		}
	}
	return nil
}

// ParseInts parses flag's comma-separated list such as "10,10,10".
func ParseInts(flag, s string) ([]int, error) {
	var out []int
	for i, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--%s %q: entry %d (from 0): want an integer", flag, s, i)
		}
		out = append(out, n)
	}
	return out, nil
}

// RequirePositive fails when one of the named flags was given explicitly
// with a value of 0 or less. It guards flags whose zero value only stands
// for "use the default": an explicit 0 used to be replaced silently by
// the default. Omitting the flag still gives the default.
func RequirePositive(f *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		fl := f.Lookup(name)
		if fl == nil || !fl.Changed {
			continue
		}
		s := fl.Value.String()
		x, err := strconv.ParseFloat(s, 64)
		if b, ok := fl.Value.(*ByteSize); ok {
			x, err = float64(*b), nil
		}
		if err == nil && x <= 0 {
			def := ""
			if fl.DefValue != "0" && fl.DefValue != "" {
				def = ", " + fl.DefValue
			}
			return fmt.Errorf("--%s %s: want a positive value (omit the flag for the default%s)", name, s, def)
		}
	}
	return nil
}

// StreamingMem fits the --mem of a streaming command (gen, import,
// relabel, export), the budget of the whole process, to the memory cgroup
// it runs in and checks it. Not given (f), it becomes the cgroup's limit
// (membudget.CgroupBudget: the budget already leaves the page cache of
// the files written its room) when that is below the default def, so the
// default is not OOM-killed under a smaller limit (relabel's 256 MiB was,
// in a 128 MiB cgroup); the line saying so goes to w. Training's --mem
// defaults to the cgroup's limit too (train.DefaultMem). A limit below
// the command's least (least, 0 when it is known only later) is an error
// naming the least limit: the user gave no --mem to blame. A given --mem
// below least is refused naming the least and what it holds (holds), and
// one above the cgroup's limit too (cgroup.WithinLimit).
func StreamingMem(f *pflag.FlagSet, w io.Writer, mem *ByteSize, def, least int64, holds string) error {
	if f.Changed("mem") {
		if int64(*mem) < least {
			return fmt.Errorf("--mem %s: want at least %s (%s)", bytefmt.Down(int64(*mem)), bytefmt.Up(least), holds)
		}
		return cgroup.WithinLimit(int64(*mem))
	}
	l, ok := cgroup.SelfMemoryLimit()
	if !ok {
		return nil
	}
	fit := membudget.CgroupBudget(l)
	if fit >= def {
		return nil
	}
	if fit < least {
		return fmt.Errorf("the memory cgroup's limit (%s) is below this command's least --mem of %s: raise the limit to at least %s",
			bytefmt.Down(l), bytefmt.Up(least), bytefmt.Up(least))
	}
	fit = max(fit, 1<<20) // the command refuses what is too small
	*mem = ByteSize(fit)
	fmt.Fprintf(w, "--mem %s: the memory cgroup's limit (the page cache of the files written has its room inside it)\n",
		humanize.IBytes(uint64(fit)))
	return nil
}
