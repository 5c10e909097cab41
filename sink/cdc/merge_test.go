package cdc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestMergeByPrimaryKey: the merge of 1,500 staged changes (500 updates, 500 deletes, 500
// inserts) into a 20,000-row replica applies them all, and its plan reaches the replica's
// rows through the primary key only (no hash or merge join, no sequential scan of the
// replica), with the staged rows' anti-join against the updated ones hashed. The planner
// settings it changes for that are back as they were afterwards, the session's own
// included.
func TestMergeByPrimaryKey(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := testbed.Schema(t, e)
	p, err := New(Config{PositionsSchema: schema, Table: "replica.${source.table}"}) // the plugin only migrates here
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{schema, "r"}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY, v text);
INSERT INTO %[1]s SELECT g, 'old ' || g FROM generate_series(1, 20000) g; ANALYZE %[1]s`, table.Sanitize())); err != nil {
		t.Fatal(err)
	}
	tg, _, err := loadTarget(ctx, conn, table, route{}, pgx.Identifier{schema, "cdc_positions"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}

	for _, session := range []struct{ set, hash, merge string }{
		{"RESET ALL", "on", "on"},
		{"SET enable_hashjoin = off", "off", "on"},
	} {
		if _, err := conn.Exec(ctx, session.set); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := &stagedTable{t: tg}
		ev := &event{commit: 100, lsn: 100}
		for i := range 1500 {
			var id int64
			del := false
			switch {
			case i < 500: // updates of rows 1, 3, 5, ...
				id = int64(2*i + 1)
			case i < 1000: // deletes of rows 2, 4, 6, ...
				id, del = int64(2*(i-500)+2), true
			default: // inserts
				id = int64(100000 + i)
			}
			row := []any{strconv.FormatInt(id, 10), nil}
			if !del {
				row[1] = session.set + " " + strconv.FormatInt(id, 10)
			}
			ev.lsn++
			if err := st.append(row, nil, ev, 2*i+1, del); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.apply(ctx, tx, false); err != nil {
			t.Fatal(err)
		}
		var hash, merge string
		if err := tx.QueryRow(ctx, "SELECT current_setting('enable_hashjoin'), current_setting('enable_mergejoin')").Scan(&hash, &merge); err != nil {
			t.Fatal(err)
		}
		if hash != session.hash || merge != session.merge {
			t.Errorf("%s: after the merge enable_hashjoin = %s, enable_mergejoin = %s; want %s, %s", session.set, hash, merge, session.hash, session.merge)
		}
		var rows, updated, deleted, inserted int
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE v = $1 || ' ' || id),
  500 - count(*) FILTER (WHERE id <= 1000 AND id %% 2 = 0), count(*) FILTER (WHERE id > 100000) FROM %s`, table.Sanitize()),
			session.set).Scan(&rows, &updated, &deleted, &inserted); err != nil {
			t.Fatal(err)
		}
		if rows != 20000 || updated != 1000 || deleted != 500 || inserted != 500 {
			t.Errorf("%s: %d rows, %d written by the merge, %d deleted, %d inserted; want 20000, 1000, 500, 500", session.set, rows, updated, deleted, inserted)
		}

		// The plan, as the merge makes it: the staging table is empty again (the merge
		// deleted its rows), and the planner then takes it for ten pages (about 500 rows).
		var plan []string
		b := &pgx.Batch{}
		b.Queue(joinsSaveSQL)
		b.Queue(joinsOffSQL)
		b.Queue("EXPLAIN " + tg.applySQL)
		b.Queue(joinsBackSQL)
		br := tx.SendBatch(ctx, b)
		for range 2 {
			if _, err := br.Exec(); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := br.Query()
		if err != nil {
			t.Fatal(err)
		}
		plan, err = pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Hash Join") || strings.Contains(text, "Merge Join") || strings.Contains(text, "Seq Scan on r ") ||
			strings.Count(text, "Index Scan using r_pkey") < 2 || !strings.Contains(text, "hashed SubPlan") {
			t.Errorf("%s: the merge's plan:\n%s", session.set, text)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
