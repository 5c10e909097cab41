package schemaformat

import (
	"testing"
	"time"
)

// Years before 1 are written as PostgreSQL reads them, with the era: Go's own text,
// "-0043-03-15", was refused by PostgreSQL (or read as another date).
func TestFormatTimeEra(t *testing.T) {
	for _, c := range []struct {
		t      time.Time
		layout string
		want   string
	}{
		{time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), dateLayout, "2024-02-29"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), dateLayout, "0001-01-01"},
		{time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), dateLayout, "0001-12-31 BC"},
		{time.Date(0, 2, 29, 0, 0, 0, 0, time.UTC), dateLayout, "0001-02-29 BC"}, // 1 BC is a leap year
		{time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC), dateLayout, "0044-03-15 BC"},
		{time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC), dateLayout, "4713-01-01 BC"},
		{time.Date(-43, 3, 15, 12, 0, 0, 500000000, time.UTC), timestampLayout, "0044-03-15T12:00:00.500000Z BC"},
		{time.Date(-43, 3, 15, 12, 0, 0, 0, time.UTC), localTimestampLayout, "0044-03-15T12:00:00.000000 BC"},
	} {
		if got := FormatTime(c.t, c.layout); got != c.want {
			t.Errorf("FormatTime(%v) = %q, want %q", c.t, got, c.want)
		}
	}
	if got := epochDate(-735160); got != "0044-03-15 BC" {
		t.Errorf("epochDate(-735160) = %q", got)
	}
}
