// Command ssdgnn trains graph neural networks on graphs larger than host
// memory by streaming them from NVMe. Run `ssdgnn help` for the tour.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// errProblems marks a command that ran but found problems (validate); the
// problems are already printed.
var errProblems = errors.New("problems found")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		switch {
		case errors.Is(err, errProblems):
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			fmt.Fprintln(os.Stderr, "ssdgnn: interrupted:", err)
		default:
			fmt.Fprintln(os.Stderr, "ssdgnn:", err)
		}
		stop()
		os.Exit(1)
	}
}
