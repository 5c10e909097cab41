package cdc

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// DefaultUnavailablePlaceholder is Debezium's default unavailable.value.placeholder: what
// the PostgreSQL connector sends, under the source's default REPLICA IDENTITY, for a
// TOASTed column that an update did not change.
const DefaultUnavailablePlaceholder = "__debezium_unavailable_value"

// placeholder is the connector's unavailable.value.placeholder in the forms it takes: the
// text (text, varchar, jsonb, enum... columns), its bytes (bytea: base64 in JSON, bytes in
// Avro), a one-element list of either (text[] and bytea[] columns), and the list of its
// bytes as numbers (int[] and other numeric array columns).
type placeholder struct {
	text, b64 string
	bytes     []byte
}

func newPlaceholder(s string) placeholder {
	if s == "" {
		s = DefaultUnavailablePlaceholder
	}
	return placeholder{text: s, b64: base64.StdEncoding.EncodeToString([]byte(s)), bytes: []byte(s)}
}

// is reports whether v is the placeholder in one of its forms. A real value equal to one
// of them (the very text, or an int[] spelling its bytes) cannot be told apart: it is
// taken for the placeholder, as every Debezium consumer must.
func (p placeholder) is(v any) bool {
	switch v := v.(type) {
	case string:
		return v == p.text || v == p.b64
	case []byte:
		return bytes.Equal(v, p.bytes)
	case []any:
		if len(v) == 1 {
			if _, list := v[0].([]any); !list {
				return p.is(v[0])
			}
		}
		if len(v) != len(p.bytes) {
			return false
		}
		for i, x := range v {
			if n, ok := asInt64(x); !ok || n != int64(p.bytes[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// prior is what a batch staged for one key: the source position of the change, and for an
// upsert its row, with the columns it left unavailable.
type prior struct {
	key         string // keyString
	commit, lsn int64
	del         bool
	row         []any
	unavail     []int
}

// errUnavailable is the poison of an upsert that carries unavailable values (the
// placeholder) where no value can be kept: its key has no row in the replica, or its last
// earlier change in the batch is a delete.
type errUnavailable struct {
	ord   int // the staged row (record index × 2 + 1)
	table string
	cols  []string
}

func (e *errUnavailable) Error() string {
	return fmt.Sprintf("cdc: %s: column(s) %s arrived as the connector's unavailable-value placeholder (a TOASTed value the "+
		"update did not change) and the replica has no row to keep it from; the placeholder is never written: set REPLICA "+
		"IDENTITY FULL on the source table and re-snapshot it (or replay the row's insert)", e.table, quoteList(e.cols))
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = strconv.Quote(c)
	}
	return strings.Join(q, ", ")
}

// fill gives the unavailable columns of an upsert at (commit, lsn) the values of the key's
// latest earlier change in the batch (by source position): an earlier upsert's value, or
// still unavailable where that one was too. It returns the columns left unavailable, to
// be kept from the replica's row; after a delete no value can be kept (errUnavailable).
func (s *stagedTable) fill(key string, commit, lsn int64, row []any, unavail []int) ([]int, error) {
	if s.priors == nil { // the first fill of the batch indexes what was staged before it
		s.priors = map[string][]int{}
		for i := range s.changes {
			s.priors[s.changes[i].key] = append(s.priors[s.changes[i].key], i)
		}
	}
	var best *prior
	for _, i := range s.priors[key] {
		p := &s.changes[i]
		if (p.commit > commit || p.commit == commit && p.lsn > lsn) ||
			best != nil && (p.commit < best.commit || p.commit == best.commit && p.lsn < best.lsn) {
			continue
		}
		best = p
	}
	if best == nil {
		return unavail, nil
	}
	if best.del {
		return nil, &errUnavailable{table: s.t.name, cols: s.t.names(unavail)}
	}
	var left []int
	for _, i := range unavail {
		if containsInt(best.unavail, i) {
			left = append(left, i)
		} else {
			row[i] = best.row[i]
		}
	}
	return left, nil
}

func (t *target) names(idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = t.cols[i]
	}
	return out
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// intArray is idx as PostgreSQL array text, nil (NULL) when empty.
func intArray(idx []int) any {
	if len(idx) == 0 {
		return nil
	}
	b := []byte{'{'}
	for j, i := range idx {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return string(append(b, '}'))
}
