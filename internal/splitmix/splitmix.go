// Package splitmix holds SplitMix64's output function, the 64-bit mixer
// that the sampler's streams, the generator's hashes and the planner's
// deterministic draws share. Both functions are bijections of uint64, and
// their values are part of on-disk and seeded results: changing them
// changes every seeded batch, generated graph and profile.
package splitmix

// Finalize is SplitMix64's finaliser: a bijective 64-bit mix.
func Finalize(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Mix is one SplitMix64 step from state z: Finalize(z + the golden
// gamma).
func Mix(z uint64) uint64 { return Finalize(z + 0x9e3779b97f4a7c15) }
