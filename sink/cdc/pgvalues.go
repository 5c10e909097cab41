package cdc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// PostgreSQL values whose Debezium encoding needs its own reading: dates and timestamps
// before year 1 and at ±infinity, bit strings, points.

// Debezium's encodings of PostgreSQL's infinity and -infinity dates and timestamps, as the
// fidelity suite saw them (Debezium 3.6). The dates lie outside PostgreSQL's (4713 BC to
// 5874897 AD), so reading them back is unambiguous; the timestamps are single instants
// (294247-01-10 04:00:25.2 and 290308-12-21 19:59:27.6 BC) that a source would have to
// hold exactly.
const (
	// Streamed changes: days of POSITIVE_INFINITY_LOCAL_DATE, -5877611-06-21 (a date
	// before -infinity's: DBZ-2524 later makes it +5877611-06-21, dbzInfinityDaysNew), and
	// of NEGATIVE_INFINITY_LOCAL_DATE, -5877611-06-22.
	dbzInfinityDays    = -2147472692
	dbzInfinityDaysNew = 2146033979
	dbzNegInfinityDays = -2147472691
	// The snapshot: JDBC's infinity dates (PGStatement.DATE_POSITIVE_INFINITY and
	// DATE_NEGATIVE_INFINITY as java.sql.Date, the latter's era lost) as days, wrapped to
	// 32 bits. The JVM's time zone can move them by a day.
	dbzSnapInfinityDays    = -622191234
	dbzSnapNegInfinityDays = -625821272
	// PGStatement.DATE_POSITIVE_INFINITY and DATE_NEGATIVE_INFINITY, which Debezium sends
	// as the epoch microseconds of infinity and -infinity timestamps (MicroTimestamp), and
	// divided by 1000 as milliseconds (Timestamp).
	pgInfinityMicros    = 9223372036825200000
	pgNegInfinityMicros = -9223372036832400000
)

// epochDays returns the date n days after 1970-01-01 as PostgreSQL reads it: infinity and
// -infinity for Debezium's sentinels, a year before 1 with its era ("0044-03-15 BC").
func epochDays(n int64) string {
	switch {
	case n == dbzInfinityDays, n == dbzInfinityDaysNew, n >= dbzSnapInfinityDays-1 && n <= dbzSnapInfinityDays+1:
		return "infinity"
	case n == dbzNegInfinityDays, n >= dbzSnapNegInfinityDays-1 && n <= dbzSnapNegInfinityDays+1:
		return "-infinity"
	}
	return schemaformat.FormatTime(time.Unix(n*86400, 0).UTC(), dateLayout)
}

// epochTime returns the timestamp n units (a microsecond or a millisecond) after the epoch,
// or infinity and -infinity for Debezium's sentinels.
func epochTime(n int64, unit time.Duration) string {
	switch {
	case unit == time.Microsecond && n == pgInfinityMicros, unit == time.Millisecond && n == pgInfinityMicros/1000:
		return "infinity"
	case unit == time.Microsecond && n == pgNegInfinityMicros, unit == time.Millisecond && n == pgNegInfinityMicros/1000:
		return "-infinity"
	}
	var t time.Time
	switch unit {
	case time.Microsecond:
		t = time.UnixMicro(n)
	case time.Millisecond:
		t = time.UnixMilli(n)
	default:
		t = time.Unix(0, n)
	}
	return schemaformat.FormatTime(t.UTC(), tsLayout)
}

// Debezium's semantic names of bit strings and points.
const (
	dbzBits  = "io.debezium.data.Bits"
	dbzPoint = "io.debezium.data.geometry.Point"
)

// errVarbit: Debezium's Bits of a bit varying value hold its bits but not its length.
var errVarbit = errors.New("bit varying: Debezium's Bits hold the bits of a value but not its length " +
	"(B'0101' and B'101' arrive alike), so eosink cannot replicate the column exactly and refuses it; " +
	"replicate it into a bytea column (the Bits as sent), or into bit(n)")

// bitsLength returns n of a "bit(n)" column, 0 for a bit varying column, and ok false
// for other types.
func bitsLength(colType string) (n int, ok bool) {
	if strings.HasPrefix(colType, "bit varying") {
		return 0, true
	}
	if colType == "bit" {
		return 1, true
	}
	if !strings.HasPrefix(colType, "bit(") || !strings.HasSuffix(colType, ")") {
		return 0, false
	}
	n, err := strconv.Atoi(colType[4 : len(colType)-1])
	return n, err == nil && n > 0
}

// bitString returns the bit string of a bit(n) column (n > 0) from Debezium's Bits: the
// bits little-endian, bit 0 of byte 0 the last character. A bit past the column's length
// is an error; a bit varying column (n 0) is errVarbit.
func bitString(v any, n int) (string, error) {
	if n == 0 {
		return "", errVarbit
	}
	var b []byte
	switch v := v.(type) {
	case []byte:
		b = v
	case string:
		var err error
		if b, err = base64.StdEncoding.DecodeString(v); err != nil {
			return "", fmt.Errorf("%s: %v", dbzBits, err)
		}
	case bool: // bit(1) arrives as a boolean
		if v {
			return "1", nil
		}
		return "0", nil
	default:
		return "", fmt.Errorf("%s: want bytes, got %T", dbzBits, v)
	}
	if len(b) > (n+7)/8+8 {
		return "", fmt.Errorf("%s: %d bytes for bit(%d)", dbzBits, len(b), n)
	}
	out := make([]byte, n)
	for i := range out {
		out[n-1-i] = '0'
		if i/8 < len(b) && b[i/8]>>(i%8)&1 == 1 {
			out[n-1-i] = '1'
		}
	}
	for i := n; i < len(b)*8; i++ {
		if b[i/8]>>(i%8)&1 == 1 {
			return "", fmt.Errorf("%s: bit %d set, past bit(%d)'s length", dbzBits, i, n)
		}
	}
	return string(out), nil
}

// pointText returns the point "(x,y)" of Debezium's Point struct {x, y, wkb, srid}.
func pointText(v any) (string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("%s: want {x, y}, got %T", dbzPoint, v)
	}
	var xy [2]string
	for i, k := range []string{"x", "y"} {
		switch c := m[k].(type) {
		case json.Number:
			xy[i] = c.String()
		case float64:
			xy[i] = strconv.FormatFloat(c, 'g', -1, 64)
		case string: // NaN, Infinity
			xy[i] = c
		default:
			return "", fmt.Errorf("%s: %s is %T", dbzPoint, k, m[k])
		}
	}
	return "(" + xy[0] + "," + xy[1] + ")", nil
}
