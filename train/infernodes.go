package train

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// Node-list specifications that InferNodes accepts besides a file.
const (
	NodesTest  = "test"
	NodesValid = "valid"
	NodesAll   = "all"
)

// InferNodes resolves ssdgnn infer's --nodes to the dataset's ids, in the
// order of the output rows: NodesTest, NodesValid, NodesAll, or the path
// of a 1-D .npy of ids of any integer dtype. On a relabelled dataset the
// ids a user gives, and the row order, are the original dataset's; the
// ids returned are the copy's. A file's id count is checked against mem
// (CheckNodeList; 0: none) from its header, before its ids are read.
// Errors wrap ErrNodeList (a list --mem cannot hold: ErrBudget) and name
// the file and the element.
func (t *Trainer) InferNodes(spec string, mem int64) ([]int64, error) {
	d := t.d
	idm := d.IDMap()
	switch spec {
	case NodesTest, NodesValid:
		nodes := d.TestIdx()
		if spec == NodesValid {
			nodes = d.ValidIdx()
		}
		if idm != nil {
			return idm.InOrigOrder(nodes)
		}
		return nodes, nil
	case NodesAll:
		if idm != nil {
			return idm.AllInOrigOrder()
		}
		nodes := make([]int64, d.NumNodes())
		for i := range nodes {
			nodes[i] = int64(i)
		}
		return nodes, nil
	}
	nodes, err := readNodeList(spec, func(n int64) error { return t.CheckNodeList(n, mem) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: --nodes %q: not %s, %s or %s, and no such file of ids: %w", ErrNodeList, spec, NodesTest, NodesValid, NodesAll, err)
	}
	if err != nil && !errors.Is(err, ErrBudget) { // a budget refusal is infer's, as worded
		err = fmt.Errorf("%w: %w", ErrNodeList, err)
	}
	if err != nil {
		return nil, err
	}
	for i, v := range nodes {
		if v < 0 || v >= d.NumNodes() {
			return nil, fmt.Errorf("%w: %s: element %d: node %d out of range [0,%d)", ErrNodeList, spec, i, v, d.NumNodes())
		}
	}
	if idm != nil {
		// In place: a second list of the ids would double their memory.
		for i, u := range nodes {
			v, err := idm.New(u)
			if err != nil {
				return nil, err
			}
			nodes[i] = v
		}
	}
	return nodes, nil
}

// readNodeList reads a 1-D .npy of node ids of any integer dtype. It
// streams the file into the returned slice (8 bytes an id, no copy of the
// file beside it): a list of millions of ids is most of a small --mem.
// fit (nil: none) is asked about the id count before the slice is made,
// so that a list larger than the budget is refused, not OOM-killed.
func readNodeList(path string, fit func(n int64) error) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, want a .npy of node ids", path)
	}
	br := bufio.NewReaderSize(f, 1<<16)
	h, err := npy.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(h.Shape) != 1 || st.Size() < h.DataOffset+h.DataBytes() {
		return nil, fmt.Errorf("%s: want a complete 1-D array, shape %v", path, h.Shape)
	}
	if extra := st.Size() - h.DataOffset - h.DataBytes(); extra > 0 {
		// np.save writes none: a file edited or appended to by hand.
		return nil, fmt.Errorf("%s: %d bytes after the %d ids its header declares: want exactly the array (a file appended to?)", path, extra, h.Shape[0])
	}
	if !h.DType.Integer() {
		return nil, fmt.Errorf("%s: dtype %v, want an integer dtype (int64, int32, ...)", path, h.DType)
	}
	if fit != nil {
		if err := fit(h.Shape[0]); err != nil {
			return nil, fmt.Errorf("--nodes %s: %d ids: %w", path, h.Shape[0], err)
		}
	}
	out := make([]int64, h.Shape[0])
	sz := h.DType.Size()
	buf := make([]byte, 1<<16)
	for i := 0; i < len(out); {
		k := min(len(out)-i, len(buf)/sz)
		if _, err := io.ReadFull(br, buf[:k*sz]); err != nil {
			return nil, fmt.Errorf("%s: reading ids from element %d: %w", path, i, err)
		}
		var ve *npy.ValueError
		if err := npy.DecodeInt64(out[i:i+k], buf[:k*sz], h.DType); errors.As(err, &ve) {
			return nil, fmt.Errorf("%s: element %d: id %d out of range", path, i+ve.Index, ve.Value)
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		i += k
	}
	return out, nil
}
