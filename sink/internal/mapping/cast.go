package mapping

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Cast converts a column's value before it is written, for values PostgreSQL would not
// read as they are: numbers of seconds, milliseconds or microseconds since the Unix epoch,
// RFC 3339 timestamps without a zone, base64 text, JSON held in a string. The zero Cast
// writes the value as it is.
type Cast uint8

const (
	// CastNone writes the value as it is.
	CastNone Cast = iota
	// CastEpochS, CastEpochMs and CastEpochUs read a number of seconds, milliseconds or
	// microseconds since 1970-01-01T00:00:00Z, in plain decimal notation (an optional
	// minus sign, digits, an optional fraction; no exponent), and give a timestamptz,
	// computed from the digits, never through a float: epoch_ms 1700000000123 is exactly
	// 2023-11-14T22:13:20.123Z. PostgreSQL keeps microseconds and rounds what is finer. The
	// result must be within the years 1 to 9999.
	CastEpochS
	CastEpochMs
	CastEpochUs
	// CastRFC3339 reads an RFC 3339 timestamp, 2023-11-14T22:13:20.5+01:00, and gives a
	// timestamptz. Without a zone (2023-11-14T22:13:20.5) the time is UTC, whatever the
	// session's TimeZone. A space or a lowercase t may separate date and time, and z stand
	// for Z; a leap second (:60) is refused.
	CastRFC3339
	// CastBase64 reads base64 text, with the standard alphabet (+/) or the URL-safe one
	// (-_), padded with = or not, and gives its bytes, for a bytea column. Line breaks are
	// ignored.
	CastBase64
	// CastJSON reads text that must be one JSON document (as a JSON string field holding
	// serialized JSON) and gives it as it is, for a json or jsonb column. An object or array
	// field is JSON already and passes too.
	CastJSON
)

// castNames are the names of the casts, by Cast.
var castNames = [...]string{CastNone: "", CastEpochS: "epoch_s", CastEpochMs: "epoch_ms",
	CastEpochUs: "epoch_us", CastRFC3339: "rfc3339", CastBase64: "base64", CastJSON: "json"}

// castSyntax lists the casts, for error messages.
const castSyntax = "epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json"

// ParseCast parses the name of a cast: epoch_s, epoch_ms, epoch_us, rfc3339, base64 or
// json; "" is CastNone.
func ParseCast(s string) (Cast, error) {
	for c, name := range castNames {
		if name == s {
			return Cast(c), nil
		}
	}
	return CastNone, fmt.Errorf("unknown cast %q (want %s)", s, castSyntax)
}

// String returns the name of c as ParseCast reads it ("" for CastNone).
func (c Cast) String() string {
	if int(c) < len(castNames) {
		return castNames[c]
	}
	return "Cast(" + strconv.Itoa(int(c)) + ")"
}

func (c Cast) valid() bool { return int(c) < len(castNames) }

// ColumnType is the PostgreSQL type of the values c gives (timestamptz, bytea, jsonb), ""
// for CastNone.
func (c Cast) ColumnType() string {
	switch c {
	case CastEpochS, CastEpochMs, CastEpochUs, CastRFC3339:
		return "timestamptz"
	case CastBase64:
		return "bytea"
	case CastJSON:
		return "jsonb"
	}
	return ""
}

// Check reports whether the text s casts with c (for CastNone, whether it is text
// PostgreSQL can store), as a column's default must: the error is a *CastError.
func (c Cast) Check(s string) error {
	if c == CastNone {
		return checkText(s)
	}
	_, _, err := c.apply(s, nil)
	return err
}

// ErrCast is wrapped by the error of a value that cannot be cast: match it with errors.Is.
var ErrCast = errors.New("value cannot be cast")

// CastError is why a value cannot be cast. It quotes the start of the value (at most
// castQuote bytes), as PostgreSQL's own errors do, so that the dead letter says what was
// wrong.
type CastError struct {
	Cast   Cast
	Value  string // the start of the value, for the message
	Reason string // "is not a number", ...
}

// castQuote is how much of a value a CastError quotes.
const castQuote = 40

// Error returns `cast epoch_ms: "abc" is not a number`.
func (e *CastError) Error() string {
	v := e.Value
	if len(v) > castQuote {
		cut := castQuote
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "..."
	}
	return "cast " + e.Cast.String() + ": " + strconv.Quote(v) + " " + e.Reason
}

// Unwrap returns ErrCast.
func (e *CastError) Unwrap() error { return ErrCast }

func castError(c Cast, v, reason string) error {
	// The value may alias the record or the row's buffer: keep a copy of its start.
	var start string
	if len(v) > castQuote+4 {
		start = strings.Clone(v[:castQuote+4])
	} else {
		start = strings.Clone(v)
	}
	return &CastError{Cast: c, Value: start, Reason: reason}
}

// apply appends the cast of the text s to buf and returns the result: text in buf, or, for
// base64, the bytes in buf (a bytea column writes them in hex).
func (c Cast) apply(s string, buf []byte) (result, []byte, error) {
	start := len(buf)
	var err error
	switch c {
	case CastEpochS, CastEpochMs, CastEpochUs:
		buf, err = appendEpoch(buf, c, s)
	case CastRFC3339:
		buf, err = appendRFC3339(buf, s)
	case CastBase64:
		buf, err = appendBase64(buf, s)
	case CastJSON:
		doc := trimJSONSpace(s)
		if err = scanJSON(doc, nil, 0); err != nil {
			var de *detailError
			reason := "is not JSON"
			if errors.As(err, &de) {
				reason += " (" + de.detail + ")"
			}
			return result{}, buf, castError(c, s, reason)
		}
		if len(doc) > bigText {
			return direct(strings.Clone(doc)), buf, nil
		}
		buf = append(buf, doc...)
	default:
		return result{}, buf, fmt.Errorf("invalid cast %v", c)
	}
	if err != nil {
		return result{}, buf[:start], err
	}
	return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
}

