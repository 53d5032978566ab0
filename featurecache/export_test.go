package featurecache

// SetFillChunk sets the rows of one fill read plan and returns a function
// that restores it (tests only).
func SetFillChunk(n int) (restore func()) {
	old := fillChunk
	fillChunk = n
	return func() { fillChunk = old }
}
