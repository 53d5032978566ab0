package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
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

// TestTerminalBarRates: a bytes bar shows its rate once, in bytes a
// second; an items bar shows items a second. Before, a bytes bar printed
// the rate twice, the second time as a bare count ("(62/601 MB, 595 MB/s,
// 594632206 it/s)").
func TestTerminalBarRates(t *testing.T) {
	for _, tc := range []struct {
		unit      Unit
		want, not string
	}{
		{Bytes, "B/s", "it/s"},
		{Items, "it/s", "B/s"},
	} {
		var buf bytes.Buffer
		task := (&terminal{w: &buf}).Start("work", 100<<20, tc.unit)
		for range 5 {
			time.Sleep(120 * time.Millisecond) // past the bar's 100 ms throttle
			task.Add(1 << 20)
		}
		out := buf.String()
		task.Done()
		if !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) {
			t.Errorf("unit %d: bar %q, want %q and no %q", tc.unit, out, tc.want, tc.not)
		}
	}
}

// TestTerminalOneBarAtATime: tasks running at once share the line: the
// first started draws, the second counts silently and draws from its
// count once the first is done. Before, gen's "edges" and "features"
// bars drew by turns on one line, flickering between the two.
func TestTerminalOneBarAtATime(t *testing.T) {
	var buf bytes.Buffer
	r := &terminal{w: &buf}
	a := r.Start("first-task", 10, Items)
	b := r.Start("second-task", 10, Items)
	for range 3 {
		time.Sleep(120 * time.Millisecond) // past the bar's 100 ms throttle
		a.Add(1)
		b.Add(2)
	}
	r.mu.Lock()
	before := buf.String()
	r.mu.Unlock()
	if !strings.Contains(before, "first-task") || strings.Contains(before, "second-task") {
		t.Fatalf("while both run: %q, want the first task's bar only", before)
	}
	a.Done()
	time.Sleep(120 * time.Millisecond)
	b.Add(1)
	after := buf.String()[len(before):]
	if !strings.Contains(after, "second-task") || !strings.Contains(after, "7/10") {
		t.Errorf("after the first is done: %q, want the second's bar from its count (7/10)", after)
	}
	b.Done()
	b.Done() // twice is harmless
	if len(r.active) != 0 {
		t.Errorf("%d tasks still active", len(r.active))
	}
}
