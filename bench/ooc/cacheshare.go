package ooc

import (
	"fmt"

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
	args := h.shareArgs(ds)
	t, dir, err := cliflags.ParseTrain(args)
	if err != nil {
		return 0, fmt.Errorf("ooc: the ssdgnn child's flags: %w", err)
	}
	to := &t.Options
	// The caches are what the share sizes: a bare train --mem sets none.
	to.FeatCacheBytes, to.HistCacheBytes, to.NeighborCacheBytes = 0, 0, 0
	d, err := storage.Open(dir, nil)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	defer d.Close()
	// What the child resolves with the dataset open, as `ssdgnn train`
	// resolves it (Train.Resolve), for the child's budget and, when it
	// runs in a memory cgroup, that cgroup's limit.
	t.Mem = cliflags.ByteSize(o.MemLimit)
	var room int64
	if h.loc != nil {
		room = o.MemLimit
	}
	res, err := t.Resolve(d, dir, room)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
	defer res.Close()
	p, err := planner.LoadProfile(dir, ProfileName)
	if err != nil {
		return 0, fmt.Errorf("ooc: %w", err)
	}
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
