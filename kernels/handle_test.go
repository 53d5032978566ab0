package kernels

import (
	"errors"
	"testing"
)

type fakeRes struct{ Handle }

func TestLookup(t *testing.T) {
	a, b := new(int), new(int)
	mine := &fakeRes{Handle{Owner: a}}
	if p, err := Lookup[*fakeRes](a, mine, "thing"); err != nil || p != mine {
		t.Fatalf("own handle: %v", err)
	}
	if _, err := Lookup[*fakeRes](b, mine, "thing"); !errors.Is(err, ErrForeignTensor) {
		t.Fatalf("foreign: %v", err)
	}
	if _, err := Lookup[*fakeRes](a, 42, "thing"); !errors.Is(err, ErrForeignTensor) {
		t.Fatalf("wrong type: %v", err)
	}
	if _, err := Lookup[*fakeRes](a, nil, "thing"); !errors.Is(err, ErrInvalidArg) || err.Error() != "kernels: invalid argument: nil thing" {
		t.Fatalf("nil: %v", err)
	}
	mine.Freed = true
	if _, err := Lookup[*fakeRes](a, mine, "thing"); !errors.Is(err, ErrFreed) {
		t.Fatalf("freed: %v", err)
	}
}
