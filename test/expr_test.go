package test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/cli"
	"github.com/eosink/eosink/internal/testbed"
)

// exprFile writes a pipeline file reading topic into schema.payments with CEL expressions
// (a normalised amount, an event id of two fields, a where and a check), and returns its path.
func exprFile(t *testing.T, e testbed.Env, topic, schema string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := fmt.Sprintf(`kafka:
  brokers: %s
  group: %s
  topics: [%s]
database: {url: "%s", schema: %s, auto_migrate: true}
on_poison: dead-letter
sink:
  type: table
  table: %s.payments
  where: '!(has(value.test) && value.test)'
  check:
    - expr: 'value.status in ["paid", "refunded"]'
      message: status is not paid or refunded
  columns:
    id: {from: value.id, required: true}
    amount: {expr: 'value.amount.replace(",", ".")', required: true}
    status: value.status
    event: {expr: 'value.id + ":" + value.status.upperAscii()'}
`, e.Brokers, testbed.Name(t, "g"), topic, e.DatabaseURL, schema, schema)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExpressionsNormaliseFilterAndCheck: `eosink run -config` with CEL expressions writes
// "12,30" into a numeric column as 12.30 (and a 20-digit amount exactly), skips the record
// the where drops (no row, and the offset moves past it), and dead-letters the record whose
// status the check refuses, with the check's message.
func TestExpressionsNormaliseFilterAndCheck(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	topic := testbed.Topic(t, e, 1)
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.payments (id text PRIMARY KEY,
  amount numeric NOT NULL, status text, event text)`, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	values := []string{
		0: `{"id":"p1","amount":"12,30","status":"paid"}`,
		1: `{"id":"p2","amount":"12345678901234567,89","status":"refunded"}`,
		2: `{"id":"p3","amount":"1,00","status":"bogus"}`,            // the check: dead-lettered
		3: `{"id":"p4","amount":"5,00","status":"paid","test":true}`, // the where: skipped
		4: `{"id":"p5","amount":"0,5","status":"paid"}`,
		5: `{"id":"p6","amount":"9,99","status":"paid","test":true}`, // skipped, and the last record
	}
	msgs := make([]testbed.Msg, len(values))
	for i, v := range values {
		msgs[i] = testbed.Msg{Value: []byte(v)}
	}
	testbed.Produce(t, e, topic, msgs)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	var logs syncBuffer
	go func() {
		done <- cli.Run(runCtx, []string{"run", "-config", exprFile(t, e, topic, schema)}, io.Discard, &logs)
	}()
	s := pgx.Identifier{schema}.Sanitize()
	testbed.Eventually(t, 90*time.Second, "every offset committed", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
		default:
		}
		var next int64
		_ = db.QueryRow(ctx, fmt.Sprintf("SELECT coalesce(max(next_offset), 0) FROM %s.offsets WHERE topic = $1", s), topic).Scan(&next)
		return next == int64(len(values)), fmt.Sprintf("next offset %d", next)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("eosink run exited %d: %s", code, lastLines(logs.String(), 5))
	}
	got := strs(t, db, fmt.Sprintf("SELECT format('%%s=%%s %%s %%s', id, amount, status, event) FROM %s.payments ORDER BY id", s))
	want := []string{"p1=12.30 paid p1:PAID", "p2=12345678901234567.89 refunded p2:REFUNDED", "p5=0.5 paid p5:PAID"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var ok bool
	if err := db.QueryRow(ctx, fmt.Sprintf("SELECT amount = 12.30 AND scale(amount) = 2 FROM %s.payments WHERE id = 'p1'", s)).Scan(&ok); err != nil || !ok {
		t.Errorf("p1's amount is not the numeric 12.30 (%v)", err)
	}
	dead := strs(t, db, fmt.Sprintf(`SELECT "offset"::text || ' ' || error FROM %s.dead_letters WHERE topic = '%s' ORDER BY "offset"`, s, topic))
	if len(dead) != 1 || !strings.HasPrefix(dead[0], "2 ") || !strings.Contains(dead[0], "check failed: status is not paid or refunded") {
		t.Errorf("dead letters %q, want offset 2 with the check's message", dead)
	}
}

// TestExpressionErrorsNameThePathAndLine: `eosink run -validate` reports an expression that
// does not compile, or a where that is not a condition, at its path and line.
func TestExpressionErrorsNameThePathAndLine(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	file := exprFile(t, e, "orders", "s")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.NewReplacer(
		`where: '!(has(value.test) && value.test)'`, `where: 'value.status.size()'`,
		`amount: {expr: 'value.amount.replace(",", ".")', required: true}`, `amount: {expr: 'value.amount.replace(",")', required: true}`,
		`- expr: 'value.status in ["paid", "refunded"]'`, `- expr: 'value.status in ["paid", "refunded"'`,
	).Replace(string(text))
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	code := cli.Run(context.Background(), []string{"run", "-validate", "-config", file}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	want := []string{
		`: sink.where: the expression gives int, not bool (line 10)`,
		`: sink.check[0].expr: 1:`,
		`: sink.columns.amount.expr: 1:21: found no matching overload for 'replace'`,
	}
	if code != 1 || len(lines) != len(want) {
		t.Fatalf("exit %d:\n%s\nwant lines containing:\n%s", code, errOut.String(), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], file+w) {
			t.Errorf("line %d:\n%s\nwant it to contain\n%s", i, lines[i], file+w)
		}
	}
	if !strings.HasSuffix(lines[1], "(line 12)") || !strings.HasSuffix(lines[2], "(line 16)") {
		t.Errorf("lines %q: want the check at line 12 and the column at line 16", lines)
	}
}
