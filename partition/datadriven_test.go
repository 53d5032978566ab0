package partition

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDataDriven reads testdata/*.txt. Each file builds one graph and runs
// methods on it; the output (stats and each part's members as id ranges)
// is compared with the .golden file next to it (-update rewrites).
//
// Commands, one a line ('#' starts a comment):
//
//	cliques C S         C disjoint cliques of S nodes, ids contiguous
//	path N              a path over N nodes
//	edge U V            an undirected edge
//	train-every M       every M-th node (0, M, 2M, ...) is a training node
//	run ARGS            run with ARGS: method=, k=, k1=, passes=, order=,
//	                    seed=, lambda=, epsilon=, workers=, refine=
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			got := runScript(t, file)
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (rerun with -update to accept):\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func runScript(t *testing.T, file string) string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		g   *graph
		out strings.Builder
		dir = t.TempDir()
	)
	atoi := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return v
	}
	sc := bufio.NewScanner(f)
	built := false
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		fs := strings.Fields(line)
		switch fs[0] {
		case "cliques":
			g = cliques(atoi(fs[1]), atoi(fs[2]))
		case "path":
			g = newGraph(atoi(fs[1]))
			for v := 1; v < len(g.adj); v++ {
				g.edge(int64(v-1), int64(v))
			}
		case "edge":
			g.edge(int64(atoi(fs[1])), int64(atoi(fs[2])))
		case "train-every":
			m := atoi(fs[1])
			for v := 0; v < len(g.adj); v += m {
				g.train = append(g.train, int64(v))
			}
		case "run":
			if !built {
				g.finish()
				g.write(t, dir)
				built = true
			}
			o := &Options{Workers: 2}
			for _, kv := range fs[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "method":
					o.Method = Method(v)
				case "k":
					o.Parts = atoi(v)
				case "k1":
					o.FirstLevel = atoi(v)
				case "passes":
					o.Passes = atoi(v)
				case "order":
					o.Order = v
				case "seed":
					o.Seed = int64(atoi(v))
				case "refine":
					o.Refine = atoi(v)
				case "workers":
					o.Workers = atoi(v)
				case "lambda":
					x, _ := strconv.ParseFloat(v, 64)
					o.Lambda, o.NoLambda = x, x == 0
				case "epsilon":
					o.Epsilon, _ = strconv.ParseFloat(v, 64)
				default:
					t.Fatalf("%s:%d: unknown run argument %q", file, ln, kv)
				}
			}
			o.Name = fmt.Sprintf("run%d", ln)
			fmt.Fprintf(&out, "%s\n", line)
			out.WriteString(describeRun(t, dir, o))
		default:
			t.Fatalf("%s:%d: unknown command %q", file, ln, fs[0])
		}
	}
	return out.String()
}

// describeRun runs o and renders the result deterministically.
func describeRun(t *testing.T, dir string, o *Options) string {
	d := openDataset(t, dir)
	defer d.Close()
	st, err := Run(d, o)
	if err != nil {
		return fmt.Sprintf("  error: %v\n", err)
	}
	p, err := Open(dir, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Verify(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  k=%d k1=%d k2=%d cut=%.4f cut_edges=%d max_nodes=%d max_train=%d empty=%d\n",
		st.K, st.K1, st.K2, st.EdgeCut, st.CutEdges, st.MaxNodes, st.MaxTrain, st.EmptyParts)
	for q := range p.K() {
		m := p.Members(q)
		fmt.Fprintf(&b, "  part %d: %d nodes %d train: %s\n", q, len(m), len(p.TrainMembers(q)), ranges(m))
	}
	return b.String()
}

// ranges renders sorted ids as "0-24 30 32-33".
func ranges(ids []int64) string {
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.FormatInt(ids[i], 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "(empty)"
	}
	return strings.Join(parts, " ")
}
