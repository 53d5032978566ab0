//go:build linux

package uring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestReads(t *testing.T) {
	r, err := New(8)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data := make([]byte, 1<<16)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 40 reads through an 8-entry ring: fill, submit, reap, refill.
	const n, size = 40, 1000
	bufs := make([][]byte, n)
	done := 0
	next := 0
	for done < n {
		for next < n {
			bufs[next] = make([]byte, size)
			if !r.PrepRead(int(f.Fd()), bufs[next], int64(next*size), uint64(next)) {
				break
			}
			next++
		}
		if err := r.Submit(1); err != nil {
			t.Fatal(err)
		}
		r.Reap(func(ud uint64, res int32) {
			if res != size {
				t.Errorf("read %d: res %d", ud, res)
			}
			if !bytes.Equal(bufs[ud], data[ud*size:(ud+1)*size]) {
				t.Errorf("read %d: wrong bytes", ud)
			}
			done++
		})
	}
	if r.InFlight() != 0 {
		t.Fatalf("InFlight %d after all reaped", r.InFlight())
	}
	// A read at EOF returns 0; one on a bad fd a negated errno.
	r.PrepRead(int(f.Fd()), make([]byte, 10), int64(len(data)), 1)
	r.PrepRead(-1, make([]byte, 10), 0, 2)
	if err := r.Submit(1); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int32{}
	for len(got) < 2 {
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		r.Reap(func(ud uint64, res int32) { got[ud] = res })
	}
	if got[1] != 0 || got[2] >= 0 {
		t.Fatalf("EOF read res %d (want 0), bad fd res %d (want < 0)", got[1], got[2])
	}
}
