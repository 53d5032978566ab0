package csvnum

import (
	"errors"
	"strconv"
)

// Sentinel errors. Returned errors wrap them; test with errors.Is.
var (
	ErrInvalidOptions = errors.New("csvnum: invalid options")
	ErrSyntax         = errors.New("csvnum: syntax error")
	ErrRange          = errors.New("csvnum: value out of range")
	ErrColumns        = errors.New("csvnum: wrong number of fields")
	ErrLineTooLong    = errors.New("csvnum: line too long")
)

// maxFieldText is how many bytes of an offending field ParseError keeps.
const maxFieldText = 32

// ParseError reports a problem at a position in a named input. Its Err is
// ErrSyntax, ErrRange, ErrColumns, ErrLineTooLong, or the I/O error of the
// underlying reader; errors.Is and errors.As see through it.
type ParseError struct {
	File   string // name given to NewReader
	Line   int64  // 1-based physical line number
	Column int    // 1-based field number; 0 when the problem is the whole line
	Field  string // offending field text, cut to 32 bytes plus "..."; may be ""
	Msg    string // what is wrong, e.g. "invalid float"
	Err    error
}

// Error formats e as, for example,
//
//	node-feat.csv.gz: line 12, column 7: invalid float "abc"
//	edge.csv.gz: line 9: read error: unexpected EOF
func (e *ParseError) Error() string {
	b := make([]byte, 0, 64+len(e.File)+len(e.Field))
	if e.File != "" {
		b = append(b, e.File...)
		b = append(b, ": "...)
	}
	b = append(b, "line "...)
	b = strconv.AppendInt(b, e.Line, 10)
	if e.Column > 0 {
		b = append(b, ", column "...)
		b = strconv.AppendInt(b, int64(e.Column), 10)
	}
	if e.Msg != "" {
		b = append(b, ": "...)
		b = append(b, e.Msg...)
	}
	if e.Field != "" {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, e.Field)
	}
	if e.Err != nil && !isSentinel(e.Err) {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

// Unwrap returns e.Err.
func (e *ParseError) Unwrap() error { return e.Err }

func isSentinel(err error) bool {
	switch err {
	case ErrSyntax, ErrRange, ErrColumns, ErrLineTooLong:
		return true
	}
	return false
}

// fieldText copies at most maxFieldText bytes of b for an error message.
func fieldText(b []byte) string {
	if len(b) <= maxFieldText {
		return string(b)
	}
	return string(b[:maxFieldText]) + "..."
}
