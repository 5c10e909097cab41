package offsets_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
)

// TestTerminateWithoutPrivilegeIsReported: a claim blocked by a stalled
// session that its role may not end (here a superuser's session, which only a superuser may
// end) reports the refusal (SQLSTATE 42501) instead of dropping it; the sink logs it with
// the remedy.
func TestTerminateWithoutPrivilegeIsReported(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	su := testbed.Pool(t, e)
	role := strings.ReplaceAll(testbed.Name(t, "r"), "-", "_")
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN PASSWORD 'x'",
		"GRANT USAGE ON SCHEMA " + pgx.Identifier{schema}.Sanitize() + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON " + pgx.Identifier{schema, "offsets"}.Sanitize() + " TO " + role,
	} {
		if _, err := su.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = su.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = su.Exec(context.Background(), "DROP ROLE "+role)
	})
	const app = "eosink:privilege-test"
	holdOffsetRow(t, e, schema, app, "SELECT 1 FROM "+pgx.Identifier{schema, "offsets"}.Sanitize()+" FOR UPDATE")

	pc, err := pgxpool.ParseConfig(e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.User, pc.ConnConfig.Password = role, "x"
	pc.ConnConfig.RuntimeParams["application_name"] = app
	low, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer low.Close()
	claimer := offsets.NewStore(low, schema, "pipe", "claimer", time.Second)
	claimer.TerminateStalled = app
	reported := make(chan error, 4)
	claimer.OnTerminateError = func(_ string, _ int32, err error) { reported <- err }
	if _, err := claimer.Claim(ctx, "orders", 0, "", func() (int64, error) { return 0, nil }); err == nil {
		t.Fatal("claim went through a held row lock")
	}
	select {
	case err := <-reported:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("reported %v, want SQLSTATE 42501", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused termination was not reported")
	}
}

// TestStalledSessionEndedWhenThePoolIsBusy: the watch that ends a stalled session while a
// claim waits needs a second pooled connection, and a pool busy with the other partitions'
// claims and commits may have none (chaos scenario 15 failed that way once: the heir never
// ended the zombie's session). With a pool of one connection the watch cannot run at all; the
// claim whose lock wait timed out must then end the holder on its own connection, so that the
// next try takes the partition.
func TestStalledSessionEndedWhenThePoolIsBusy(t *testing.T) {
	t.Parallel()
	e, schema := migrated(t)
	ctx := context.Background()
	const app = "eosink:busy-pool-test"
	// As a stalled owner's batch does: the offsets row is updated first, then it stops.
	tx := holdOffsetRow(t, e, schema, app, "UPDATE "+pgx.Identifier{schema, "offsets"}.Sanitize()+" SET next_offset = next_offset")

	pc, err := pgxpool.ParseConfig(e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1
	pc.ConnConfig.RuntimeParams["application_name"] = app
	one, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	heir := offsets.NewStore(one, schema, "pipe", "heir", time.Second)
	heir.TerminateStalled = app
	heir.OnTerminateError = func(_ string, _ int32, err error) { t.Errorf("ending the stalled session: %v", err) }
	var claim offsets.Claim
	for try := 1; ; try++ {
		claim, err = heir.Claim(ctx, "orders", 0, "", func() (int64, error) { return 0, nil })
		if err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("claim still blocked after %d tries (%d sessions ended): %v", try, heir.Terminated.Load(), err)
		}
	}
	if heir.Terminated.Load() != 1 {
		t.Fatalf("ended %d sessions, want 1", heir.Terminated.Load())
	}
	if claim.Epoch != 2 {
		t.Fatalf("claimed at epoch %d, want 2", claim.Epoch)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the stalled session still runs")
	}
}

// holdOffsetRow claims orders[0] of pipeline "pipe" in schema, then, from a session named
// app, runs lock (a statement that locks the offsets row) in a transaction left open until
// the test ends, as a stalled owner would. It returns that transaction.
func holdOffsetRow(t *testing.T, e testbed.Env, schema, app, lock string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	owner := offsets.NewStore(testbed.Pool(t, e), schema, "pipe", "owner", time.Second)
	if _, err := owner.Claim(ctx, "orders", 0, "", func() (int64, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	hc, err := pgx.ParseConfig(e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	hc.RuntimeParams["application_name"] = app
	holder, err := pgx.ConnectConfig(ctx, hc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, lock); err != nil {
		t.Fatal(err)
	}
	return tx
}
