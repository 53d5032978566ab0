package kernels

import (
	"errors"
	"fmt"
)

// Handle is the ownership state every backend resource (tensor, int
// tensor, block) embeds: the backend that made it and whether it has been
// freed. Backends resolve handles passed to ops with Lookup, so the
// nil/foreign/freed rules of the Backend contract live in one place.
type Handle struct {
	Owner any
	Freed bool
}

// HandleState returns h; embedding Handle makes a type a Resource.
func (h *Handle) HandleState() *Handle { return h }

// Resource is a pointer to a type that embeds Handle.
type Resource interface{ HandleState() *Handle }

// Lookup returns x as P when owner made it and it is still live. It fails
// with ErrInvalidArg for a nil x (what names the kind of handle),
// ErrForeignTensor for another backend's or another type's handle, and
// ErrFreed after Free.
func Lookup[P Resource](owner, x any, what string) (P, error) {
	var zero P
	if x == nil {
		return zero, fmt.Errorf("%w: nil %s", ErrInvalidArg, what)
	}
	p, ok := x.(P)
	if !ok || p.HandleState().Owner != owner {
		return zero, ErrForeignTensor
	}
	if p.HandleState().Freed {
		return zero, ErrFreed
	}
	return p, nil
}

// Retire marks the live handle x freed and returns it, for a backend's
// Free. Freeing a handle twice fails with ErrFreed ("double free"), and
// another backend's handle with ErrForeignTensor.
func Retire[P Resource](owner, x any) (P, error) {
	p, err := Lookup[P](owner, x, "handle")
	if errors.Is(err, ErrFreed) {
		return p, fmt.Errorf("double free: %w", err)
	}
	if err != nil {
		return p, err
	}
	p.HandleState().Freed = true
	return p, nil
}
