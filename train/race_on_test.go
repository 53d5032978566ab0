//go:build race

package train

// raceEnabled: the race detector multiplies memory use, so memory-budget
// tests under a real limit skip.
const raceEnabled = true
