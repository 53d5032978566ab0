// Package csvnum reads numeric delimited text (CSV, TSV, whitespace-separated
// edge lists) line by line, streaming, without allocating per field, and
// reports every problem with the file name, 1-based line number and 1-based
// column (field) number.
//
// The dataset importers use it for OGB raw files (gzip CSV without a header:
// "src,dst" edge lines, one row of floats per node, one integer per line) and
// for user edge lists ("src dst" or "src\tdst" with '#' or '%' comments).
//
// # Usage
//
//	r := csvnum.NewReader(gz, "node-feat.csv.gz", nil)
//	var row []float32
//	for r.Next() {
//		var err error
//		if row, err = r.Float32sN(row, dim); err != nil {
//			return err // *ParseError with file, line and column
//		}
//		...
//	}
//	if err := r.Err(); err != nil { // always check: I/O errors end the loop too
//		return err
//	}
//
// # Format
//
//   - Lines end in "\n" or "\r\n"; the last line may lack its terminator
//     (or end in "\r" only). A "\r" elsewhere is not a line terminator.
//   - A UTF-8 byte order mark at the start of the stream is skipped.
//   - Blank lines (empty or only spaces and tabs) are skipped, and so are
//     lines whose first non-blank bytes are Options.Comment. Comments at the
//     end of a data line are not recognised: they are a syntax error.
//   - With a single-byte delimiter (',' by default, or '\t', ';', ...) every
//     delimiter separates two fields, so "1,,2" and "1,2," have an empty
//     field, which is an error. Spaces and tabs around a field are ignored.
//   - With Options.Delim == ' ' fields are separated by any run of spaces and
//     tabs, and leading and trailing blanks are ignored; empty fields cannot
//     occur.
//   - Integers are decimal with an optional sign ("+7", "-3", "007"); no
//     fraction, exponent, base prefix or digit separators. Values outside
//     the int64 range are an error.
//   - Floats are whatever strconv.ParseFloat(s, 32) accepts: "1", "-1.5e-3",
//     ".5", "inf", "NaN", hexadecimal floats. Values that overflow float32
//     are an error; values that underflow become (signed) zero, as in
//     strconv.
//
// # Invariants and caveats
//
//   - Parsing a line allocates nothing once the destination slice is large
//     enough; only errors allocate. Plain decimals ("-0.123456", "17") take a
//     fast path whose results are bit-for-bit those of strconv.ParseFloat
//     (checked by FuzzFloat32s, FuzzFastFloat32 and TestFastFloat32Random);
//     everything else goes to strconv.
//   - The slice returned by Reader.Bytes is valid only until the next call
//     to Reader.Next.
//   - Field errors (*ParseError matching ErrSyntax, ErrRange or ErrColumns)
//     are returned by the parsing methods and do not stop the Reader: the
//     caller may go on to the next line. Errors that end the stream (I/O
//     errors, ErrLineTooLong, invalid Options) make Next return false and
//     are returned by Reader.Err; they are sticky.
//   - An I/O error, such as io.ErrUnexpectedEOF from a truncated gzip
//     stream, discards the partial line that was being read: a truncated
//     line is never parsed as if it were complete.
//   - Lines longer than the internal 1 MiB buffer work, up to
//     Options.MaxLine bytes; the Reader keeps a buffer as large as the
//     longest line seen.
//   - A Reader is not safe for concurrent use; the package starts no
//     goroutines.
package csvnum
