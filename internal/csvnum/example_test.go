package csvnum_test

import (
	"fmt"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/csvnum"
)

func ExampleReader() {
	in := "# src dst\n0 1\n1\t2\n\n2 x\n"
	r := csvnum.NewReader(strings.NewReader(in), "edges.txt", &csvnum.Options{Delim: ' ', Comment: "#"})
	var e []int64
	for r.Next() {
		var err error
		if e, err = r.Int64sN(e, 2); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(e[0], "->", e[1])
	}
	if err := r.Err(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 -> 1
	// 1 -> 2
	// edges.txt: line 5, column 2: invalid integer "x"
}
