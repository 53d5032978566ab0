package extsort

// source is one sorted input of a merge: a run file or the sorted in-memory
// buffer (packed or wide).
type source struct {
	cur  Edge
	idx  int // position among the merge's inputs, input order for ByRow
	r    *runReader
	keys []uint64
	dsts []uint32 // ByRow: keys hold Src<<32 | position, dsts[position] the Dst
	wide []Edge
}

// advance loads the next edge into cur.
func (s *source) advance() (bool, error) {
	switch {
	case s.r != nil:
		e, ok, err := s.r.next()
		s.cur = e
		return ok, err
	case len(s.keys) > 0:
		if s.dsts != nil {
			k := s.keys[0]
			s.cur = Edge{Src: int64(k >> 32), Dst: int64(s.dsts[uint32(k)])}
		} else {
			s.cur = unpackEdge(s.keys[0])
		}
		s.keys = s.keys[1:]
		return true, nil
	case len(s.wide) > 0:
		s.cur = s.wide[0]
		s.wide = s.wide[1:]
		return true, nil
	}
	return false, nil
}

// merger merges sources with a binary min-heap on cur: by (Src, Dst), or
// with orderByRow by (Src, source position), which keeps input order
// among equal Src when the sources are consecutive parts of the input.
type merger struct {
	all     []*source // every source, for closing
	heap    []*source
	byRow   bool
	dedup   bool
	dups    *int64
	last    Edge
	hasLast bool
	primed  bool
	err     error
}

func newMerger(srcs []*source, ord order, dups *int64) *merger {
	for i, s := range srcs {
		s.idx = i
	}
	return &merger{all: srcs, byRow: ord == orderByRow, dedup: ord == orderStrict, dups: dups}
}

// less orders two heap entries.
func (m *merger) less(a, b *source) bool {
	if m.byRow {
		return a.cur.Src < b.cur.Src || (a.cur.Src == b.cur.Src && a.idx < b.idx)
	}
	return lessEdge(a.cur, b.cur)
}

func (m *merger) prime() {
	m.primed = true
	m.heap = make([]*source, 0, len(m.all))
	for _, s := range m.all {
		ok, err := s.advance()
		if err != nil {
			m.err = err
			return
		}
		if ok {
			m.heap = append(m.heap, s)
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

func (m *merger) down(i int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m.less(h[r], h[l]) {
			c = r
		}
		if !m.less(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// next returns the next merged edge. After false, m.err says why.
func (m *merger) next() (Edge, bool) {
	if !m.primed {
		m.prime()
	}
	for m.err == nil && len(m.heap) > 0 {
		top := m.heap[0]
		e := top.cur
		ok, err := top.advance()
		if err != nil {
			m.err = err
			return Edge{}, false
		}
		if !ok {
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap[last] = nil
			m.heap = m.heap[:last]
		}
		if len(m.heap) > 1 {
			m.down(0)
		}
		if m.dedup && m.hasLast && e == m.last {
			*m.dups++
			continue
		}
		m.last, m.hasLast = e, true
		return e, true
	}
	return Edge{}, false
}

// close closes every run reader and drops the memory sources.
func (m *merger) close() error {
	var first error
	for _, s := range m.all {
		if s.r != nil {
			if err := s.r.close(); err != nil && first == nil {
				first = err
			}
		}
		s.keys, s.dsts, s.wide = nil, nil, nil
	}
	m.heap = nil
	return first
}

// Iterator streams the sorted edges. It is created by Sorter.Sort and owned
// by its Sorter; Sorter.Close also closes it.
type Iterator struct {
	s    *Sorter
	m    *merger
	runs []run // run files this iterator reads and must remove
	err  error
	done bool
}

// Next returns the next edge in (Src, Dst) order (with Options.ByRow, in
// Src order, equal Src in input order). It returns false at the
// end of the stream, after an error (see Err) and after Close.
func (it *Iterator) Next() (Edge, bool) {
	if it.done {
		return Edge{}, false
	}
	e, ok := it.m.next()
	if !ok {
		it.err = it.m.err
		// Exhausted or failed: release files and memory now.
		if err := it.release(); err != nil && it.err == nil {
			it.err = err
		}
		return Edge{}, false
	}
	return e, true
}

// Err returns the error that ended iteration, if any. A corrupt run yields
// an error matching ErrCorrupt.
func (it *Iterator) Err() error { return it.err }

// Close ends iteration, closes and removes the iterator's run files. If the
// stream was not exhausted, later calls to Err return ErrClosed so that a
// truncated stream is never mistaken for a complete one. It is safe to
// call more than once.
func (it *Iterator) Close() error {
	if !it.done && it.err == nil {
		it.err = ErrClosed
	}
	return it.release()
}

func (it *Iterator) release() error {
	if it.done {
		return nil
	}
	it.done = true
	err := it.m.close()
	for _, r := range it.runs {
		if rerr := it.s.removeFile(r.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	it.runs = nil
	it.s.releaseBuffers()
	return err
}
