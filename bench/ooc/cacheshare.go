package ooc

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// trainCacheShare is the memory a bare `ssdgnn train DIR --mem MemLimit`
// with the ssdgnn configuration's flags gives its caches on ds (tables
// included): train.CacheShare with the benchmark's profile, which must
// exist. The ssdgnn child, planned with it, then trains with the caches
// the product's default path would build.
//
// The options are the child's own: its argument list (shareArgs) parsed
// by train's flag set (cliflags.ParseTrain), so a flag added to the
// configuration changes the share as it changes the child's budget.
func (h *harness) trainCacheShare(ds *Dataset) (int64, error) {
	o := &h.o
	c, err := h.openChild(h.shareArgs(ds), "the ssdgnn child's flags", nil)
	if err != nil {
		return 0, err
	}
	defer c.close()
	d, to, p := c.d, c.to, c.p
	cb, err := train.CacheShare(d, to, p, o.MemLimit)
	if err == nil {
		// The share can fit where the child, which judges --mem by
		// train's minimum, refuses it (a 450 MiB dataset under 150 MiB:
		// 11 MiB of caches here, "below the minimum of 196.8 MiB" in the
		// child, after the other configurations had run).
		var least int64
		if least, err = train.PlanFileMinimumBudget(d, to, o.MemLimit); err == nil && o.MemLimit < least {
			err = fmt.Errorf("%w: --mem %s is below the minimum of %s that train --plan accepts for this dataset and model",
				train.ErrBudget, bytefmt.Down(o.MemLimit), bytefmt.Up(least))
		}
	}
	if err != nil {
		// The child's --mem is --mem-limit: say so, the least that
		// trains, and which of bench ooc's flags change it (the message
		// names train's --mem).
		raise := "raise --mem-limit"
		if least := leastShareLimit(d, to, p); least > o.MemLimit {
			raise = "raise --mem-limit to at least " + bytefmt.Up(least)
		}
		return 0, fmt.Errorf("ooc: --mem-limit %s cannot train the ssdgnn configuration (its children get --mem %[1]s; %s, or lower --batch-size or --fanouts): %w",
			bytefmt.Down(o.MemLimit), raise, err)
	}
	return cb, nil
}

