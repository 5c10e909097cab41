package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
	"github.com/eosink/eosink/sink"
)

// Tests of one role per pipeline (row-level security, migration 7) and of the audit that
// the offsets table's trigger writes. The roles are made per test on the bed's PostgreSQL,
// which lets any role but the secure bed's in over 127.0.0.1 without a password; the
// tables are owned by the bed's superuser, as if it were the migrate role.

// dbRole creates a login role (no superuser, no BYPASSRLS) dropped when the test ends.
func dbRole(t *testing.T, e testbed.Env, prefix string) string {
	t.Helper()
	name := testbed.Name(t, prefix)
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	db := testbed.Pool(t, e)
	if _, err := db.Exec(context.Background(), "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN NOSUPERUSER NOBYPASSRLS"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, e.DatabaseURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		_, _ = conn.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{name}.Sanitize())
		_, _ = conn.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize())
	})
	return name
}

// roleURL is the bed's database URL as role.
func roleURL(t *testing.T, e testbed.Env, role string) string {
	t.Helper()
	u, err := url.Parse(e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// rolePool is a pool that logs in as role, closed when the test ends.
func rolePool(t *testing.T, e testbed.Env, role string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), roleURL(t, e, role))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// psqlScript runs docs/sql/<file> as the bed's superuser (the tables' owner) with vars.
func psqlScript(t *testing.T, e testbed.Env, file string, vars ...string) {
	t.Helper()
	psql := "psql"
	if dir := os.Getenv("EOSINK_PG_BINDIR"); dir != "" {
		psql = filepath.Join(dir, "psql")
	}
	args := []string{e.DatabaseURL, "-X", "-q", "-v", "ON_ERROR_STOP=1"}
	for _, v := range vars {
		args = append(args, "-v", v)
	}
	out, err := exec.Command(psql, append(args, "-f", filepath.Join("..", "docs", "sql", file))...).CombinedOutput()
	if err != nil {
		t.Fatalf("docs/sql/%s %v: %v\n%s", file, vars, err, out)
	}
}

// grantRun gives role docs/sql/grants.sql's privileges on schema and targetSchema.
func grantRun(t *testing.T, e testbed.Env, role, schema, targetSchema string) {
	t.Helper()
	psqlScript(t, e, "grants.sql", "run_role="+role, "schema="+schema, "target_schema="+targetSchema)
}

// confine maps pipeline to role with docs/sql/pipeline_role.sql.
func confine(t *testing.T, e testbed.Env, pipeline, role, schema string) {
	t.Helper()
	psqlScript(t, e, "pipeline_role.sql", "pipeline="+pipeline, "run_role="+role, "schema="+schema)
}

// grantOperator gives role what docs/security.md lists for an operator beyond the run role's
// grants: reading the offsets' audit (since migration 9 replay and discard update dead
// letters and write their audit, which grants.sql allows).
func grantOperator(t *testing.T, e testbed.Env, role, schema string) {
	t.Helper()
	s, r := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	if _, err := testbed.Pool(t, e).Exec(context.Background(), "GRANT SELECT ON "+s+".offsets_audit TO "+r); err != nil {
		t.Fatal(err)
	}
}

// isolatedSchema is a migrated eosink schema, with an empty target schema for grants.sql.
func isolatedSchema(t *testing.T, e testbed.Env) (schema, target string) {
	t.Helper()
	schema, target = testbed.Schema(t, e), testbed.Schema(t, e)
	if err := sink.Migrate(context.Background(), e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	if _, err := testbed.Pool(t, e).Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{target}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return schema, target
}

func isInsufficientPrivilege(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// TestRolePipelinesIsolated: with pipelines A and B each confined to its own run role, A's
// role neither sees nor changes B's offsets, dead letters, heartbeats or audit rows, and
// cannot insert rows for B; B's rows stay as they were. A role mapped to no pipeline still
// sees both, as before migration 7.
func TestRolePipelinesIsolated(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	schema, target := isolatedSchema(t, e)
	roleA, roleB, ops := dbRole(t, e, "ra"), dbRole(t, e, "rb"), dbRole(t, e, "ops")
	for _, r := range []string{roleA, roleB, ops} {
		grantRun(t, e, r, schema, target)
	}
	// A may write audit rows, as an operator may: only for its own pipeline.
	if _, err := testbed.Pool(t, e).Exec(ctx, "GRANT SELECT, INSERT ON "+pgx.Identifier{schema, "offsets_audit"}.Sanitize()+" TO "+
		pgx.Identifier{roleA}.Sanitize()+"; GRANT USAGE ON SEQUENCE "+pgx.Identifier{schema, "offsets_audit_id_seq"}.Sanitize()+" TO "+pgx.Identifier{roleA}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	confine(t, e, "A", roleA, schema)
	confine(t, e, "B", roleB, schema)
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	owner := testbed.Pool(t, e)
	seed := `INSERT INTO %[1]s.offsets (pipeline, topic, partition, next_offset, owner) VALUES ('A', 't', 0, 10, 'a-1'), ('B', 't', 0, 20, 'b-1');
		INSERT INTO %[1]s.dead_letters (pipeline, topic, partition, "offset", value, error) VALUES ('A', 't', 0, 3, 'a', 'e'), ('B', 't', 0, 4, 'b', 'e');
		INSERT INTO %[1]s.instances (pipeline, instance) VALUES ('A', 'a-1'), ('B', 'b-1')`
	if _, err := owner.Exec(ctx, fmt.Sprintf(seed, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var s string
		err := owner.QueryRow(ctx, `SELECT concat_ws(' | ',
			(SELECT string_agg(concat_ws(',', pipeline, next_offset, epoch, owner, stopped_reason), ';' ORDER BY pipeline) FROM `+tbl("offsets")+` WHERE pipeline = 'B'),
			(SELECT string_agg(concat_ws(',', "offset", encode(value, 'escape'), error, failures), ';') FROM `+tbl("dead_letters")+` WHERE pipeline = 'B'),
			(SELECT string_agg(concat_ws(',', instance, stopped, heartbeat_at), ';') FROM `+tbl("instances")+` WHERE pipeline = 'B'),
			(SELECT count(*) FROM `+tbl("offsets_audit")+` WHERE pipeline = 'B'))`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()

	a := rolePool(t, e, roleA)
	for _, c := range []struct{ what, sql string }{
		{"move B's position back", `UPDATE ` + tbl("offsets") + ` SET next_offset = 0 WHERE pipeline = 'B'`},
		{"fence B (bump its epoch)", `UPDATE ` + tbl("offsets") + ` SET epoch = epoch + 1, owner = 'a-1' WHERE pipeline = 'B'`},
		{"record a stop on B", `UPDATE ` + tbl("offsets") + ` SET stopped_reason = 'handler' WHERE pipeline = 'B'`},
		{"rewrite B's dead letter", `UPDATE ` + tbl("dead_letters") + ` SET value = 'forged', error = 'x' WHERE pipeline = 'B'`},
		{"mark B's instance stopped", `UPDATE ` + tbl("instances") + ` SET stopped = true, heartbeat_at = now() WHERE pipeline = 'B'`},
	} {
		tag, err := a.Exec(ctx, c.sql)
		if err != nil || tag.RowsAffected() != 0 {
			t.Errorf("%s as A's role: %d rows, %v; want 0 rows", c.what, tag.RowsAffected(), err)
		}
	}
	for _, c := range []struct{ what, sql string }{
		{"create a position of B", `INSERT INTO ` + tbl("offsets") + ` (pipeline, topic, partition, next_offset) VALUES ('B', 't', 1, 0)`},
		{"take over B's row", `UPDATE ` + tbl("offsets") + ` SET pipeline = 'B', partition = 9 WHERE pipeline = 'A'`},
		{"dead-letter into B", `INSERT INTO ` + tbl("dead_letters") + ` (pipeline, topic, partition, "offset", error) VALUES ('B', 't', 0, 5, 'x')`},
		{"heartbeat as B", `INSERT INTO ` + tbl("instances") + ` (pipeline, instance) VALUES ('B', 'b-2')`},
		{"write B's audit", `INSERT INTO ` + tbl("offsets_audit") + ` (operator, reason, pipeline, topic, partition, to_offset) VALUES ('x', 'y', 'B', 't', 0, 0)`},
	} {
		if _, err := a.Exec(ctx, c.sql); !isInsufficientPrivilege(err) {
			t.Errorf("%s as A's role: %v; want a row-level security violation (SQLSTATE 42501)", c.what, err)
		}
	}
	for _, name := range []string{"offsets", "dead_letters", "instances", "offsets_audit"} {
		var n int
		if err := a.QueryRow(ctx, "SELECT count(*) FROM "+tbl(name)+" WHERE pipeline = 'B'").Scan(&n); err != nil || n != 0 {
			t.Errorf("A's role sees %d rows of B in %s (%v); want none", n, name, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("B's rows changed under A's role:\nbefore %s\nafter  %s", before, after)
	}
	// Each role works on its own rows as before.
	for role, p := range map[string]string{roleA: "A", roleB: "B"} {
		tag, err := rolePool(t, e, role).Exec(ctx, `UPDATE `+tbl("offsets")+` SET next_offset = next_offset + 1 WHERE pipeline = $1`, p)
		if err != nil || tag.RowsAffected() != 1 {
			t.Errorf("%s's role advancing its own row: %d rows, %v", p, tag.RowsAffected(), err)
		}
	}
	var n int
	if err := rolePool(t, e, ops).QueryRow(ctx, "SELECT count(*) FROM "+tbl("offsets")).Scan(&n); err != nil || n != 2 {
		t.Errorf("a role mapped to no pipeline sees %d offsets rows (%v); want both", n, err)
	}
}

// auditRow is one row of offsets_audit as the tests read it.
type auditRow struct {
	operator, reason, change, dbUser, addr string
	from, to, fromEpoch, toEpoch           *int64
}

func (r auditRow) String() string {
	v := func(p *int64) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{%s %q by %q as %s@%s: offset %s->%s epoch %s->%s}", r.change, r.reason, r.operator, r.dbUser, r.addr,
		v(r.from), v(r.to), v(r.fromEpoch), v(r.toEpoch))
}

func auditRows(t *testing.T, db *pgxpool.Pool, schema, pipeline string) []auditRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT operator, reason, coalesce(change, ''), coalesce(db_user, ''), coalesce(host(client_addr), ''),
		from_offset, to_offset, from_epoch, to_epoch FROM `+pgx.Identifier{schema, "offsets_audit"}.Sanitize()+` WHERE pipeline = $1 ORDER BY id`, pipeline)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditRow, error) {
		var a auditRow
		err := r.Scan(&a.operator, &a.reason, &a.change, &a.dbUser, &a.addr, &a.from, &a.to, &a.fromEpoch, &a.toEpoch)
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func eq(p *int64, v int64) bool { return p != nil && *p == v }

// TestAuditRecordsEpochChangesAndBackwardMoves: the offsets table's trigger records a claim
// (the row's creation and its epoch bump) under the run role, an operator's direct UPDATE that
// moves a position back or changes the epoch under the operator's real role and address, and
// a run role's direct backward move; a forward advance under the same epoch (every commit,
// and also a forward skip by the run role) is not recorded.
func TestAuditRecordsEpochChangesAndBackwardMoves(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	schema, target := isolatedSchema(t, e)
	run, ops := dbRole(t, e, "run"), dbRole(t, e, "ops")
	grantRun(t, e, run, schema, target)
	grantRun(t, e, ops, schema, target)
	confine(t, e, "P", run, schema)
	owner := testbed.Pool(t, e)
	runPool, opsPool := rolePool(t, e, run), rolePool(t, e, ops)

	st := offsets.NewStore(runPool, schema, "P", "sink-1", time.Second)
	c, err := st.Claim(ctx, "t", 0, "", func() (int64, error) { return 5, nil })
	if err != nil {
		t.Fatalf("claim as the confined run role: %v", err)
	}
	if err := pgx.BeginFunc(ctx, runPool, func(tx pgx.Tx) error {
		return st.Advance(ctx, tx, offsets.Range{Topic: "t", Epoch: c.Epoch, Start: 5, End: 50})
	}); err != nil {
		t.Fatalf("advance as the confined run role: %v", err)
	}
	got := auditRows(t, owner, schema, "P")
	if len(got) != 2 || got[0].change != "insert" || !eq(got[0].to, 5) || got[0].dbUser != run ||
		got[1].change != "update" || got[1].reason != "claim" || !eq(got[1].fromEpoch, 0) || !eq(got[1].toEpoch, 1) || got[1].dbUser != run {
		t.Fatalf("audit after a claim and an advance: %v; want the row's creation and the claim, by %s, and nothing for the advance", got, run)
	}

	tbl := pgx.Identifier{schema, "offsets"}.Sanitize()
	var addr string
	if err := opsPool.QueryRow(ctx, "SELECT coalesce(host(inet_client_addr()), '')").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		db   *pgxpool.Pool
		sql  string
		want *auditRow // nil: no audit row
	}{
		{opsPool, `UPDATE ` + tbl + ` SET next_offset = 20 WHERE pipeline = 'P'`,
			&auditRow{change: "update", reason: "moved back", dbUser: ops, addr: addr, from: new(int64(50)), to: new(int64(20)), fromEpoch: new(int64(1)), toEpoch: new(int64(1))}},
		{opsPool, `UPDATE ` + tbl + ` SET epoch = epoch + 5 WHERE pipeline = 'P'`,
			&auditRow{change: "update", reason: "changed", dbUser: ops, addr: addr, from: new(int64(20)), to: new(int64(20)), fromEpoch: new(int64(1)), toEpoch: new(int64(6))}},
		{runPool, `UPDATE ` + tbl + ` SET next_offset = 0 WHERE pipeline = 'P'`,
			&auditRow{change: "update", reason: "moved back", dbUser: run, addr: addr, from: new(int64(20)), to: new(int64(0)), fromEpoch: new(int64(6)), toEpoch: new(int64(6))}},
		// A forward skip under the same epoch looks like a commit: not recorded (docs/security.md).
		{runPool, `UPDATE ` + tbl + ` SET next_offset = 1000 WHERE pipeline = 'P'`, nil},
		{owner, `DELETE FROM ` + tbl + ` WHERE pipeline = 'P'`,
			&auditRow{change: "delete", reason: "deleted", dbUser: "postgres", from: new(int64(1000)), fromEpoch: new(int64(6))}},
	}
	for _, s := range steps {
		n := len(auditRows(t, owner, schema, "P"))
		if _, err := s.db.Exec(ctx, s.sql); err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
		rows := auditRows(t, owner, schema, "P")
		switch {
		case s.want == nil && len(rows) != n:
			t.Errorf("%s: audit rows %v; want none", s.sql, rows[n:])
		case s.want != nil && len(rows) != n+1:
			t.Errorf("%s: audit rows %v; want one: %v", s.sql, rows[n:], *s.want)
		case s.want != nil:
			g, w := rows[n], *s.want
			if w.addr == "" {
				w.addr = g.addr // the owner's session: whatever its address
			}
			if g.String() != w.String() {
				t.Errorf("%s: audit row %v; want %v", s.sql, g, w)
			}
		}
	}
	// A row moved to another key: its old key loses the position, the new key gets it.
	if _, err := opsPool.Exec(ctx, `INSERT INTO `+tbl+` (pipeline, topic, partition, next_offset) VALUES ('P', 't', 3, 30)`); err != nil {
		t.Fatal(err)
	}
	if _, err := opsPool.Exec(ctx, `UPDATE `+tbl+` SET partition = 4 WHERE pipeline = 'P' AND partition = 3`); err != nil {
		t.Fatal(err)
	}
	var renamed []string
	if err := owner.QueryRow(ctx, `SELECT array_agg(concat_ws(',', change, partition, from_offset, to_offset, reason, db_user) ORDER BY id) FROM `+
		pgx.Identifier{schema, "offsets_audit"}.Sanitize()+` WHERE pipeline = 'P' AND partition IN (3, 4)`).Scan(&renamed); err != nil {
		t.Fatal(err)
	}
	want := []string{"insert,3,30,created," + ops, "delete,3,30,renamed to P/t/4," + ops, "insert,4,30,renamed from P/t/3," + ops}
	if strings.Join(renamed, " ") != strings.Join(want, " ") {
		t.Errorf("audit of a row created, then moved to another key: %q; want %q", renamed, want)
	}
}

// TestAuditRowCannotClaimAnotherRole: an operator holding INSERT on offsets_audit cannot write
// a row that names another database role, address or time, nor one that passes as the
// trigger's: the server sets db_user, client_addr and at, and marks the row manual.
func TestAuditRowCannotClaimAnotherRole(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	schema, target := isolatedSchema(t, e)
	ops := dbRole(t, e, "ops")
	grantRun(t, e, ops, schema, target)
	audit := pgx.Identifier{schema, "offsets_audit"}.Sanitize()
	if _, err := testbed.Pool(t, e).Exec(ctx, "GRANT SELECT, INSERT ON "+audit+" TO "+pgx.Identifier{ops}.Sanitize()+
		"; GRANT USAGE ON SEQUENCE "+pgx.Identifier{schema, "offsets_audit_id_seq"}.Sanitize()+" TO "+pgx.Identifier{ops}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	db := rolePool(t, e, ops)
	var user, addr, change, realAddr string
	var at time.Time
	err := db.QueryRow(ctx, `INSERT INTO `+audit+` (operator, reason, change, pipeline, topic, partition, from_offset, to_offset, db_user, client_addr, at)
		VALUES ('alice', 'forged', 'update', 'P', 't', 0, 10, 0, 'postgres', '10.9.8.7', '2001-01-01')
		RETURNING db_user, coalesce(host(client_addr), ''), change, at, coalesce(host(inet_client_addr()), '')`).Scan(&user, &addr, &change, &at, &realAddr)
	if err != nil {
		t.Fatal(err)
	}
	if user != ops || addr != realAddr || change != "manual" || time.Since(at) > time.Hour {
		t.Fatalf("inserted audit row: db_user %q, client_addr %q, change %q, at %s; want %q, %q, manual, now", user, addr, change, at, ops, realAddr)
	}
}

// TestRoleSeparatedPipelineEndToEnd runs a sink as a run role confined to its pipeline (which
// shares eosink's schema with another pipeline's rows): it claims, commits, dead-letters a
// poison record, follows an operator's move of its position while it runs, and stops
// cleanly; the operator, a role mapped to no pipeline, then replays the dead letter. Nothing
// needs a privilege the roles lack, the other pipeline's row is untouched, and the audit names
// each role.
func TestRoleSeparatedPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	e := p.Env
	ctx := context.Background()
	owner := testbed.Pool(t, e)
	hp := newHeaderPlugin(t, p)
	run, ops := dbRole(t, e, "run"), dbRole(t, e, "ops")
	grantRun(t, e, run, p.OffsetsSchema, p.Schema)
	grantRun(t, e, ops, p.OffsetsSchema, p.Schema)
	grantOperator(t, e, ops, p.OffsetsSchema)
	confine(t, e, p.Group, run, p.OffsetsSchema)
	confine(t, e, "other", dbRole(t, e, "other"), p.OffsetsSchema)
	if _, err := owner.Exec(ctx, `INSERT INTO `+p.offsetsTable()+` (pipeline, topic, partition, next_offset) VALUES ('other', $1, 0, 3)`, p.Topic); err != nil {
		t.Fatal(err)
	}

	var msgs []testbed.Msg
	for i := range 40 {
		v := "good"
		if i == 7 {
			v = "poison"
		}
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 2), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	testbed.Produce(t, e, p.Topic, msgs)
	logs := &syncBuffer{}
	cfg := pluginConfig(t, p, hp, sink.DeadLetter)
	cfg.DatabaseURL = roleURL(t, e, run)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r := startSink(t, cfg)
	caughtUp := func(what string) {
		testbed.Eventually(t, 90*time.Second, what, func() (bool, string) {
			n0, _ := p.storedOrZero(t, 0)
			n1, _ := p.storedOrZero(t, 1)
			return n0 == 20 && n1 == 20, fmt.Sprintf("%d+%d/40 %v", n0, n1, r.s.PartitionErrors())
		})
	}
	caughtUp("every record applied or dead-lettered as the confined run role")

	c := p.admin(rolePool(t, e, ops))
	zero := int32(0)
	if _, err := c.Reset(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: &zero}, admin.Offset(0), "ops-alice", "replay partition 0", 5); err != nil {
		t.Fatalf("move partition 0 back as the operator role: %v", err)
	}
	testbed.Eventually(t, 60*time.Second, "the sink to claim partition 0 again after the move", func() (bool, string) {
		_, epoch := p.storedOrZero(t, 0)
		var owner string
		_ = owner0(t, p, &owner)
		return !strings.HasPrefix(owner, rebalance.ResetOwnerPrefix) && epoch >= 3, fmt.Sprintf("owner %q epoch %d", owner, epoch)
	})
	caughtUp("partition 0 applied again after the move")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if errs := r.s.PartitionErrors(); len(errs) != 0 {
		t.Fatalf("partition errors: %v", errs)
	}
	var stopped bool
	if err := owner.QueryRow(ctx, "SELECT bool_and(stopped) FROM "+pgx.Identifier{p.OffsetsSchema, "instances"}.Sanitize()+" WHERE pipeline = $1", p.Group).Scan(&stopped); err != nil || !stopped {
		t.Fatalf("instances after the clean stop: stopped %v (%v)", stopped, err)
	}

	hp.fixed.Store(true)
	res, err := c.Replay(ctx, admin.DeadLetterFilter{Pipeline: p.Group}, hp, nil)
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay as the operator role: %+v, %v", res, err)
	}
	var other int64
	if err := owner.QueryRow(ctx, `SELECT next_offset FROM `+p.offsetsTable()+` WHERE pipeline = 'other'`).Scan(&other); err != nil || other != 3 {
		t.Fatalf("the other pipeline's row: %d (%v), want 3", other, err)
	}
	var moves, claims int
	for _, a := range auditRows(t, owner, p.OffsetsSchema, p.Group) {
		switch {
		case a.operator == "ops-alice" && a.reason == "replay partition 0" && a.dbUser == ops && eq(a.to, 0):
			moves++
		case a.reason == "claim" && a.dbUser == run:
			claims++
		case a.change == "insert" && a.dbUser == run:
		default:
			t.Errorf("unexpected audit row %v", a)
		}
	}
	if moves != 1 || claims < 3 {
		t.Errorf("audit: %d moves by %s, %d claims by %s; want 1 and at least 3", moves, ops, claims, run)
	}
	for _, bad := range []string{"permission denied", "row-level security", "42501"} {
		if strings.Contains(logs.String(), bad) {
			t.Fatalf("the sink's log shows %q:\n%s", bad, logs.String())
		}
	}
}

// owner0 reads partition 0's owner.
func owner0(t *testing.T, p *pipeline, owner *string) error {
	return connect(t, p).QueryRow(context.Background(), `SELECT coalesce(owner, '') FROM `+p.offsetsTable()+
		` WHERE pipeline = $1 AND topic = $2 AND partition = 0`, p.Group, p.Topic).Scan(owner)
}

// TestRolePluginTablesIsolated: docs/sql/pipeline_role.sql gives the plugins' tables keyed by
// pipeline (the cdc plugin's cdc_source_marks, the inbox keyed by subscriber) the policy of
// eosink's own, when their migrations made them: A's role cannot change or add B's rows there.
func TestRolePluginTablesIsolated(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	schema, target := isolatedSchema(t, e)
	for _, set := range []struct{ dir, table string }{{"cdc", "eosink_cdc_schema_migrations"}, {"inbox", "eosink_inbox_schema_migrations"}} {
		m, err := migrator.Open(ctx, e.DatabaseURL, migrator.Set{FS: os.DirFS(filepath.Join("..", "sink", set.dir, "migrations")), Schema: schema, Table: set.table})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Up()
		_ = m.Close()
		if err != nil {
			t.Fatalf("%s migrations: %v", set.dir, err)
		}
	}
	roleA, roleB := dbRole(t, e, "ra"), dbRole(t, e, "rb")
	for _, r := range []string{roleA, roleB} {
		grantRun(t, e, r, schema, target)
	}
	confine(t, e, "A", roleA, schema)
	confine(t, e, "B", roleB, schema)
	confine(t, e, "B", roleB, schema) // again: the script can be rerun
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := testbed.Pool(t, e).Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.cdc_source_marks VALUES ('A', 't', 0, 1, 1, 1), ('B', 't', 0, 2, 2, 2);
		INSERT INTO %[1]s.inbox (subscriber, event_id, payload_hash, topic, partition, "offset") VALUES ('A', 'e1', '\x00', 't', 0, 1), ('B', 'e1', '\x00', 't', 0, 1)`, s)); err != nil {
		t.Fatal(err)
	}
	a := rolePool(t, e, roleA)
	for _, q := range []string{
		`UPDATE ` + s + `.cdc_source_marks SET commit_lsn = 0, lsn = 0 WHERE pipeline = 'B'`,
		`UPDATE ` + s + `.inbox SET duplicates = 99 WHERE subscriber = 'B'`,
		`DELETE FROM ` + s + `.inbox WHERE subscriber = 'B'`,
	} {
		if tag, err := a.Exec(ctx, q); err != nil || tag.RowsAffected() != 0 {
			t.Errorf("%s as A's role: %d rows, %v; want 0 rows", q, tag.RowsAffected(), err)
		}
	}
	for _, q := range []string{
		`INSERT INTO ` + s + `.cdc_source_marks VALUES ('B', 't', 1, 0, 0, 0)`,
		`INSERT INTO ` + s + `.inbox (subscriber, event_id, payload_hash, topic, partition, "offset") VALUES ('B', 'e2', '\x00', 't', 0, 2)`,
	} {
		if _, err := a.Exec(ctx, q); !isInsufficientPrivilege(err) {
			t.Errorf("%s as A's role: %v; want a row-level security violation (SQLSTATE 42501)", q, err)
		}
	}
	if tag, err := a.Exec(ctx, `UPDATE `+s+`.cdc_source_marks SET ts_ms = 5 WHERE pipeline = 'A'`); err != nil || tag.RowsAffected() != 1 {
		t.Errorf("A's role on its own source mark: %d rows, %v", tag.RowsAffected(), err)
	}
	var marks, dups int64
	if err := testbed.Pool(t, e).QueryRow(ctx, `SELECT (SELECT commit_lsn FROM `+s+`.cdc_source_marks WHERE pipeline = 'B' AND partition = 0),
		(SELECT count(*) FROM `+s+`.inbox WHERE subscriber = 'B' AND duplicates = 0)`).Scan(&marks, &dups); err != nil || marks != 2 || dups != 1 {
		t.Errorf("B's rows after A's attempts: source mark %d, inbox rows %d (%v); want 2 and 1", marks, dups, err)
	}
}
