// Command ssdgnn trains graph neural networks on graphs larger than host
// memory by streaming them from NVMe. Run `ssdgnn help` for the tour.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/storage"
)

// errProblems marks a command that ran but found problems (validate); the
// problems are already printed.
var errProblems = errors.New("problems found")

// exitStatus is a command's exit status passed through from a child it ran
// (bench capped); nothing is printed for it.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP) // SIGHUP: a closed terminal or a dropped ssh session stops as Ctrl-C does (train writes its checkpoint)
	defer stop()
	root := newRootCmd()
	if ran, err := execute(ctx, root); err != nil {
		err = flagNamed(ran, err)
		var status exitStatus
		if errors.As(err, &status) {
			stop()
			os.Exit(int(status))
		}
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

// execute runs the command line. A read of a mapped dataset file that
// another program truncated meanwhile faults: on this goroutine (and on
// the library's worker goroutines, which do the same) it is an error
// naming the file, not a SIGBUS crash.
func execute(ctx context.Context, root *cobra.Command) (ran *cobra.Command, err error) {
	storage.OnFault(func(err error) { // a worker goroutine's fault: no error path to return it by
		fmt.Fprintln(os.Stderr, "ssdgnn:", err)
		os.Exit(1)
	})
	debug.SetPanicOnFault(true)
	defer storage.CatchFault(&err)
	return root.ExecuteContextC(ctx)
}
