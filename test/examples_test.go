package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// run runs bin to completion and returns its combined output; it fails the test on a
// non-zero exit unless allowFail.
func run(t *testing.T, env []string, allowFail bool, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil && !allowFail {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out), err
}

// TestOrdersExample runs examples/orders as a user would, with `eosink run -config
// examples/orders/pipeline.yaml`: events republished at new offsets are applied once by the
// inbox, republished ones with another payload are dead-lettered, and SIGTERM drains.
func TestOrdersExample(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 3)
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL,
		"ORDERS_TOPIC=" + topic, "ORDERS_GROUP=" + testbed.Name(t, "g"), "ORDERS_PIPELINE=" + testbed.Name(t, "p"),
		"ORDERS_SCHEMA=" + testbed.Schema(t, e), "ORDERS_OFFSETS_SCHEMA=" + testbed.Schema(t, e)}
	config := "../examples/orders/pipeline.yaml"
	run(t, env, false, ordersBin, "setup")
	run(t, env, false, ordersBin, "produce", "-events", "3000", "-republish", "0.2", "-conflicts", "7", "-seed", "5")
	run(t, env, false, eosinkBin, "migrate", "up", "-config", config)
	sink := testbed.StartProcess(t, eosinkBin, "eosink run orders", []string{"run", "-config", config}, env...)
	var out string
	testbed.Eventually(t, 120*time.Second, "orders verify to pass", func() (bool, string) {
		var err error
		out, err = run(t, env, true, ordersBin, "verify")
		return err == nil, out
	})
	sink.StopClean(60 * time.Second)
	for _, want := range []string{"events: 3000", "duplicates: 0", "lost: 0", "conflicts (other payload): 7", "dead letters: 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "republished (same payload): 0\n") {
		t.Errorf("no event was republished; the test proves nothing:\n%s", out)
	}

	// The operator's view: status counts the dead letters, dlq lists and shows them.
	schema := strings.TrimPrefix(env[len(env)-1], "ORDERS_OFFSETS_SCHEMA=")
	pipeline := strings.TrimPrefix(env[4], "ORDERS_PIPELINE=")
	status, _ := run(t, env, false, eosinkBin, "status", "-schema", schema, "-json")
	var st []struct {
		Pipeline string `json:"pipeline"`
		Dead     int64  `json:"dead_letters"`
		Lag      int64  `json:"lag"`
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil || len(st) != 1 || st[0].Pipeline != pipeline || st[0].Dead != 7 || st[0].Lag != 0 {
		t.Errorf("eosink status -json: %v\n%s", err, status)
	}
	list, _ := run(t, env, false, eosinkBin, "dlq", "list", "-schema", schema, "-pipeline", pipeline, "-json")
	var dls []struct {
		ID    int64  `json:"id"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(list), &dls); err != nil || len(dls) != 7 || !strings.Contains(dls[0].Error, "different payload") {
		t.Fatalf("eosink dlq list -json: %v\n%s", err, list)
	}
	show, _ := run(t, env, false, eosinkBin, "dlq", "show", "-schema", schema, "-id", fmt.Sprint(dls[0].ID))
	if !strings.Contains(show, `"event_id"`) || !strings.Contains(show, topic) {
		t.Errorf("eosink dlq show does not show the record:\n%s", show)
	}
	// Replaying a conflict fails again (the inbox still refuses it); discarding removes them.
	// Records that failed again make the replay exit 1.
	rep, err := run(t, env, true, eosinkBin, "dlq", "replay", "-config", config)
	var ee *exec.ExitError
	if !strings.Contains(rep, "replayed 0, failed again 7") || !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("replay of conflicts: %v, want exit 1: %s", err, rep)
	}
	if out, err := run(t, env, true, eosinkBin, "dlq", "discard", "-schema", schema, "-pipeline", pipeline, "-all"); err == nil || !strings.Contains(out, "add -yes") {
		t.Errorf("discard without -yes: %v %s", err, out)
	}
	dis, _ := run(t, env, false, eosinkBin, "dlq", "discard", "-schema", schema, "-pipeline", pipeline, "-all", "-yes")
	if !strings.Contains(dis, "discarded 7") {
		t.Errorf("discard: %s", dis)
	}
}

// TestCustomSinkExample runs the ledger plugin from examples/custom-sink in its own eosink
// binary from a config file, kills it with SIGKILL mid-stream and restarts it: the ledger's
// non-idempotent balances still equal the log's sums, and the two malformed entries are
// dead-lettered.
func TestCustomSinkExample(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	topic := testbed.Topic(t, e, 4)
	schema := testbed.Schema(t, e)
	pipeline := testbed.Name(t, "p")
	env := []string{"KAFKA_BOOTSTRAP_SERVERS=" + e.Brokers, "DATABASE_URL=" + e.DatabaseURL,
		"LEDGER_TOPIC=" + topic, "LEDGER_GROUP=" + testbed.Name(t, "g"), "LEDGER_PIPELINE=" + pipeline, "LEDGER_SCHEMA=" + schema}
	config := "../examples/custom-sink/pipeline.yaml"
	want := map[string]int64{}
	var msgs []testbed.Msg
	for i := range 20000 {
		acct := fmt.Sprintf("acct-%d", i%50)
		delta := int64(i%13) - 6
		v := fmt.Sprintf(`{"account": %q, "delta": %d}`, acct, delta)
		if i == 777 || i == 15555 {
			v = `{"account": "broken"}`
		} else {
			want[acct] += delta
		}
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 4), Key: []byte(acct), Value: []byte(v)})
	}
	testbed.Produce(t, e, topic, msgs)
	run(t, env, false, ledgerBin, "migrate", "up", "-config", config)

	db := testbed.Pool(t, e)
	ctx := context.Background()
	applied := func() int64 {
		var n int64
		_ = db.QueryRow(ctx, "SELECT coalesce(sum(entries), 0) FROM "+pgx.Identifier{schema, "ledger_balances"}.Sanitize()).Scan(&n)
		return n
	}
	// The first run kills itself (SIGKILL) in its fifth batch, before that batch's COMMIT: a
	// kill from outside could come after it applied everything, and the restart would then
	// be stopped before it had set up its signal handling.
	first := testbed.StartProcess(t, ledgerBin, "eosink-ledger run", []string{"run", "-config", config},
		append(env, "EOSINK_FAILPOINTS=in-handler=kill@5")...)
	if err := first.Wait(60 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("first run: %v, want killed by SIGKILL", err)
	}
	killedAt := applied()
	second := testbed.StartProcess(t, ledgerBin, "eosink-ledger run again", []string{"run", "-config", config}, env...)
	testbed.Eventually(t, 120*time.Second, "all entries applied", func() (bool, string) {
		n := applied()
		return n == 19998, fmt.Sprint(n)
	})
	second.StopClean(60 * time.Second)
	if killedAt >= 19998 {
		t.Fatalf("the SIGKILL came after everything was applied (%d); the test proves nothing", killedAt)
	}
	rows, err := db.Query(ctx, "SELECT account, balance FROM "+pgx.Identifier{schema, "ledger_balances"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var a string
	var b int64
	if _, err := pgx.ForEachRow(rows, []any{&a, &b}, func() error { got[a] = b; return nil }); err != nil {
		t.Fatal(err)
	}
	for acct, w := range want {
		if got[acct] != w {
			t.Errorf("%s: balance %d, want %d", acct, got[acct], w)
		}
	}
	var dead int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "dead_letters"}.Sanitize()+" WHERE pipeline = $1", pipeline).Scan(&dead); err != nil || dead != 2 {
		t.Errorf("dead letters: %d (%v), want the 2 malformed entries", dead, err)
	}
}
