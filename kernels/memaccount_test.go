package kernels

import (
	"errors"
	"testing"
)

func TestMemAccount(t *testing.T) {
	var a MemAccount
	a.SetMax(100)
	if err := a.Reserve("x", 60); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve("x", 50); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("over the cap: %v", err)
	}
	if err := a.Reserve("x", 40); err != nil {
		t.Fatal(err)
	}
	a.Release(60)
	if s := a.Stats(); s != (MemStats{Allocated: 40, Peak: 100, Handles: 1}) {
		t.Fatalf("stats %+v", s)
	}
	var unlimited MemAccount
	if err := unlimited.Reserve("x", 1<<40); err != nil {
		t.Fatalf("zero value capped: %v", err)
	}
}
