#!/usr/bin/env bash
# capped-run.sh LIMIT CMD...: run CMD inside a fresh memory cgroup limited to
# LIMIT bytes (page cache included, as the kernel charges it), then print the
# cgroup's peak usage, how often it hit the limit, and whether anything was
# OOM-killed. Needs root and a cgroup v1 memory controller or cgroup v2.
# Without them it runs CMD uncapped and says so.
set -u
limit=$1; shift
name="ssdgnn-capped-$$"
# /usr/bin/time reports max RSS and fs inputs; without it (a bare GPU
# machine) the cgroup's own counters are all there is.
tm=()
[ -x /usr/bin/time ] && tm=(/usr/bin/time -f 'time: %e s wall, %U s user, %S s sys, max RSS %M KiB, fs inputs %I x 512 B')
v1=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
if [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then
  cg="/sys/fs/cgroup/memory$v1/$name"
  mkdir "$cg" || { echo "capped-run: cannot create $cg; running uncapped" >&2; exec "$@"; }
  echo "$limit" > "$cg/memory.limit_in_bytes"
  ( echo $BASHPID > "$cg/cgroup.procs"; exec "${tm[@]}" "$@" )
  rc=$?
  echo "cgroup: limit $(cat $cg/memory.limit_in_bytes) B, peak $(cat $cg/memory.max_usage_in_bytes) B, hit limit $(cat $cg/memory.failcnt) times, oom_kill $(awk '$1=="oom_kill"{print $2}' $cg/memory.oom_control 2>/dev/null || echo ?)"
  rmdir "$cg" 2>/dev/null
  exit $rc
fi
v2=$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)
if [ -n "$v2" ] && [ -f "/sys/fs/cgroup$v2/cgroup.controllers" ]; then
  # A child gets memory.max only where its parent enables the memory
  # controller for children, which cgroup v2 refuses in a non-root cgroup
  # that holds processes itself (a GPU machine's shell sits in one). Try our
  # own cgroup, then the root, which is exempt from that rule.
  cg=
  for parent in "/sys/fs/cgroup$v2" /sys/fs/cgroup; do
    grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null || echo +memory > "$parent/cgroup.subtree_control" 2>/dev/null
    mkdir "$parent/$name" 2>/dev/null || continue
    if [ -f "$parent/$name/memory.max" ]; then cg="$parent/$name"; break; fi
    rmdir "$parent/$name"
  done
  [ -n "$cg" ] || { echo "capped-run: no cgroup with a memory controller to create; running uncapped" >&2; exec "$@"; }
  echo "$limit" > "$cg/memory.max"
  ( echo $BASHPID > "$cg/cgroup.procs"; exec "${tm[@]}" "$@" )
  rc=$?
  echo "cgroup: $cg limit $(cat $cg/memory.max) B, peak $(cat $cg/memory.peak 2>/dev/null || echo ?) B, events: $(tr '\n' ' ' < $cg/memory.events)"
  rmdir "$cg" 2>/dev/null
  exit $rc
fi
echo "capped-run: no writable memory cgroup; running uncapped" >&2
exec "$@"
