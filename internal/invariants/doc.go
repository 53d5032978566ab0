// Package invariants switches on assertions that cost nothing in release
// builds (the pattern of pebble's internal/invariants). Built with
// `-tags invariants` (make test's race run uses it), Enabled is true and
// code guarded by it checks what the open-time checks already promise,
// such as every sampled node id being in range, and panics on a violation:
// such a panic is a bug in ssdgnn, not bad data, which Open rejects with
// an error. Without the tag Enabled is a false constant and the compiler
// removes the guarded code.
package invariants
