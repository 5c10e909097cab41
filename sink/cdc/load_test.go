package cdc

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// loadBed is a migrated schema with helpers for the load tests.
type loadBed struct {
	t         *testing.T
	ctx       context.Context
	conn      *pgx.Conn
	schema    string
	positions string
}

func newLoadBed(t *testing.T) *loadBed {
	conn, schema := migratedSchema(t)
	return &loadBed{t: t, ctx: context.Background(), conn: conn, schema: schema,
		positions: pgx.Identifier{schema, "cdc_positions"}.Sanitize()}
}

// table creates a target keyed by one bigint column and loads it.
func (b *loadBed) table(name string) *target {
	b.t.Helper()
	id := pgx.Identifier{b.schema, name}
	if _, err := b.conn.Exec(b.ctx, "CREATE TABLE "+id.Sanitize()+" (id bigint PRIMARY KEY, v text NOT NULL)"); err != nil {
		b.t.Fatal(err)
	}
	tg, _, err := loadTarget(b.ctx, b.conn, id, route{}, b.positions)
	if err != nil {
		b.t.Fatal(err)
	}
	if tg.loadSQL == "" {
		b.t.Fatalf("%s: no load statements for a bigint key", name)
	}
	return tg
}

// stage stages changes of ids: snapshot reads at (0, lsn) when commit is 0, else streamed
// upserts (or deletes) at (commit, lsn).
func (b *loadBed) stage(tg *target, ids []int64, commit, lsn int64, del bool, v string) *stagedTable {
	b.t.Helper()
	st := &stagedTable{t: tg}
	op := "r"
	if commit > 0 {
		op = "u"
	}
	for i, id := range ids {
		row := []any{strconv.FormatInt(id, 10), nil}
		if !del {
			row[1] = fmt.Sprintf("%s\t\\%d", v, id) // a tab and a backslash: COPY's escapes
		}
		if err := st.append(row, nil, &event{op: op, commit: commit, lsn: lsn}, 2*i+1, del); err != nil {
			b.t.Fatal(err)
		}
	}
	return st
}

