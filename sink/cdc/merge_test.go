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
	"github.com/eosink/eosink/sink/internal/stage"
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
		if err := st.apply(ctx, tx, false, nil); err != nil {
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

		// The plans, as the merge makes them: the staging table is empty again (the merge
		// deleted its rows), and the planner then takes it for ten pages (about 500 rows).
		// applySQL (a batch with unavailable values) probes the key to delete and to
		// update; upsertSQL (the batch above) to delete, and its insert's arbiter is the key.
		explain := func(sql string) string {
			var plan []string
			b := &pgx.Batch{}
			b.Queue(joinsSaveSQL)
			b.Queue(joinsOffSQL)
			b.Queue("EXPLAIN " + sql)
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
			return strings.Join(plan, "\n")
		}
		noScan := func(text string) bool {
			return !strings.Contains(text, "Hash Join") && !strings.Contains(text, "Merge Join") && !strings.Contains(text, "Seq Scan on r ")
		}
		if text := explain(tg.applySQL); !noScan(text) || strings.Count(text, "Index Scan using r_pkey") < 2 || !strings.Contains(text, "hashed SubPlan") {
			t.Errorf("%s: applySQL's plan:\n%s", session.set, text)
		}
		if text := explain(tg.upsertSQL); !noScan(text) || strings.Count(text, "Index Scan using r_pkey") < 1 || !strings.Contains(text, "Conflict Arbiter Indexes: r_pkey") {
			t.Errorf("%s: upsertSQL's plan:\n%s", session.set, text)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntKeyPositions: a target keyed by one integer column keeps its positions in
// cdc_positions_int (migration 5). Its first merge moves the positions the code before
// migration 5 left in cdc_positions (the newer winning where a key is in both), leaving
// the truncate watermark there, and the moved positions guard as before: an upsert older
// than a key's stored delete is not applied. A target whose key is not one integer column
// moves its positions back.
func TestIntKeyPositions(t *testing.T) {
	ctx := context.Background()
	conn, schema := migratedSchema(t)
	s := pgx.Identifier{schema}.Sanitize()
	positions := pgx.Identifier{schema, "cdc_positions"}.Sanitize()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows := func(sql string, args ...any) string {
		t.Helper()
		var out string
		if err := conn.QueryRow(ctx, sql, args...).Scan(&out); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	merge := func(tg *target, ids []string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := &stagedTable{t: tg}
		for i, id := range ids {
			if err := st.append([]any{id, "v" + id}, nil, &event{commit: 100, lsn: int64(100 + i)}, 2*i+1, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.apply(ctx, tx, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ints := pgx.Identifier{schema, "ints"}
	exec(fmt.Sprintf("CREATE DOMAIN %s.ident AS integer; CREATE TABLE %s (id %s.ident PRIMARY KEY, v text)", s, ints.Sanitize(), s))
	name := ints.Sanitize()
	exec(`INSERT INTO `+positions+` VALUES ($1, '[1]', 50, 50, false), ($1, '[2]', 500, 500, true), ($1, '[3]', 50, 50, false),
  ($1, 'null', 10, 10, true), ($1, '["x"]', 7, 7, false)`, name)
	exec(`INSERT INTO `+s+`.cdc_positions_int VALUES ($1, 3, 60, 60, true)`, name)
	tg, _, err := loadTarget(ctx, conn, ints, route{}, positions)
	if err != nil {
		t.Fatal(err)
	}
	if want := (pgx.Identifier{schema, "cdc_positions_int"}).Sanitize(); !tg.intKey || tg.keyPositions != want {
		t.Fatalf("a key of one integer (domain) column: intKey %v, positions in %s", tg.intKey, tg.keyPositions)
	}
	merge(tg, []string{"1", "2", "3", "4"})
	if got, want := rows("SELECT string_agg(id || '=' || v, ' ' ORDER BY id) FROM "+name), "1=v1 3=v3 4=v4"; got != want {
		t.Errorf("replica %q, want %q (2's upsert is older than its stored delete)", got, want)
	}
	if got, want := rows("SELECT string_agg(pk || ' ' || commit_lsn || ' ' || deleted, ', ' ORDER BY pk) FROM "+s+".cdc_positions_int WHERE target = $1", name),
		"1 100 false, 2 500 true, 3 100 false, 4 100 false"; got != want {
		t.Errorf("cdc_positions_int holds %q, want %q", got, want)
	}
	if got, want := rows("SELECT string_agg(pk::text, ' ' ORDER BY pk::text) FROM "+positions+" WHERE target = $1", name), `["x"] null`; got != want {
		t.Errorf("cdc_positions holds %q of the target, want %q (the watermark, and a key of another shape)", got, want)
	}

	texts := pgx.Identifier{schema, "texts"}
	exec(fmt.Sprintf("CREATE TABLE %s (id text PRIMARY KEY, v text)", texts.Sanitize()))
	exec(`INSERT INTO `+s+`.cdc_positions_int VALUES ($1, 9, 50, 50, true)`, texts.Sanitize())
	tt, _, err := loadTarget(ctx, conn, texts, route{}, positions)
	if err != nil {
		t.Fatal(err)
	}
	if tt.intKey {
		t.Fatal("a text key: intKey")
	}
	merge(tt, []string{"a"})
	if got, want := rows("SELECT string_agg(pk::text || ' ' || commit_lsn, ', ' ORDER BY pk::text) FROM "+positions+" WHERE target = $1", texts.Sanitize()),
		`["a"] 100, [9] 50`; got != want {
		t.Errorf("cdc_positions holds %q of the text-keyed target, want %q", got, want)
	}
	if got := rows("SELECT count(*)::text FROM "+s+".cdc_positions_int WHERE target = $1", texts.Sanitize()); got != "0" {
		t.Errorf("cdc_positions_int holds %s positions of the text-keyed target", got)
	}
}

// TestStagingTablesBounded: a session that merges into more targets than
// stage.MaxPerSession keeps that many staging tables, dropping the least recently used,
// and every merge applies: its commits empty a bounded number of tables, whatever the
// number of targets.
func TestStagingTablesBounded(t *testing.T) {
	ctx := context.Background()
	conn, schema := migratedSchema(t)
	const targets = stage.MaxPerSession + 5
	var tgs []*target
	for i := range targets {
		table := pgx.Identifier{schema, fmt.Sprintf("r%d", i)}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, v text, c%d int)", table.Sanitize(), i)); err != nil {
			t.Fatal(err)
		}
		tg, _, err := loadTarget(ctx, conn, table, route{}, pgx.Identifier{schema, "cdc_positions"}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		tgs = append(tgs, tg)
	}
	var sessions stage.Sessions
	for round := range 2 {
		for i, tg := range tgs {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st := &stagedTable{t: tg, stages: &sessions}
			id := strconv.Itoa(round*100 + i)
			if err := st.append([]any{id, "v", nil}, nil, &event{commit: int64(100 + round), lsn: int64(100 + i)}, 1, false); err != nil {
				t.Fatal(err)
			}
			if err := st.apply(ctx, tx, false, nil); err != nil {
				t.Fatalf("round %d, target %d: %v", round, i, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			var temps int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r'").Scan(&temps); err != nil {
				t.Fatal(err)
			}
			if temps > stage.MaxPerSession {
				t.Fatalf("round %d, after target %d: the session holds %d staging tables, want at most %d", round, i, temps, stage.MaxPerSession)
			}
		}
	}
	for i, tg := range tgs {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+tg.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("target %d holds %d rows, want 2", i, n)
		}
	}
}

// TestStagingSharedByShape: targets with the same columns (names, types, collations)
// share one staging table per session, and two of them merged in one transaction each
// get only their own rows; a target whose column differs in type or collation gets a
// staging table of its own.
func TestStagingSharedByShape(t *testing.T) {
	ctx := context.Background()
	conn, schema := migratedSchema(t)
	defs := []string{"id bigint PRIMARY KEY, v text", "id bigint PRIMARY KEY, v text", "id bigint PRIMARY KEY, v varchar(9)", `id bigint PRIMARY KEY, v text COLLATE "C"`}
	var tgs []*target
	for i, def := range defs {
		table := pgx.Identifier{schema, fmt.Sprintf("s%d", i)}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", table.Sanitize(), def)); err != nil {
			t.Fatal(err)
		}
		tg, _, err := loadTarget(ctx, conn, table, route{}, pgx.Identifier{schema, "cdc_positions"}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		tgs = append(tgs, tg)
	}
	if tgs[0].stage != tgs[1].stage {
		t.Fatalf("two targets of one shape stage in %s and %s, want one table", tgs[0].stage, tgs[1].stage)
	}
	for i := 2; i < len(tgs); i++ {
		for j := range i {
			if tgs[i].stage == tgs[j].stage {
				t.Fatalf("targets %d (%s) and %d (%s) share staging table %s", i, defs[i], j, defs[j], tgs[i].stage)
			}
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sessions stage.Sessions
	for i, tg := range tgs {
		st := &stagedTable{t: tg, stages: &sessions}
		for k := range 3 {
			id := strconv.Itoa(i*10 + k)
			if err := st.append([]any{id, fmt.Sprint("t", i)}, nil, &event{commit: 100, lsn: int64(100 + k)}, k, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.apply(ctx, tx, false, nil); err != nil {
			t.Fatalf("target %d: %v", i, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tg := range tgs {
		var n, others int
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE v <> 't%d' OR id NOT BETWEEN %d AND %d) FROM %s", i, i*10, i*10+2, tg.name)).Scan(&n, &others); err != nil {
			t.Fatal(err)
		}
		if n != 3 || others != 0 {
			t.Errorf("target %d holds %d rows (%d not its own), want its 3", i, n, others)
		}
	}
	var temps int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r'").Scan(&temps); err != nil {
		t.Fatal(err)
	}
	if temps != 3 {
		t.Errorf("the session holds %d staging tables for 4 targets of 3 shapes, want 3", temps)
	}
}

// TestStagingKinds: small batches stage in a plain table, which keeps its pages after a
// commit until it has taken stage.TruncateBytes and is truncated; stage.Switch big batches
// in a row make it ON COMMIT DELETE ROWS (no pages after a commit); every row arrives.
func TestStagingKinds(t *testing.T) {
	ctx := context.Background()
	conn, schema := migratedSchema(t)
	table := pgx.Identifier{schema, "kinds"}
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table.Sanitize()+" (id bigint PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	tg, _, err := loadTarget(ctx, conn, table, route{}, pgx.Identifier{schema, "cdc_positions"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	var sessions stage.Sessions
	value := strings.Repeat("v", 1000)
	id := 0
	batch := func(rows int) (blocks int64) { // one committed batch of rows new keys; the stage's blocks after the commit
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := &stagedTable{t: tg, stages: &sessions}
		for k := range rows {
			id++
			if err := st.append([]any{strconv.Itoa(id), value}, nil, &event{commit: 100, lsn: int64(id)}, k, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.apply(ctx, tx, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT pg_relation_size($1::regclass) / current_setting('block_size')::int", "pg_temp."+tg.stage).Scan(&blocks); err != nil {
			t.Fatal(err)
		}
		return blocks
	}
	small, big := stage.SmallBytes/1100/4, stage.SmallBytes/1000+10 // rows of a little over 1,000 bytes of COPY text
	var truncated bool
	last := int64(0)
	for i := range stage.TruncateBytes/(small*1000) + 2 {
		blocks := batch(small)
		switch {
		case blocks == 0:
			t.Fatalf("small batch %d: the stage has no pages after the commit: emptied at commit, want a plain table", i+1)
		case blocks < last:
			truncated = true
		}
		last = blocks
	}
	if !truncated {
		t.Fatalf("%d bytes staged in small batches: the stage never shrank (%d blocks), want a truncate past %d", id*1000, last, stage.TruncateBytes)
	}
	for i := range stage.Switch {
		blocks := batch(big)
		if i < stage.Switch-1 && blocks == 0 {
			t.Fatalf("big batch %d in a row: the stage has no pages after the commit: made again before %d", i+1, stage.Switch)
		}
		if i == stage.Switch-1 && blocks != 0 {
			t.Fatalf("big batch %d in a row: the stage has %d blocks after the commit, want an ON COMMIT DELETE ROWS table", i+1, blocks)
		}
	}
	if blocks := batch(small); blocks != 0 {
		t.Fatalf("a small batch after the switch: the stage has %d blocks after the commit, want it still emptied at commit", blocks)
	}
	var n, maxID int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(id) FROM "+tg.name+" WHERE v = $1", value).Scan(&n, &maxID); err != nil {
		t.Fatal(err)
	}
	if n != id || maxID != id {
		t.Fatalf("the target holds %d rows (largest key %d), want %d", n, maxID, id)
	}
}

// migratedSchema returns a connection and a new schema with the cdc plugin's tables.
func migratedSchema(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	e := testbed.Require(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	schema := testbed.Schema(t, e)
	p, err := New(Config{PositionsSchema: schema, Table: "replica.${source.table}"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	return conn, schema
}