// leastShareLimit is the least --mem-limit under which the ssdgnn
// configuration trains on d: one that train --plan accepts
// (train.PlanFileMinimumBudget, which depends on the budget through the
// sampling workers and the read depth it gets) and under which
// train.CacheShare fits; 0 when none up to 1 EiB is.
func leastShareLimit(d *storage.Dataset, to *train.Options, p *planner.Profile) int64 {
	fits := func(m int64) bool {
		least, err := train.PlanFileMinimumBudget(d, to, m)
		if err != nil || m < least {
			return false
		}
		_, err = train.CacheShare(d, to, p, m)
		return err == nil
	}
	// Below the minimum with one worker and the least read depth (that
	// of a tiny budget) nothing is accepted.
	lo, err := train.PlanFileMinimumBudget(d, to, 1)
	if err != nil {
		return 0
	}
	lo--
	hi := max(lo+1, 1)
	for !fits(hi) {
		if hi > 1<<60 {
			return 0
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // fits(hi), !fits(lo)
		if mid := lo + (hi-lo)/2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// shareArgs is the ssdgnn child's argument list on ds after "train",
// less what planning gives it: --mem and --plan (configArgs), and the
// plan's cache sizes, which parse here as explicit zeros.
func (h *harness) shareArgs(ds *Dataset) []string {
	unplanned := *ds
	unplanned.Plan = new(Plan)
	_, flags := h.configFlags("ssdgnn", &unplanned)
	return append(h.trainArgs(ds.Dir, h.o.Epochs, "", "")[1:], flags...)
}

// configShare is what `ssdgnn train` with configuration name's flags on
// ds, under --mem MemLimit, leaves its caches (train.CacheShare, tables
// included), and the cache bytes the configuration's flags give it (0
// for one without caches).
func (h *harness) configShare(name string, ds *Dataset, profiles map[string]*planner.Profile) (share, given int64, err error) {
	_, flags := h.configFlags(name, ds)
	c, err := h.openChild(append(h.trainArgs(ds.Dir, h.o.Epochs, "", "")[1:], flags...), "configuration "+name+"'s flags", profiles)
	if err != nil {
		return 0, 0, err
	}
	defer c.close()
	if c.given == 0 {
		return 0, 0, nil
	}
	share, err = train.CacheShare(c.d, c.to, c.p, h.o.MemLimit)
	return share, c.given, err
}

// childSetup is a training child's options as `ssdgnn train` resolves them
// with its dataset open, under --mem MemLimit and, when it runs in a
// memory cgroup, that cgroup's limit (Train.Resolve), with the caches it
// was given (given, their sum) cleared, as a bare train --mem sets none;
// and the benchmark's profile, which must exist. close releases it.
type childSetup struct {
	d     *storage.Dataset
	res   *cliflags.Resolved
	to    *train.Options
	p     *planner.Profile
	given int64
}

// openChild parses args (after "train") with train's flag set
// (cliflags.ParseTrain), so a flag added to a configuration changes what
// it is given as it changes the child's budget; what names args in an
// error. The profile is read from profiles when it holds the dataset's
// (nil: always read), and kept there.
func (h *harness) openChild(args []string, what string, profiles map[string]*planner.Profile) (*childSetup, error) {
	t, dir, err := cliflags.ParseTrain(args)
	if err != nil {
		return nil, fmt.Errorf("ooc: %s: %w", what, err)
	}
	c := &childSetup{to: &t.Options}
	c.given = c.to.FeatCacheBytes + c.to.HistCacheBytes + c.to.NeighborCacheBytes
	c.to.FeatCacheBytes, c.to.HistCacheBytes, c.to.NeighborCacheBytes = 0, 0, 0
	if c.d, err = storage.Open(dir, nil); err != nil {
		return nil, fmt.Errorf("ooc: %w", err)
	}
	t.Mem = cliflags.ByteSize(h.o.MemLimit)
	var room int64
	if h.loc != nil {
		room = h.o.MemLimit
	}
	if c.res, err = t.Resolve(c.d, dir, room); err != nil {
		c.d.Close()
		return nil, fmt.Errorf("ooc: %s: %w", what, err)
	}
	if c.p = profiles[dir]; c.p == nil {
		if c.p, err = planner.LoadProfile(dir, ProfileName); err != nil {
			c.close()
			return nil, fmt.Errorf("ooc: %w", err)
		}
		if profiles != nil {
			profiles[dir] = c.p
		}
	}
	return c, nil
}

func (c *childSetup) close() {
	c.res.Close()
	c.d.Close()
}

// checkConfigsFit refuses, before the first configuration runs, a run in
// which a configuration's training child would refuse the caches it is
// given under --mem MemLimit ("memory budget too small: planned sizes"):
// the plan is sized by the ssdgnn configuration's share (or
// --cache-budget), and a configuration whose batches, reads or neighbour
// source hold more leaves its caches less. It names each such
// configuration and a --cache-budget under which all of them train.
// Before, only the ssdgnn configuration was checked (trainCacheShare,
// and only without --cache-budget): under --mem-limit 110 MiB (330 MiB
// of data, --batch-size 300 --fanouts 5,5,5) six of ten children were
// refused after up to 14 s each, short by 0.7 KiB to 23 MiB, and their
// rows read FAILED.
func (h *harness) checkConfigsFit(ds *Dataset) error {
	var short []string
	least := int64(math.MaxInt64)
	profiles := map[string]*planner.Profile{} // one read per dataset, not per configuration
	for _, name := range h.o.Configs {
		cds := ds
		if partitionMajor(name) {
			cds = ds.PM
		}
		if cds == nil || cds.Plan == nil {
			continue
		}
		share, given, err := h.configShare(name, cds, profiles)
		if errors.Is(err, train.ErrBudget) {
			short = append(short, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		if err != nil {
			return err
		}
		if given <= 0 { // no caches (mmap-baseline)
			continue
		}
		least = min(least, share)
		if share < given {
			short = append(short, fmt.Sprintf("%s (given %s of caches, it leaves them %s less)", name, bytefmt.Up(given), bytefmt.Up(given-share)))
		}
	}
	if len(short) == 0 {
		return nil
	}
	fix := "raise --mem-limit"
	if least > 0 && least < math.MaxInt64 {
		fix += ", give --cache-budget " + bytefmt.Down(least) + " or less"
	}
	return fmt.Errorf("ooc: --mem-limit %s cannot train %d of the configurations with the caches this run gives them (their training children would refuse their --mem): %s; %s, or leave them out of --configs: %w",
		bytefmt.Down(h.o.MemLimit), len(short), strings.Join(short, "; "), fix, train.ErrBudget)
}
