package fidelity

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// cell is the outcome of one type, converter and replica identity in one replica.
type cell struct {
	tb        table
	rp        *replica
	source    int
	replica   int
	differ    []string // keys whose rows differ, are missing or extra (as compared)
	status    string   // exact, by value, refused: <reason>, lossy: ..., MISMATCH: ...
	ok        bool     // the status is what the suite expects
	expectedL bool     // an expected lossy cell, its differences not counted
}

// rows returns key → the comparison expression of every row of schema.name.
func rows(ctx context.Context, db querier, expr, schema, name string) (map[int64]string, error) {
	rs, err := db.Query(ctx, fmt.Sprintf("SELECT id, %s FROM %s AS t", expr, pgx.Identifier{schema, name}.Sanitize()))
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	var id int64
	var s *string
	_, err = pgx.ForEachRow(rs, []any{&id, &s}, func() error {
		out[id] = "NULL"
		if s != nil {
			out[id] = *s
		}
		return nil
	})
	return out, err
}

// diff returns the keys whose values differ between a and b, with the first three shown.
func diff(a, b map[int64]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("%d: missing (source %.80s)", k, v))
		} else if v != w {
			out = append(out, fmt.Sprintf("%d: source %.120s, replica %.120s", k, v, w))
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%d: extra (replica %.80s)", k, w))
		}
	}
	sort.Strings(out)
	return out
}

// valueExprs returns the by-value comparison of a type's v on the source and on a replica.
func valueExprs(t colType) (src, rep string) {
	if t.val != "" {
		return fmt.Sprintf("row(id, version, note, %s)::text", fmt.Sprintf(t.val, "v")), fmt.Sprintf("row(id, version, note, %s)::text", fmt.Sprintf(t.val, "v"))
	}
	cast := strings.TrimPrefix(t.sql, "fid.")
	return "row(id, version, note, v::text)::text", fmt.Sprintf("row(id, version, note, v::text::%s::text)::text", cast)
}

// compareCell compares a source table with its replica: as row::text for a replica made from
// the source's DDL (exact), and by value otherwise or when the text differs; dead letters and
// stopped partitions of its topic make it refused.
func compareCell(ctx context.Context, src, db querier, tb table, rp *replica, v variant, refused map[string]string) cell {
	c := cell{tb: tb, rp: rp}
	extra := ""
	if hasExtra(ctx, src, tb) {
		extra = ", extra"
	}
	exact := "t::text"
	sv, rv := valueExprs(tb.typ)
	sv, rv = strings.Replace(sv, "note,", "note"+extra+",", 1), strings.Replace(rv, "note,", "note"+extra+",", 1)
	srcExact, err1 := rows(ctx, src, exact, "fid", tb.name)
	srcVal, err2 := rows(ctx, src, sv, "fid", tb.name)
	if err := firstErr(err1, err2); err != nil {
		c.status = "MISMATCH: reading the source: " + err.Error()
		return c
	}
	c.source = len(srcExact)
	var d []string
	how := ""
	if rp.kind == "ddl" {
		if repExact, err := rows(ctx, db, exact, rp.schema, tb.name); err == nil {
			c.replica = len(repExact)
			if d = diff(srcExact, repExact); len(d) == 0 {
				how = "exact"
			}
		} else {
			d = []string{"reading the replica: " + err.Error()}
		}
	}
	if how == "" {
		if repVal, err := rows(ctx, db, rv, rp.schema, tb.name); err == nil {
			c.replica = len(repVal)
			if d = diff(srcVal, repVal); len(d) == 0 {
				how = "by value"
			}
		} else if len(d) == 0 {
			d = []string{"reading the replica by value: " + err.Error()}
		}
	}
	c.differ = d
	entry, isLossy := lossy(tb.typ.name, rp.label, v.name, tb.identity())
	setting := entry.setting
	reason, isRefused := refused[tb.name]
	switch {
	case isLossy && entry.sometimes && !isRefused && how != "" && (how == "exact" || rp.kind == "create"):
		c.status, c.ok = how+fmt.Sprintf(" (may be lossy: exact with %s)", setting), true
	case isRefused && isLossy: // loud, never written wrong: what an encoding that loses information may get
		c.status = fmt.Sprintf("refused: %s (expected lossy: exact with %s)", reason, setting)
		c.ok, c.expectedL = true, true
	case isRefused:
		c.status = "refused: " + reason
		if len(d) > 0 {
			c.status += fmt.Sprintf(" (%d rows not replicated)", len(d))
		}
	case isLossy && how == "":
		c.status = fmt.Sprintf("lossy as expected (%d rows differ; exact with %s)", len(d), setting)
		c.ok, c.expectedL = true, true
	case isLossy && rp.kind == "ddl" && how == "by value":
		c.status = fmt.Sprintf("by value (lossy as expected: exact with %s)", setting)
		c.ok, c.expectedL = true, true
	case isLossy && rp.kind == "create": // compared by value, which may not see the loss
		c.status, c.ok = how, true
	case isLossy:
		c.status = how + fmt.Sprintf(" (stale entry in expectLossy: expected lossy, exact with %s)", setting)
	case how == "":
		c.status = fmt.Sprintf("MISMATCH: %d of %d rows differ: %s", len(d), c.source, strings.Join(d[:min(3, len(d))], "; "))
	case rp.kind == "ddl" && how == "by value":
		c.status = "by value, not exact: " + strings.Join(d[:min(3, len(d))], "; ")
	default:
		c.status, c.ok = how, true
	}
	return c
}

