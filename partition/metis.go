package partition

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/ssdgnn/ssdgnn/storage"
)

// runMetis writes d as a METIS graph file, runs gpmetis and reads the
// partition back. It exists for quality comparison only.
func runMetis(d *storage.Dataset, o *Options) (result, error) {
	if d.NumEdges() == 0 {
		// gpmetis's own words: "The supplied nvtxs:100 and nedges:0 must
		// be positive."
		return result{}, fmt.Errorf("%w: --method metis needs a graph with edges; %s has %d nodes and none: use fennel or random", ErrOptions, d.Dir(), d.NumNodes())
	}
	bin, err := exec.LookPath("gpmetis")
	if err != nil {
		return result{}, fmt.Errorf("%w: %w", ErrNoMetis, err)
	}
	tmp, err := os.MkdirTemp("", "ssdgnn-metis-")
	if err != nil {
		return result{}, fmt.Errorf("partition: %w", err)
	}
	defer os.RemoveAll(tmp)
	graph := filepath.Join(tmp, "graph")
	if err := writeMetisGraph(d, graph); err != nil {
		return result{}, err
	}
	k := o.Parts
	res := result{k: k, k1: k, k2: 1}
	if k == 1 {
		res.part = make([]int32, d.NumNodes())
		return res, nil
	}
	t0 := time.Now()
	cmd := exec.CommandContext(o.ctx, bin, fmt.Sprintf("-seed=%d", o.Seed), graph, strconv.Itoa(k))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("partition: gpmetis: %w: %s", err, tail(out))
	}
	res.extSeconds = time.Since(t0).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.extRSS = ru.Maxrss * 1024
	}
	res.part, err = readMetisPart(graph+".part."+strconv.Itoa(k), d.NumNodes(), k)
	return res, err
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// writeMetisGraph writes the undirected simple graph underlying d: 1-based
// ids, no self loops, no duplicate edges. Directed edges are symmetrised.
func writeMetisGraph(d *storage.Dataset, path string) error {
	n := d.NumNodes()
	// Symmetrise without assuming the dataset is: count u->v and v->u.
	// For a symmetric dataset (the normal case) this is the identity.
	adj := func(v int64, buf []int64) []int64 {
		buf = d.Neighbors(v).AppendTo(buf[:0])
		slices.Sort(buf)
		return slices.Compact(buf)
	}
	var m int64
	var buf []int64
	asym := false
	for v := range n {
		buf = adj(v, buf)
		for _, u := range buf {
			if u == v {
				continue
			}
			m++
			if !asym {
				nb := d.Neighbors(u)
				found := false
				for i := range nb.Len() {
					if nb.At(i) == v {
						found = true
						break
					}
				}
				asym = !found
			}
		}
	}
	if asym {
		return fmt.Errorf("partition: metis: dataset %s is not symmetric; gpmetis needs an undirected graph", d.Dir())
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, "%d %d\n", n, m/2)
	var line []byte
	for v := range n {
		buf = adj(v, buf)
		line = line[:0]
		for _, u := range buf {
			if u == v {
				continue
			}
			if len(line) > 0 {
				line = append(line, ' ')
			}
			line = strconv.AppendInt(line, u+1, 10)
		}
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	return f.Close()
}

func readMetisPart(path string, n int64, k int) ([]int32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("partition: gpmetis output: %w", err)
	}
	defer f.Close()
	part := make([]int32, 0, n)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, err := strconv.Atoi(sc.Text())
		if err != nil || p < 0 || p >= k {
			return nil, &CorruptError{File: path, Index: int64(len(part)), Offset: -1, Msg: fmt.Sprintf("bad part %q", sc.Text())}
		}
		part = append(part, int32(p))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if int64(len(part)) != n {
		return nil, &CorruptError{File: path, Index: -1, Offset: -1, Msg: fmt.Sprintf("%d lines, want %d", len(part), n)}
	}
	return part, nil
}
