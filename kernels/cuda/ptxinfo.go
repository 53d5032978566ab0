package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"unsafe"
)

// kernelNames are the entry points of kernels.cu that the backend launches.
var kernelNames = []string{
	"gemm_naive", "gemm_tiled", "scale_inplace", "scale", "add", "axpy", "relu", "relu_backward", "dropout", "mul",
	"add_bias", "adam", "colreduce_partial", "colreduce_final", "gather_rows", "scatter_mark",
	"scatter_add_unique", "scatter_add_serial", "aggregate", "aggregate_backward", "log_softmax",
	"count_labelled", "cross_entropy_rows", "sum_f64", "argmax_rows", "accuracy", "head_dots", "gat_scores",
	"leaky_backward", "csr_edge_sum", "tcsr_edge_sum", "gat_dwh", "edge_softmax", "edge_softmax_backward",
	"edge_weighted_sum", "edge_weighted_sum_dalpha", "edge_weighted_sum_dwh",
}

var (
	ptxEntryRE = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z0-9_]+)\(([^)]*)\)`)
	ptxParamRE = regexp.MustCompile(`\.param \.([a-z0-9]+) `)
)

// ptxParams returns, for every .entry of a PTX module, the PTX types of
// its parameters in order. The launcher uses the counts to check arity, and
// tests use the types to enforce the 64-bit parameter rule.
func ptxParams(ptx string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, m := range ptxEntryRE.FindAllStringSubmatch(ptx, -1) {
		var types []string
		for _, p := range ptxParamRE.FindAllStringSubmatch(m[2], -1) {
			types = append(types, p[1])
		}
		if strings.Count(m[2], ".param") != len(types) {
			return nil, fmt.Errorf("cuda: cannot parse the parameters of PTX entry %s", m[1])
		}
		out[m[1]] = types
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cuda: no .entry in the PTX module")
	}
	return out, nil
}

// packRows copies the rows data[idx[r]] (cols float32 each), starting at
// byte roff of row idx[r], back to back into buf until buf is full or the
// rows run out. It returns the bytes written and where to resume. The
// staging path of GatherHostRows sends each filled buffer to the next bytes
// of the destination tensor, so rows may straddle buffers.
func packRows(buf []byte, data []float32, cols int, idx []int32, r, roff int) (fill, nextR, nextOff int) {
	rowBytes := cols * 4
	for fill < len(buf) && r < len(idx) {
		j := int(idx[r])
		row := data[j*cols : (j+1)*cols]
		rb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(row))), rowBytes)
		n := copy(buf[fill:], rb[roff:])
		fill += n
		roff += n
		if roff == rowBytes {
			r, roff = r+1, 0
		}
	}
	return fill, r, roff
}