// apply applies st in a transaction of conn and commits it.
func (b *loadBed) apply(conn *pgx.Conn, st *stagedTable) {
	b.t.Helper()
	tx, err := conn.Begin(b.ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := st.apply(b.ctx, tx, false, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := tx.Commit(b.ctx); err != nil {
		b.t.Fatal(err)
	}
}

// state is tg's rows and its keys' positions, as text: the stored ones, and (0, the
// floor) for a key with a row and none stored (load.go).
func (b *loadBed) state(tg *target) (rows, positions string) {
	b.t.Helper()
	if err := b.conn.QueryRow(b.ctx, "SELECT coalesce(string_agg(id || '=' || v, ' ' ORDER BY id), '') FROM "+tg.name).Scan(&rows); err != nil {
		b.t.Fatal(err)
	}
	if err := b.conn.QueryRow(b.ctx, `SELECT coalesce(string_agg(pk || ' ' || commit_lsn || ' ' || lsn || ' ' || deleted, ', ' ORDER BY pk), '')
FROM (SELECT pk, commit_lsn, lsn, deleted FROM `+tg.keyPositions+` WHERE target = $1
      UNION ALL SELECT t.id, 0, f.lsn, false FROM `+tg.name+` t JOIN `+tg.floors+` f ON f.target = $1
      WHERE NOT EXISTS (SELECT 1 FROM `+tg.keyPositions+` p WHERE p.target = $1 AND p.pk = t.id)) p`, tg.name).Scan(&positions); err != nil {
		b.t.Fatal(err)
	}
	return rows, positions
}

func ids(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestLoadWritesWhatTheMergeWrites: snapshot reads of a fresh table are loaded (copied
// straight in), and leave the rows and positions that the merge leaves in a twin table
// that never loads; reads of keys the table holds already are merged (the load's COPY
// fails on the primary key, the savepoint is rolled back), and the table then stops
// loading. A batch with a change other than a read is never loaded.
func TestLoadWritesWhatTheMergeWrites(t *testing.T) {
	b := newLoadBed(t)
	load, merge := b.table("load"), b.table("merge")
	merge.noLoad.Store(true)
	same := func(step string) {
		t.Helper()
		lr, lp := b.state(load)
		mr, mp := b.state(merge)
		if lr != mr || lp != mp {
			t.Errorf("%s: loaded table\n rows %q\n positions %q\nmerged table\n rows %q\n positions %q", step, lr, lp, mr, mp)
		}
		if lr == "" || lp == "" {
			t.Errorf("%s: nothing written", step)
		}
	}
	step := func(name string, wantLoaded bool, from, to, commit, lsn int64, v string) {
		t.Helper()
		l, m := b.stage(load, ids(from, to), commit, lsn, false, v), b.stage(merge, ids(from, to), commit, lsn, false, v)
		b.apply(b.conn, l)
		b.apply(b.conn, m)
		if l.loaded != wantLoaded || m.loaded {
			t.Errorf("%s: loaded %v (want %v), the twin loaded %v", name, l.loaded, wantLoaded, m.loaded)
		}
		same(name)
	}
	step("first snapshot batch", true, 1, 1000, 0, 500, "a")
	step("next snapshot batch, new keys", true, 1001, 2000, 0, 500, "a")
	if load.noLoad.Load() {
		t.Fatal("loads stopped after two loads of new keys")
	}
	step("a newer snapshot over keys held", false, 1900, 2100, 0, 600, "b")
	if !load.noLoad.Load() {
		t.Error("a load that hit held keys did not stop the target's loads")
	}
	load.noLoad.Store(false)
	step("an older snapshot over keys held", false, 1, 10, 0, 400, "c")
	load.noLoad.Store(false)
	step("streamed changes", false, 5, 2500, 900, 900, "d")

	mixed := b.stage(load, ids(3000, 3001), 0, 950, false, "e")
	if err := mixed.append([]any{"3002", "f"}, nil, &event{op: "c", commit: 960, lsn: 960}, 7, false); err != nil {
		t.Fatal(err)
	}
	twice := b.stage(load, []int64{4000, 4000}, 0, 950, false, "g")
	if mixed.loadable(false) || twice.loadable(false) || b.stage(load, ids(1, 2), 0, 950, false, "h").loadable(true) {
		t.Errorf("loadable: a batch with a create %v, with a key twice %v, checked reads %v; want none",
			mixed.loadable(false), twice.loadable(false), true)
	}
}

// TestLoadKeepsDeletesAndTruncates: a snapshot read older than its key's stored delete is
// not applied though the key has no row (the load's check finds the delete's position and
// the batch is merged), and a target with a truncate watermark is never
// loaded (the merge refuses the reads older than the truncate).
func TestLoadKeepsDeletesAndTruncates(t *testing.T) {
	b := newLoadBed(t)
	del := b.table("del")
	b.apply(b.conn, b.stage(del, []int64{7}, 100, 100, true, ""))
	st := b.stage(del, ids(1, 10), 0, 50, false, "a")
	b.apply(b.conn, st)
	rows, positions := b.state(del)
	if st.loaded || rows != "1=a\t\\1 2=a\t\\2 3=a\t\\3 4=a\t\\4 5=a\t\\5 6=a\t\\6 8=a\t\\8 9=a\t\\9 10=a\t\\10" {
		t.Errorf("reads older than key 7's delete: loaded %v, rows %q (want 7 absent)", st.loaded, rows)
	}
	if want := "1 0 50 false, 2 0 50 false, 3 0 50 false, 4 0 50 false, 5 0 50 false, 6 0 50 false, 7 100 100 true, 8 0 50 false, 9 0 50 false, 10 0 50 false"; positions != want {
		t.Errorf("positions %q, want %q", positions, want)
	}

	trunc := b.table("trunc")
	tx, err := b.conn.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := trunc.truncate(b.ctx, tx, &event{op: "t", commit: 100, lsn: 100}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	st = b.stage(trunc, ids(1, 10), 0, 50, false, "a")
	b.apply(b.conn, st)
	if rows, _ := b.state(trunc); st.loaded || rows != "" || !trunc.noLoad.Load() {
		t.Errorf("reads older than a truncate: loaded %v, rows %q, loads stopped %v; want false, none, true", st.loaded, rows, trunc.noLoad.Load())
	}
}

// TestLoadWaitsForMerges: a load waits for a merge of another partition that wrote one of
// its keys (the merge deleted it, uncommitted: the load waits on the merge lock, exclusive
// for a load), and then sees what the merge committed: the read of the deleted key is not
// applied.
func TestLoadWaitsForMerges(t *testing.T) {
	b := newLoadBed(t)
	e := testbed.Require(t)
	race := b.table("race")
	other, err := pgx.Connect(b.ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(b.ctx)
	loader, err := pgx.Connect(b.ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer loader.Close(b.ctx)

	tx, err := other.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx)
	if err := b.stage(race, []int64{5}, 100, 100, true, "").apply(b.ctx, tx, false, nil); err != nil {
		t.Fatal(err)
	}
	st := b.stage(race, ids(1, 10), 0, 50, false, "a")
	done := make(chan error, 1)
	go func() {
		ltx, err := loader.Begin(b.ctx)
		if err == nil {
			if err = st.apply(b.ctx, ltx, false, nil); err == nil {
				err = ltx.Commit(b.ctx)
			} else {
				ltx.Rollback(b.ctx)
			}
		}
		done <- err
	}()
	pid := loader.PgConn().PID()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := b.conn.QueryRow(b.ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the load did not wait for the merge that wrote key 5 (err %v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the load is not waiting for the merge after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rows, _ := b.state(race); st.loaded || rows != "1=a\t\\1 2=a\t\\2 3=a\t\\3 4=a\t\\4 6=a\t\\6 7=a\t\\7 8=a\t\\8 9=a\t\\9 10=a\t\\10" {
		t.Errorf("after the merge that deleted 5 committed: loaded %v, rows %q (want 5 absent)", st.loaded, rows)
	}
}

// TestLoadFloor: a load writes no position per key but the target's floor (its reads'
// LSN), and the merge then treats a key with a row and no position as at (0, floor): a
// snapshot read of it as old as the floor or older is not applied, a newer one is, as are
// reads of keys without a row. A read at another LSN than the floor's is merged, never
// loaded, and so is a first load into a table that holds rows, or one in a transaction that
// is not READ COMMITTED.
func TestLoadFloor(t *testing.T) {
	b := newLoadBed(t)
	tg := b.table("floor")
	rr := b.stage(tg, ids(1, 10), 0, 500, false, "a")
	tx, err := b.conn.BeginTx(b.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if err := rr.apply(b.ctx, tx, false, nil); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(b.ctx)
	if rr.loaded || !tg.noLoad.Load() {
		t.Errorf("a load in a REPEATABLE READ transaction: loaded %v, loads stopped %v; want false, true", rr.loaded, tg.noLoad.Load())
	}
	tg.noLoad.Store(false)

	st := b.stage(tg, ids(1, 10), 0, 500, false, "a")
	b.apply(b.conn, st)
	var explicit int
	var floor int64
	if err := b.conn.QueryRow(b.ctx, "SELECT (SELECT count(*) FROM "+tg.keyPositions+" WHERE target = $1), (SELECT lsn FROM "+tg.floors+" WHERE target = $1)",
		tg.name).Scan(&explicit, &floor); err != nil {
		t.Fatal(err)
	}
	if !st.loaded || explicit != 0 || floor != 500 {
		t.Fatalf("the load: loaded %v, %d position rows, floor %d; want true, 0, 500", st.loaded, explicit, floor)
	}
	more := b.stage(tg, ids(13, 14), 0, 500, false, "a")
	b.apply(b.conn, more)
	later := b.stage(tg, ids(11, 12), 0, 600, false, "b")
	b.apply(b.conn, later)
	if !more.loaded || later.loaded || !tg.noLoad.Load() {
		t.Errorf("reads at 500, then at 600, into a target floored at 500: loaded %v and %v, loads stopped %v; want true, false, true",
			more.loaded, later.loaded, tg.noLoad.Load())
	}
	if _, err := b.conn.Exec(b.ctx, "INSERT INTO "+tg.name+" VALUES (50, 'other')"); err != nil { // a competing writer's row
		t.Fatal(err)
	}
	b.apply(b.conn, b.stage(tg, []int64{1, 2}, 0, 450, false, "older"))
	b.apply(b.conn, b.stage(tg, []int64{3}, 0, 700, false, "newer"))
	b.apply(b.conn, b.stage(tg, []int64{4, 50}, 0, 500, false, "same")) // a replay of the snapshot
	b.apply(b.conn, b.stage(tg, []int64{99}, 0, 300, false, "new key"))
	b.apply(b.conn, b.stage(tg, []int64{5}, 800, 800, true, ""))
	b.apply(b.conn, b.stage(tg, []int64{5}, 0, 500, false, "resurrected"))
	rows, positions := b.state(tg)
	want := "1=a\t\\1 2=a\t\\2 3=newer\t\\3 4=a\t\\4 6=a\t\\6 7=a\t\\7 8=a\t\\8 9=a\t\\9 10=a\t\\10 11=b\t\\11 12=b\t\\12 " +
		"13=a\t\\13 14=a\t\\14 50=other 99=new key\t\\99"
	if rows != want {
		t.Errorf("rows\n %q, want\n %q", rows, want)
	}
	wantPos := "1 0 500 false, 2 0 500 false, 3 0 700 false, 4 0 500 false, 5 800 800 true, 6 0 500 false, 7 0 500 false, 8 0 500 false, 9 0 500 false, 10 0 500 false, " +
		"11 0 600 false, 12 0 600 false, 13 0 500 false, 14 0 500 false, 50 0 500 false, 99 0 300 false"
	if positions != wantPos {
		t.Errorf("positions\n %q, want\n %q", positions, wantPos)
	}
	if err := b.conn.QueryRow(b.ctx, "SELECT count(*) FROM "+tg.keyPositions+" WHERE target = $1 AND pk <= 14", tg.name).Scan(&explicit); err != nil {
		t.Fatal(err)
	} else if explicit != 4 { // 3, 5, 11 and 12: the replayed reads wrote none
		t.Errorf("%d position rows for keys 1 to 14, want 4", explicit)
	}

	pre := b.table("pre")
	if _, err := b.conn.Exec(b.ctx, "INSERT INTO "+pre.name+" VALUES (1, 'before')"); err != nil {
		t.Fatal(err)
	}
	st = b.stage(pre, ids(2, 3), 0, 500, false, "a")
	b.apply(b.conn, st)
	b.apply(b.conn, b.stage(pre, []int64{1}, 0, 500, false, "snapshot"))
	if rows, _ := b.state(pre); st.loaded || rows != "1=snapshot\t\\1 2=a\t\\2 3=a\t\\3" {
		t.Errorf("a table holding rows before its first load: loaded %v, rows %q; want false, and the snapshot's row 1", st.loaded, rows)
	}

	// Migration 6's down writes the floor's keys a position row each, as loads did before it.
	down, err := migrationFiles.ReadFile("migrations/0006_cdc_load_floors.down.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.Exec(b.ctx, "SET search_path = "+pgx.Identifier{b.schema}.Sanitize()+"; "+string(down)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.Exec(b.ctx, "CREATE TABLE cdc_load_floors (target text PRIMARY KEY, lsn bigint NOT NULL)"); err != nil {
		t.Fatal(err) // empty: state reads the stored positions only
	}
	if _, after := b.state(tg); after != wantPos {
		t.Errorf("after migration 6's down, positions\n %q, want\n %q", after, wantPos)
	}
}
