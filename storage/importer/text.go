package importer

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/csvnum"
)

// textReader opens path (gzip if it ends in .gz) as numeric delimited text.
func (j *job) textReader(path string, opts *csvnum.Options) (*csvnum.Reader, func(), error) {
	rc, size, err := openText(path)
	if err != nil {
		return nil, nil, err
	}
	j.addBytesIn(size)
	o := csvnum.Options{}
	if opts != nil {
		o = *opts
	}
	o.MaxLine = MaxTextLine // counted in ReserveBytes
	return csvnum.NewReader(rc, path, &o), func() { rc.Close() }, nil
}

// readTextEdges streams "src<delim>dst" lines into the sorter, checking
// every id against N when N is known. It returns the number of edges read.
func (j *job) readTextEdges(path string, opts *csvnum.Options) (int64, error) {
	r, done, err := j.textReader(path, opts)
	if err != nil {
		return 0, err
	}
	defer done()
	before := j.rep.EdgesRead
	pair := make([]int64, 2)
	for r.Next() {
		pair, err = r.Int64sN(pair, 2)
		if err != nil {
			if opts != nil { // an edge list: say what the line may be
				err = edgeListHint(err, r, opts.Delim, j.rep.EdgesRead == before)
			}
			return 0, badInput(err)
		}
		if msg := j.edgeMsg(pair[0], pair[1]); msg != "" {
			return 0, lineErr(path, r.Line(), "%s", msg)
		}
		if err := j.addEdge(pair[0], pair[1]); err != nil {
			return 0, err
		}
	}
	if err := r.Err(); err != nil {
		return 0, badInput(err)
	}
	return j.rep.EdgesRead - before, nil
}

// edgeListHint adds to a parse error of an edge-list line what the line
// probably is, when that is clear: a header line (letters on the first
// data line), a third column (weights, timestamps), or a whole line read
// as one field (comma- or semicolon-separated, read with another
// delimiter, or blank-separated read with --delim , or tab). Without it the error said only "invalid integer
// "src"" or "got 3 fields, want 2".
func edgeListHint(err error, r *csvnum.Reader, delim byte, first bool) error {
	var pe *csvnum.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	hint := ""
	switch {
	case errors.Is(err, csvnum.ErrSyntax) && pe.Field != "" && isLetter(pe.Field[0]):
		if first {
			hint = "a header line? skip it with --comment (Options.Comment), e.g. --comment " + strings.Fields(pe.Field)[0]
		} else {
			hint = "node ids must be integers 0..N-1; map named nodes to integers first"
		}
	case errors.Is(err, csvnum.ErrColumns) && r.NumFields() > 2:
		hint = "an edge line is \"src dst\"; weights and other columns are not read: keep the first two (e.g. cut -f1,2, or awk '{print $1, $2}')"
	case errors.Is(err, csvnum.ErrColumns) && r.NumFields() == 1:
		line := bytes.TrimSpace(r.Bytes())
		if i := bytes.IndexAny(line, ",;|"); i >= 0 && line[i] != delim {
			hint = fmt.Sprintf("is it %q-separated? pass --delim %c (Options.Delim)", line[i], line[i])
		} else if delim != ' ' && delim != 0 && bytes.ContainsAny(line, " \t") {
			hint = "are its fields separated by blanks? pass --delim whitespace (Options.Delim ' ')"
		}
	}
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w; %s", err, hint)
}

func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// copyTextFeatures streams comma-separated feature rows, one per node in
// node order. The first row fixes the width; every later row must match.
func (j *job) copyTextFeatures(path string) error {
	r, done, err := j.textReader(path, nil)
	if err != nil {
		return err
	}
	defer done()
	var fw *featWriter
	var row []float32
	var row64 []float64 // a float16 destination's rows, parsed at 64 bits
	var width int
	for r.Next() {
		nf := r.NumFields()
		if fw == nil {
			width = nf
			if fw, err = j.startFeatures(path, int64(nf)); err != nil {
				return err
			}
		} else if nf != width {
			return lineErr(path, r.Line(), "feature row has %d values, want %d (the width of the first row)", nf, width)
		}
		if fw.rows >= j.numNodes {
			return lineErr(path, r.Line(), "more feature rows than nodes (%s)", j.nodeCount())
		}
		if fw.f16 {
			// Parsed at 64 bits and rounded once to float16 (write64):
			// a float32 parse rounds twice, and a value that it rounds
			// onto a float16 midpoint was stored one ulp off.
			if row64, err = r.Float64sN(row64, width); err != nil {
				return badInput(err)
			}
			row = slices.Grow(row[:0], width)[:width]
			fw.line = r.Line()
			if err := fw.write64(row64, row); err != nil {
				return err
			}
			continue
		}
		if row, err = r.Float32sN(row, width); err != nil {
			return badInput(err)
		}
		fw.line = r.Line()
		if err := fw.write(row); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return badInput(err)
	}
	if fw == nil {
		if j.numNodes == 0 {
			return nil
		}
		return fileErr(path, "no feature rows, want one per node (%s)", j.nodeCount())
	}
	return fw.commit(path)
}

// parseLabel parses one label field: an integer, an integral float such
// as "3.0", or "nan" (unlabelled).
func parseLabel(b []byte) (float64, bool) {
	b = bytes.TrimSpace(b)
	s := unsafe.String(unsafe.SliceData(b), len(b))
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return float64(i), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// copyTextLabels streams one label per line, in node order.
func (j *job) copyTextLabels(path string) error {
	r, done, err := j.textReader(path, nil)
	if err != nil {
		return err
	}
	defer done()
	lw, err := j.startLabels()
	if err != nil {
		return err
	}
	for r.Next() {
		if nf := r.NumFields(); nf != 1 {
			return lineErr(path, r.Line(), "got %d fields, want 1 label", nf)
		}
		x, ok := parseLabel(r.Bytes())
		if !ok {
			return lineErr(path, r.Line(), "invalid label %q", truncate(r.Bytes()))
		}
		if msg := lw.add(x); msg != "" {
			return lineErr(path, r.Line(), "%s", msg)
		}
		if err := lw.flush(false); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return badInput(err)
	}
	return lw.commit(path)
}

// readTextSplit reads one node id per line into ids, checking each with c.
func (j *job) readTextSplit(path string, k int, c *splitChecker) ([]int64, error) {
	r, done, err := j.textReader(path, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	var ids []int64
	one := make([]int64, 1)
	for r.Next() {
		if one, err = r.Int64sN(one, 1); err != nil {
			return nil, badInput(err)
		}
		if msg := c.add(one[0], k); msg != "" {
			return nil, lineErr(path, r.Line(), "%s", msg)
		}
		ids = append(ids, one[0])
	}
	if err := r.Err(); err != nil {
		return nil, badInput(err)
	}
	return ids, nil
}

// readTextInts reads a small file of one integer per line (OGB's
// num-node-list and num-edge-list).
func (j *job) readTextInts(path string) ([]int64, error) {
	r, done, err := j.textReader(path, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []int64
	one := make([]int64, 1)
	for r.Next() {
		if one, err = r.Int64sN(one, 1); err != nil {
			return nil, badInput(err)
		}
		out = append(out, one[0])
		if len(out) > 1<<20 {
			return nil, lineErr(path, r.Line(), "too many lines for a count file")
		}
	}
	if err := r.Err(); err != nil {
		return nil, badInput(err)
	}
	return out, nil
}

func truncate(b []byte) string {
	s := string(b)
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