// Seconds since the epoch of 0001-01-01T00:00:00Z and of 9999-12-31T23:59:59Z: the range
// of years a cast accepts (RFC 3339 has four-digit years).
const (
	minUnix = -62135596800
	maxUnix = 253402300799
)

// appendEpoch appends the timestamp of s, a number of seconds, milliseconds or
// microseconds since the epoch (cast c), in RFC 3339 in UTC.
func appendEpoch(buf []byte, c Cast, s string) ([]byte, error) {
	perSec, digitsPerUnit := int64(1), 9 // units per second; fractional digits of a unit down to nanoseconds
	switch c {
	case CastEpochMs:
		perSec, digitsPerUnit = 1000, 6
	case CastEpochUs:
		perSec, digitsPerUnit = 1000000, 3
	}
	t := s
	neg := false
	if t != "" && t[0] == '-' {
		neg, t = true, t[1:]
	}
	intPart, frac, hasFrac := strings.Cut(t, ".")
	if intPart == "" || !allDigits(intPart) || (hasFrac && (frac == "" || !allDigits(frac))) {
		if strings.ContainsAny(t, "eE") && !strings.ContainsFunc(t, func(r rune) bool {
			return !strings.ContainsRune("0123456789.eE+-", r)
		}) {
			return buf, castError(c, s, "is not a number in plain decimal notation (no exponent)")
		}
		return buf, castError(c, s, "is not a number")
	}
	// More than 18 digits could overflow int64, and any such number is out of range anyway.
	intPart = strings.TrimLeft(intPart, "0")
	if len(intPart) > 18 {
		return buf, castError(c, s, "is out of range (years 1 to 9999)")
	}
	var n int64
	for i := 0; i < len(intPart); i++ {
		n = n*10 + int64(intPart[i]-'0')
	}
	// The fraction of a unit, in nanoseconds; digits past nanoseconds are dropped.
	var fracNanos int64
	for i := 0; i < digitsPerUnit; i++ {
		fracNanos *= 10
		if i < len(frac) {
			fracNanos += int64(frac[i] - '0')
		}
	}
	nanosPerUnit := int64(time.Second) / perSec
	sec, rem := n/perSec, n%perSec
	nsec := rem*nanosPerUnit + fracNanos
	if neg {
		sec, nsec = -sec, -nsec
	}
	if nsec < 0 {
		sec--
		nsec += int64(time.Second)
	}
	if sec < minUnix || sec > maxUnix {
		return buf, castError(c, s, "is out of range (years 1 to 9999)")
	}
	return time.Unix(sec, nsec).UTC().AppendFormat(buf, time.RFC3339Nano), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// appendRFC3339 appends the RFC 3339 timestamp s in UTC; without a zone, s is UTC. It
// parses by hand: time.Parse would keep s in its error, which makes every caller's buffer
// escape to the heap.
func appendRFC3339(buf []byte, s string) ([]byte, error) {
	t, ok := parseRFC3339(s)
	if !ok {
		return buf, castError(CastRFC3339, s, "is not an RFC 3339 timestamp")
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return buf, castError(CastRFC3339, s, "is out of range (years 1 to 9999)")
	}
	return t.AppendFormat(buf, time.RFC3339Nano), nil
}

// parseRFC3339 parses YYYY-MM-DD(T|t| )hh:mm:ss(.fraction)?(Z|z|(+|-)hh:mm)?, the time in
// UTC when the zone is left out. Fraction digits past nanoseconds are dropped.
func parseRFC3339(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05") || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	if c := s[10]; c != 'T' && c != 't' && c != ' ' {
		return time.Time{}, false
	}
	year, ok1 := num(s[0:4])
	month, ok2 := num(s[5:7])
	day, ok3 := num(s[8:10])
	hour, ok4 := num(s[11:13])
	minute, ok5 := num(s[14:16])
	sec, ok6 := num(s[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 || day < 1 ||
		day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	rest := s[19:]
	nanos := 0
	if rest != "" && rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			if i <= 9 {
				nanos = nanos*10 + int(rest[i]-'0')
			}
			i++
		}
		if i == 1 {
			return time.Time{}, false
		}
		for d := i - 1; d < 9; d++ {
			nanos *= 10
		}
		rest = rest[i:]
	}
	offset := 0 // seconds east of UTC
	switch {
	case rest == "" || rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := num(rest[1:3])
		om, ok2 := num(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nanos, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), true
}

// num parses s, made of digits only.
func num(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// daysIn returns the number of days of month in year (proleptic Gregorian).
func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// appendBase64 appends the bytes that s encodes in base64: the standard or the URL-safe
// alphabet, padded or not.
func appendBase64(buf []byte, s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(strings.TrimRight(s, "\r\n"), "=") {
		enc = enc.WithPadding(base64.NoPadding)
	}
	out, err := enc.AppendDecode(buf, unsafe.Slice(unsafe.StringData(s), len(s))) // read only
	if err != nil {
		var ce base64.CorruptInputError
		reason := "is not base64"
		if errors.As(err, &ce) {
			reason += fmt.Sprintf(" (at byte %d)", int64(ce))
		}
		return buf, castError(CastBase64, s, reason)
	}
	return out, nil
}
