// Package opterr is the error of an invalid option (a field of a
// package's Options or Config), with the fields it names kept as data: a
// command line names its own flags for them (Text) without parsing the
// message. Its message with the fields' Go names (Error) is the one the
// package wrote before.
//
// Invariants: the fields an Error names are the Field values among its
// arguments, and only they; Field, when set, is the first of them (the
// option found invalid). Err is the package's sentinel (its
// ErrInvalidOptions), so errors.Is sees it.
//
// Caveat: an option error written with fmt.Errorf, as most of those that
// name no field with a flag still are, keeps its Go names on the command
// line; an option error that names such a field belongs here.
package opterr

import (
	"fmt"
)

// Field is an option's Go field name ("FirstLevel"), as an argument of
// Errorf: it prints as the name, or as Text's naming of it.
type Field string

// Error is an invalid option.
type Error struct {
	Err   error  // the package's sentinel
	Field Field  // the option found invalid, "" when none is named
	fmt   string // why, with the Field arguments among args
	args  []any
}

// Errorf is an invalid option of sentinel's package, explained by format
// and args as fmt.Errorf's (%w included); the options it names are passed
// as Field arguments.
func Errorf(sentinel error, format string, args ...any) *Error {
	e := &Error{Err: sentinel, fmt: format, args: args}
	for _, a := range args {
		if f, ok := a.(Field); ok {
			e.Field = f
			break
		}
	}
	return e
}

func (e *Error) Error() string { return e.Named(nil) }

// Unwrap is the sentinel and what format wraps with %w.
func (e *Error) Unwrap() []error { return []error{e.Err, fmt.Errorf(e.fmt, e.args...)} }

// Named is e's message, every option it names as name gives it (nil: its
// Go field name); an *Error among the arguments (an option of another
// package, wrapped) is named the same way.
func (e *Error) Named(name func(Field) string) string {
	return e.Err.Error() + ": " + e.Text(name)
}

// Text is Named without the sentinel's words.
func (e *Error) Text(name func(Field) string) string {
	if name == nil {
		return fmt.Errorf(e.fmt, e.args...).Error()
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		switch a := a.(type) {
		case Field:
			args[i] = name(a)
		case *Error:
			args[i] = &named{msg: a.Named(name), err: a}
		default:
			args[i] = a
		}
	}
	return fmt.Errorf(e.fmt, args...).Error()
}

// named is an error with its options named by a caller's names.
type named struct {
	msg string
	err error
}

func (n *named) Error() string { return n.msg }
func (n *named) Unwrap() error { return n.err }
