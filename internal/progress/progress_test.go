package progress

import (
	"bytes"
	"os"
	"testing"
)

func TestOrAndDiscard(t *testing.T) {
	if Or(nil) != Discard {
		t.Fatal("Or(nil) is not Discard")
	}
	r := Terminal(os.Stderr, true)
	if r != Discard {
		t.Fatal("quiet terminal reporter draws")
	}
	// Discard tasks accept every call.
	task := Discard.Start("x", 10, Items)
	task.Add(3)
	task.Describe("y")
	task.Done()
}

func TestTerminalNeedsATTY(t *testing.T) {
	// A buffer, or a file that is not a terminal, never gets a bar: piped
	// output and CI logs stay clean.
	if Terminal(&bytes.Buffer{}, false) != Discard {
		t.Fatal("bar drawn into a buffer")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Terminal(f, false) != Discard {
		t.Fatal("bar drawn into a regular file")
	}
}

func TestTerminalBarConcurrent(t *testing.T) {
	// Draw into a real bar through the internal type (no TTY needed) from
	// several goroutines; the race detector checks the locking.
	r := &terminal{w: &bytes.Buffer{}}
	task := r.Start("work", 1000, Bytes)
	done := make(chan struct{})
	for range 4 {
		go func() {
			for range 250 {
				task.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	task.Describe("finished")
	task.Done()
}
