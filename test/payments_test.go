package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// payment is one payment event of TestPaymentsExample.
type payment struct {
	id, order, amount, currency, status string
	at                                  time.Time
}

func (p payment) json() string {
	return fmt.Sprintf(`{"payment_id": %q, "order_id": %q, "amount": %q, "currency": %q, "status": %q, "at": %q}`,
		p.id, p.order, p.amount, p.currency, p.status, p.at.Format(time.RFC3339))
}

// TestPaymentsExample runs examples/payments as its README does, through `eosink run
// -config examples/payments/pipeline.yaml`: payment events arrive with status changes, some
// late (an older at after a newer one), some twice, some malformed. The first runs carry a
// mapping bug (order_id from value.payment_id, through PAYMENTS_ORDER_ID_FROM) and are killed
// with SIGKILL mid-stream and restarted. Then the bug is fixed and the topic replayed with
// `offsets set`: every payment's row is repaired, the history holds each status change once
// (no row added by duplicates or the replay), and the latest status never regressed.
func TestPaymentsExample(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 4)
	schema, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	pipeline := testbed.Name(t, "p")
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL,
		"PAYMENTS_TOPIC=" + topic, "PAYMENTS_GROUP=" + testbed.Name(t, "g"), "PAYMENTS_PIPELINE=" + pipeline,
		"PAYMENTS_SCHEMA=" + schema, "PAYMENTS_OFFSETS_SCHEMA=" + offsets}
	buggy := append(env[:len(env):len(env)], "PAYMENTS_ORDER_ID_FROM=value.payment_id")
	config := "../examples/payments/pipeline.yaml"
	db := testbed.Pool(t, e)
	ctx := context.Background()
	ddl, err := os.ReadFile("../examples/payments/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	text := strings.ReplaceAll(string(ddl), "SCHEMA IF NOT EXISTS payments;", "SCHEMA IF NOT EXISTS "+q+";")
	if _, err := db.Exec(ctx, strings.ReplaceAll(text, "payments.", q+".")); err != nil {
		t.Fatal(err)
	}

	// 1,500 payments, each pending, then authorized, then captured, failed or refunded after
	// captured. 1 in 10 has its last two events swapped (the later one arrives first), 1 in
	// 15 events is published again later, and 9 malformed events are mixed in.
	rng := rand.New(rand.NewPCG(11, 3))
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var events []payment
	latest := map[string]payment{}
	history := map[string]bool{}
	for i := range 1500 {
		p := payment{id: fmt.Sprintf("pay-%d", i), order: fmt.Sprintf("ord-%d", i%700),
			amount: fmt.Sprintf("%d.%02d", rng.IntN(10000), rng.IntN(100)), currency: []string{"EUR", "USD", "CHF"}[i%3]}
		at := start.Add(time.Duration(i) * time.Second)
		var mine []payment
		for _, st := range append([]string{"pending", "authorized"}, [][]string{{"captured"}, {"failed"}, {"captured", "refunded"}}[rng.IntN(3)]...) {
			at = at.Add(time.Duration(1+rng.IntN(90)) * time.Second)
			p.status, p.at = st, at
			mine = append(mine, p)
			history[p.id+"/"+st] = true
		}
		latest[p.id] = mine[len(mine)-1]
		if i%10 == 3 {
			n := len(mine)
			mine[n-1], mine[n-2] = mine[n-2], mine[n-1]
		}
		events = append(events, mine...)
	}
	rng.Shuffle(len(events), func(i, j int) {
		// Across payments only: a payment's events keep their (possibly swapped) order, as
		// they share a key and so a partition.
		if events[i].id != events[j].id {
			events[i], events[j] = events[j], events[i]
		}
	})
	var msgs []testbed.Msg
	for i, p := range events {
		msgs = append(msgs, testbed.Msg{Partition: -1, Key: []byte(p.id), Value: []byte(p.json())})
		if i%15 == 7 {
			d := events[i/2]
			msgs = append(msgs, testbed.Msg{Partition: -1, Key: []byte(d.id), Value: []byte(d.json())})
		}
	}
	// A decimal comma is not malformed: the pipeline's expression reads "7,50" as 7.50.
	comma := payment{id: "comma-1", order: "ord-comma", amount: "7.50", currency: "USD", status: "pending", at: start}
	latest[comma.id], history[comma.id+"/pending"] = comma, true
	msgs = append(msgs, testbed.Msg{Partition: -1, Key: []byte(comma.id), Value: []byte(strings.Replace(comma.json(), `"7.50"`, `"7,50"`, 1))})
	malformed := []string{
		`{"payment_id": "bad-2", "order_id": "o", "amount": "5.00", "currency": "USD", "status": "pending", "at": "yesterday"}`,
		`{"payment_id": "bad-3", "order_id": "o", "amount": "1.00", "currency": "USD", "status": "lost", "at": "2026-12-01T10:00:00Z"}`,
		`{"order_id": "o", "amount": "1.00", "currency": "USD", "status": "pending", "at": "2026-12-01T10:00:00Z"}`,
		`{"payment_id": "bad-5", "order_id": "o", "amount": "1.00", "currency": "USD", "status": "pending", "at": "2026-12-01T10:00:00Z"`,
		`{"payment_id": "bad-6", "order_id": "o", "amount": "1.00", "currency": "DOLLARS", "status": "pending", "at": "2026-12-01T10:00:00Z"}`,
		`{"payment_id": "bad-7", "order_id": "o", "amount": "123456789012.00", "currency": "USD", "status": "pending", "at": "2026-12-01T10:00:00Z"}`,
		`{"payment_id": "bad-8", "order_id": "o", "amount": null, "currency": "USD", "status": "pending", "at": "2026-12-01T10:00:00Z"}`,
		`not json at all`,
	}
	for i, m := range malformed {
		at := len(msgs) * (i + 1) / (len(malformed) + 1)
		msgs = append(msgs[:at], append([]testbed.Msg{{Partition: -1, Key: []byte(fmt.Sprintf("bad-%d", i+1)), Value: []byte(m)}}, msgs[at:]...)...)
	}
	testbed.Produce(t, e, topic, msgs)
	run(t, env, false, eosinkBin, "migrate", "up", "-config", config)

	hist := pgx.Identifier{schema, "history"}.Sanitize()
	pays := pgx.Identifier{schema, "payments"}.Sanitize()
	dead := pgx.Identifier{offsets, "dead_letters"}.Sanitize()
	count := func(table string) int {
		var n int
		_ = db.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		return n
	}
	applied := func() (bool, string) {
		var lag int64
		_ = db.QueryRow(ctx, `SELECT coalesce(sum(next_offset), 0) FROM `+pgx.Identifier{offsets, "offsets"}.Sanitize()+` WHERE pipeline = $1`, pipeline).Scan(&lag)
		return lag == int64(len(msgs)), fmt.Sprintf("%d of %d records applied (%d history rows)", lag, len(msgs), count(hist))
	}

	// The buggy runs: killed mid-stream, restarted, to the end. The first run kills itself
	// (SIGKILL) the 5th time a batch's writes are in its open transaction: a kill from
	// outside, after polling the tables, could come after everything was applied.
	first := testbed.StartProcess(t, eosinkBin, "eosink run payments (bug)", []string{"run", "-config", config},
		append(buggy[:len(buggy):len(buggy)], "EOSINK_FAILPOINTS=in-handler=kill@5")...)
	if err := first.Wait(90 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("first run: %v, want killed by SIGKILL", err)
	}
	if !first.Contains("failpoint fired: in-handler kill") {
		t.Fatalf("the first run died without the failpoint firing")
	}
	if n := count(hist); n == 0 || n >= len(history) {
		t.Fatalf("the SIGKILL left %d of %d history rows; want some, not all: the test proves nothing", n, len(history))
	}
	second := testbed.StartProcess(t, eosinkBin, "eosink run payments (bug, again)", []string{"run", "-config", config}, buggy...)
	testbed.Eventually(t, 120*time.Second, "every event applied", applied)
	second.StopClean(60 * time.Second)
	var wrong int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pays+" WHERE order_id = payment_id").Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != len(latest) {
		t.Fatalf("%d of %d payments carry the bug's order_id; the replay would prove nothing", wrong, len(latest))
	}

	// The fix, and a replay of the whole topic: offsets set says nothing is skipped.
	out, _ := run(t, env, false, eosinkBin, "offsets", "set", "-config", config, "-to", "earliest",
		"-reason", "replay after bug 123", "-operator", "payments-test")
	if !strings.Contains(out, fmt.Sprintf("replay: %d records go through the pipeline again (sink multi)", len(msgs))) || strings.Contains(out, "repairs none") {
		t.Errorf("offsets set:\n%s\nwant the replay announced with nothing skipped", out)
	}
	fixed := testbed.StartProcess(t, eosinkBin, "eosink run payments (fixed)", []string{"run", "-config", config}, env...)
	testbed.Eventually(t, 120*time.Second, "every event applied again", applied)
	fixed.StopClean(60 * time.Second)

	// Every payment's row is its latest event, with the right order_id.
	got := map[string]payment{}
	rows, err := db.Query(ctx, "SELECT payment_id, order_id, amount::text, currency, status, at FROM "+pays)
	if err != nil {
		t.Fatal(err)
	}
	var p payment
	if _, err := pgx.ForEachRow(rows, []any{&p.id, &p.order, &p.amount, &p.currency, &p.status, &p.at}, func() error {
		p.at = p.at.UTC()
		got[p.id] = p
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for id, want := range latest {
		if g := got[id]; g != want {
			if bad++; bad <= 5 {
				t.Errorf("payment %s: row %+v, want %+v", id, g, want)
			}
		}
	}
	if len(got) != len(latest) || bad > 0 {
		t.Errorf("%d payment rows, %d of them wrong; want %d rows", len(got), bad, len(latest))
	}

	// The history holds each status change once, each with the right order_id.
	var rowsN, distinct, wrongOrder int
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (payment_id, status)), count(*) FILTER (WHERE order_id = payment_id) FROM `+hist).Scan(&rowsN, &distinct, &wrongOrder); err != nil {
		t.Fatal(err)
	}
	if rowsN != len(history) || distinct != len(history) || wrongOrder != 0 {
		t.Errorf("history: %d rows, %d distinct status changes, %d with the bug's order_id; want %d, %d and 0", rowsN, distinct, wrongOrder, len(history), len(history))
	}

	// The malformed events are dead letters, one row each although the replay met them again.
	var deadN, failures int
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(min(failures), 0) FROM `+dead+` WHERE pipeline = $1`, pipeline).Scan(&deadN, &failures); err != nil {
		t.Fatal(err)
	}
	if deadN != len(malformed) || failures < 2 {
		t.Errorf("dead letters: %d rows, each failed at least %d times; want %d rows, each twice", deadN, failures, len(malformed))
	}
	// The unknown status is refused by the pipeline's check, with its message.
	var lost string
	if err := db.QueryRow(ctx, `SELECT error FROM `+dead+` WHERE pipeline = $1 AND convert_from(value, 'UTF8') LIKE '%"lost"%'`, pipeline).Scan(&lost); err != nil || !strings.Contains(lost, "check failed: unknown payment status") {
		t.Errorf("the dead letter of the unknown status: %q (%v), want the check's message", lost, err)
	}

	// Fixing a dead letter (the README's section): the event whose at is "yesterday" is
	// edited to a valid time and replayed; the edit and the replay are audited, the original
	// value is kept. The others are discarded, and dlq list shows none open.
	var yesterday int64
	var original string
	if err := db.QueryRow(ctx, `SELECT id, convert_from(value, 'UTF8') FROM `+dead+` WHERE pipeline = $1 AND convert_from(value, 'UTF8') LIKE '%"yesterday"%'`,
		pipeline).Scan(&yesterday, &original); err != nil {
		t.Fatalf("the dead letter of at \"yesterday\": %v", err)
	}
	fixedAt := "2026-12-01T09:00:00Z"
	file := t.TempDir() + "/fixed.json"
	if err := os.WriteFile(file, []byte(strings.Replace(original, `"yesterday"`, `"`+fixedAt+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(yesterday)
	if out, _ := run(t, env, false, eosinkBin, "dlq", "edit", "-config", config, "-id", id, "-value-file", file,
		"-operator", "payments-test", "-reason", "the producer wrote yesterday for the day before"); !strings.Contains(out, "edited dead letter "+id) {
		t.Errorf("dlq edit: %s", out)
	}
	if out, _ := run(t, env, false, eosinkBin, "dlq", "show", "-config", config, "-id", id); !strings.Contains(out, `"at": "yesterday"`) || !strings.Contains(out, `"at": "`+fixedAt+`"`) {
		t.Errorf("dlq show after the edit: want the original and the edited value:\n%s", out)
	}
	if out, _ := run(t, env, false, eosinkBin, "dlq", "replay", "-config", config, "-id", id, "-operator", "payments-test", "-reason", "at fixed"); !strings.Contains(out, "replayed 1, failed again 0") {
		t.Errorf("dlq replay of the edited dead letter: %s", out)
	}
	var status string
	var at time.Time
	if err := db.QueryRow(ctx, "SELECT status, at FROM "+pays+" WHERE payment_id = 'bad-2'").Scan(&status, &at); err != nil || status != "pending" || !at.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("bad-2 after the replay of its edit: %s at %s (%v), want pending at %s", status, at, err, fixedAt)
	}
	var histN int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+hist+" WHERE payment_id = 'bad-2'").Scan(&histN); err != nil || histN != 1 {
		t.Errorf("bad-2's history rows after the replay: %d (%v), want 1", histN, err)
	}
	rows, err = db.Query(ctx, `SELECT action || ' by ' || operator FROM `+pgx.Identifier{offsets, "dead_letters_audit"}.Sanitize()+` WHERE dead_letter_id = $1 ORDER BY id`, yesterday)
	if err != nil {
		t.Fatal(err)
	}
	if audit, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || strings.Join(audit, ", ") != "edit by payments-test, replay by payments-test" {
		t.Errorf("audit of the fixed dead letter: %v (%v), want the edit and the replay by payments-test", audit, err)
	}
	var how, kept string
	if err := db.QueryRow(ctx, `SELECT resolved_how, convert_from(value, 'UTF8') FROM `+dead+` WHERE id = $1`, yesterday).Scan(&how, &kept); err != nil || how != "replayed" || kept != original {
		t.Errorf("the fixed dead letter: resolved %q, value %q (%v); want replayed, the original value kept", how, kept, err)
	}
	if out, _ := run(t, env, false, eosinkBin, "dlq", "discard", "-config", config, "-all", "-yes", "-operator", "payments-test", "-reason", "malformed upstream"); !strings.Contains(out, fmt.Sprintf("discarded %d dead letters", len(malformed)-1)) {
		t.Errorf("dlq discard -all: %s, want the %d others discarded", out, len(malformed)-1)
	}
	if out, _ := run(t, env, false, eosinkBin, "dlq", "list", "-config", config, "-json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("dlq list -json after the fix and the discard: %s, want []", out)
	}
	if out, _ := run(t, env, false, eosinkBin, "dlq", "list", "-config", config, "-all"); strings.Count(out, "discarded") != len(malformed)-1 || strings.Count(out, "replayed, edited") != 1 {
		t.Errorf("dlq list -all: want %d discarded and one replayed, edited:\n%s", len(malformed)-1, out)
	}
}
