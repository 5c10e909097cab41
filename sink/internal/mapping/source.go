package mapping

import (
	"errors"
	"fmt"
	"strings"
)

// sourceKind is what a Source reads. The zero kind is no source at all.
type sourceKind uint8

const (
	srcNone sourceKind = iota
	srcKey
	srcKeyPath
	srcValue
	srcValuePath
	srcHeader
	srcTopic
	srcPartition
	srcOffset
	srcTimestamp
)

// Source is where a column's value comes from in a record. Make one with ParseSource; the
// zero Source reads nothing and fails Mapping.Validate. Sources are comparable: two
// Sources are equal when they were parsed from the same expression.
type Source struct {
	kind sourceKind
	expr string // the expression as written
	arg  string // path segments joined by NUL for key.<path> and value.<path>; header name for header.<name>
}

// sourceSyntax lists the allowed expressions, for error messages.
const sourceSyntax = "want key, key.<path>, value, value.<path>, header.<name>, topic, partition, offset or timestamp"

// ParseSource parses a source expression:
//
//	key | key.<path> | value | value.<path> | header.<name> | topic | partition | offset | timestamp
//
// See the package documentation for the path syntax. Whether a path fits the key's or
// the value's format is checked by Mapping.Validate, not here.
func ParseSource(expr string) (Source, error) {
	switch expr {
	case "key":
		return Source{kind: srcKey, expr: expr}, nil
	case "value":
		return Source{kind: srcValue, expr: expr}, nil
	case "topic":
		return Source{kind: srcTopic, expr: expr}, nil
	case "partition":
		return Source{kind: srcPartition, expr: expr}, nil
	case "offset":
		return Source{kind: srcOffset, expr: expr}, nil
	case "timestamp":
		return Source{kind: srcTimestamp, expr: expr}, nil
	case "":
		return Source{}, fmt.Errorf("mapping: empty source expression (%s)", sourceSyntax)
	}
	prefix, rest, ok := strings.Cut(expr, ".")
	if !ok {
		return Source{}, fmt.Errorf("mapping: bad source %q: %s", expr, sourceSyntax)
	}
	switch prefix {
	case "key", "value":
		path, err := encodePath(rest)
		if err != nil {
			return Source{}, fmt.Errorf("mapping: bad source %q: %v", expr, err)
		}
		kind := srcKeyPath
		if prefix == "value" {
			kind = srcValuePath
		}
		return Source{kind: kind, expr: expr, arg: path}, nil
	case "header":
		if rest == "" {
			return Source{}, fmt.Errorf("mapping: bad source %q: empty header name", expr)
		}
		return Source{kind: srcHeader, expr: expr, arg: rest}, nil
	}
	return Source{}, fmt.Errorf("mapping: bad source %q: %s", expr, sourceSyntax)
}

// MustParseSource is ParseSource for expressions known to be good, such as constants; it
// panics on an error.
func MustParseSource(expr string) Source {
	s, err := ParseSource(expr)
	if err != nil {
		panic(err)
	}
	return s
}

// encodePath turns a dot-separated path, where a backslash makes the next character
// literal, into its segments joined by NUL bytes, as the scanner reads them.
func encodePath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path holds a NUL byte")
	}
	out := make([]byte, 0, len(p))
	seg := 0 // length of the current segment
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '.':
			if seg == 0 {
				return "", errors.New("empty path segment")
			}
			out = append(out, 0)
			seg = 0
			continue
		case '\\':
			i++
			if i == len(p) {
				return "", errors.New("path ends with a lone backslash")
			}
			c = p[i]
		}
		out = append(out, c)
		seg++
	}
	if seg == 0 {
		return "", errors.New("empty path segment")
	}
	return string(out), nil
}

// String returns the expression s was parsed from, or "" for the zero Source.
func (s Source) String() string { return s.expr }

// Side says which part of the record s reads: "key", "value", "header", or "meta" for
// topic, partition, offset and timestamp. It is "" for the zero Source.
func (s Source) Side() string {
	switch s.kind {
	case srcKey, srcKeyPath:
		return "key"
	case srcValue, srcValuePath:
		return "value"
	case srcHeader:
		return "header"
	case srcTopic, srcPartition, srcOffset, srcTimestamp:
		return "meta"
	}
	return ""
}

// IsZero reports whether s is the zero Source, which reads nothing.
func (s Source) IsZero() bool { return s.kind == srcNone }

// MarshalText returns the expression, so that a Source reads and writes as text in
// configuration files.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.expr), nil }

// UnmarshalText sets s from an expression, as ParseSource.
func (s *Source) UnmarshalText(text []byte) error {
	v, err := ParseSource(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