func hasExtra(ctx context.Context, src querier, tb table) bool {
	var n int
	_ = src.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'fid' AND table_name = $1 AND column_name = 'extra'`, tb.name).Scan(&n)
	return n > 0
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// refusals returns, per source table, the first dead letter's error and count, or the stop
// of its partition.
func refusals(ctx context.Context, db querier, rp *replica, topicTable func(string) string, stopped map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for topic, why := range stopped {
		out[topicTable(topic)] = "partition stopped: " + why
	}
	rs, err := db.Query(ctx, fmt.Sprintf(`SELECT topic, count(*), min(error) FROM %s.dead_letters WHERE pipeline = $1 GROUP BY topic`,
		pgx.Identifier{rp.offsets}.Sanitize()), rp.pipeline)
	if err != nil {
		return nil, err
	}
	var topic, why string
	var n int
	_, err = pgx.ForEachRow(rs, []any{&topic, &n, &why}, func() error {
		if _, ok := out[topicTable(topic)]; !ok {
			out[topicTable(topic)] = fmt.Sprintf("%d dead letters: %.300s", n, why)
		}
		return nil
	})
	return out, err
}

// versions returns every replica row as table:id → version. A replica made by create: true
// has no table yet for a source table none of whose events was applied.
func versions(ctx context.Context, db querier, schema string, tables []table) (map[string]int64, error) {
	rs, err := db.Query(ctx, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1", schema)
	if err != nil {
		return nil, err
	}
	have, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	parts := []string{"SELECT ''::text, 0::bigint, 0::integer WHERE false"}
	for _, tb := range tables {
		if !slices.Contains(have, tb.name) {
			continue
		}
		parts = append(parts, fmt.Sprintf("SELECT %s, id, version FROM %s", lit(tb.name), pgx.Identifier{schema, tb.name}.Sanitize()))
	}
	rs, err = db.Query(ctx, strings.Join(parts, " UNION ALL "))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var name string
	var id, v int64
	_, err = pgx.ForEachRow(rs, []any{&name, &id, &v}, func() error { out[fmt.Sprint(name, ":", id)] = v; return nil })
	return out, err
}

// backwards compares consecutive samples of a replica's versions: a version that went down
// or a row that came back after it was gone (ids are never reused) is a move backwards.
func backwards(samples []map[string]int64) []string {
	var out []string
	gone := map[string]bool{}
	for i := 1; i < len(samples); i++ {
		prev, s := samples[i-1], samples[i]
		for k, v := range prev {
			if got, ok := s[k]; !ok {
				gone[k] = true
			} else if got < v {
				out = append(out, fmt.Sprintf("%s went back from version %d to %d", k, v, got))
			}
		}
		for k := range s {
			if _, was := prev[k]; !was && gone[k] {
				out = append(out, fmt.Sprintf("%s came back after it was gone", k))
			}
		}
	}
	return out
}
