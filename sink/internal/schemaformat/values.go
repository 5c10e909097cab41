package schemaformat

import (
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Leaf types of a decoded tree besides nil, string, bool, int64, float64, []byte and
// time.Time. Each holds its value as text in the form PostgreSQL reads.
type (
	// Decimal is an exact decimal number as text, such as "12345.67" or "-0.05": never a
	// float. It is also a valid JSON number.
	Decimal string
	// Date is a calendar date without time zone, "2024-02-29".
	Date string
	// TimeOfDay is a time of day without time zone, "13:45:06.123456" (microseconds) or
	// "13:45:06.123" (milliseconds).
	TimeOfDay string
	// LocalTimestamp is a date and time without time zone, "2024-02-29T13:45:06.123456".
	LocalTimestamp string
)

// decimalText returns unscaled × 10^-scale as exact text. Its caller bounds scale
// (DecimalBytes).
func decimalText(unscaled *big.Int, scale int) Decimal {
	s := unscaled.String()
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	switch {
	case scale <= 0:
		if s != "0" {
			s += strings.Repeat("0", -scale)
		}
	case len(s) <= scale:
		s = "0." + strings.Repeat("0", scale-len(s)) + s
	default:
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return Decimal(s)
}

// Bounds of a decimal that DecimalBytes reads, from PostgreSQL numeric's own limits: at
// most 131,072 digits before the decimal point and 16,383 after it, so a scale from
// -131,072 to 16,383; and an unscaled value of at most 64 KiB (PostgreSQL's largest
// numeric, 147,455 digits, takes 61,230 bytes). A value outside them is refused before its
// text is built: its text could be gigabytes long (a scale of 2^31 is 2 GB of zeros), and
// PostgreSQL would refuse it anyway.
const (
	MinDecimalScale = -131072
	MaxDecimalScale = 16383
	MaxDecimalBytes = 64 << 10
)

// DecimalBytes returns the decimal whose unscaled value is b, big-endian two's complement
// (Avro's decimal, Kafka Connect's Decimal), times 10^-scale, as exact text. The error
// matches ErrMalformed when scale or len(b) is outside the bounds above.
func DecimalBytes(b []byte, scale int) (Decimal, error) {
	if scale < MinDecimalScale || scale > MaxDecimalScale {
		return "", malformed("decimal scale %d outside %d..%d (PostgreSQL numeric's limits)", scale, MinDecimalScale, MaxDecimalScale)
	}
	if len(b) > MaxDecimalBytes {
		return "", malformed("decimal unscaled value of %d bytes, more than %d", len(b), MaxDecimalBytes)
	}
	return decimalText(twosComplement(b), scale), nil
}

// twosComplement reads b as a big-endian two's-complement integer, as Avro's decimal and
// Kafka Connect's Decimal store the unscaled value.
func twosComplement(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return v
}

const (
	// timestampLayout is RFC 3339 in UTC with exactly six fractional digits, which
	// PostgreSQL's timestamptz reads without loss.
	timestampLayout      = "2006-01-02T15:04:05.000000Z07:00"
	localTimestampLayout = "2006-01-02T15:04:05.000000"
	dateLayout           = "2006-01-02"
)

// epochDate returns the date days after 1970-01-01.
func epochDate(days int64) Date {
	return Date(FormatTime(time.Unix(days*86400, 0).UTC(), dateLayout))
}

// FormatTime formats t with layout, which starts with the year ("2006-"), as PostgreSQL
// reads it: a year before 1 as its year of the era with " BC" after the text. Go counts
// years astronomically (year 0 is 1 BC, -43 is 44 BC) and writes them "-0043-03-15", which
// PostgreSQL refuses or reads as another date; PostgreSQL reads "0044-03-15 BC" and
// "0044-03-15T12:00:00Z BC".
func FormatTime(t time.Time, layout string) string {
	s := t.Format(layout)
	y := t.Year()
	if y > 0 {
		return s
	}
	i := strings.IndexByte(s[1:], '-') + 1 // the end of the year: "-0043-03-15", "0000-03-15"
	return padN(int64(1-y), 4) + s[i:] + " BC"
}

// timeOfDay returns the time of day that is v units of unit after midnight, with digits
// fractional digits (3 or 6). ok is false when v is outside 0 to 24:00:00.
func timeOfDay(v int64, unit time.Duration, digits int) (TimeOfDay, bool) {
	d := time.Duration(v) * unit
	if v < 0 || d > 24*time.Hour || (unit == time.Microsecond && v > 86400e6) || (unit == time.Millisecond && v > 86400e3) {
		return "", false
	}
	us := int64(d / time.Microsecond)
	h, m, s := us/3600e6, us/60e6%60, us/1e6%60
	frac := us % 1e6
	out := pad2(h) + ":" + pad2(m) + ":" + pad2(s)
	if digits == 3 {
		out += "." + padN(frac/1000, 3)
	} else {
		out += "." + padN(frac, 6)
	}
	return TimeOfDay(out), true
}

func pad2(v int64) string { return padN(v, 2) }

func padN(v int64, n int) string {
	s := strconv.FormatInt(v, 10)
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// float32Value widens f to the float64 with the same shortest decimal text (0.1 rather
// than 0.10000000149011612).
func float32Value(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil { // NaN and infinities format as text ParseFloat reads; never here
		return float64(f)
	}
	return v
}

// cloneBytes copies b; empty bytes give an empty, non-nil slice (an empty bytea, not NULL).
func cloneBytes(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}
