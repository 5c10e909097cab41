package txn

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxIDLen bounds a transaction id's length: Debezium's PostgreSQL id, "<xid>:<lsn>", is at
// most 41 bytes.
const MaxIDLen = 64

// ID is Debezium's PostgreSQL transaction id, "<xid>:<lsn>". The xid names the source
// transaction; the LSN is the position of the record that carries the id, not of the
// transaction: a BEGIN, each change and the END of one transaction carry the same xid and
// different LSNs (the END's is the commit's LSN, the next transaction's source.sequence[0]).
type ID struct {
	XID uint64
	LSN int64
}

func (id ID) String() string {
	return strconv.FormatUint(id.XID, 10) + ":" + strconv.FormatInt(id.LSN, 10)
}

// ParseID parses "<xid>:<lsn>", two decimal numbers; field names the field in errors.
func ParseID(s, field string) (ID, error) {
	if s == "" {
		return ID{}, malformed(field, "empty")
	}
	if len(s) > MaxIDLen {
		return ID{}, malformed(field, "%d bytes, longer than %d", len(s), MaxIDLen)
	}
	if !utf8.ValidString(s) {
		return ID{}, malformed(field, "not UTF-8")
	}
	x, l, ok := strings.Cut(s, ":")
	if !ok {
		return ID{}, malformed(field, "%q is not <xid>:<lsn> (Debezium's PostgreSQL connector)", s)
	}
	xid, err := strconv.ParseUint(x, 10, 64)
	if err != nil || x[0] == '+' {
		return ID{}, malformed(field, "%q: xid %q is not a decimal number", s, x)
	}
	lsn, err := strconv.ParseInt(l, 10, 64)
	if err != nil || lsn < 0 || l[0] == '+' {
		return ID{}, malformed(field, "%q: lsn %q is not a decimal number of at most 63 bits", s, l)
	}
	return ID{XID: xid, LSN: lsn}, nil
}
