package cdc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// gapAccountFields are the Connect field definitions of the accounts tables' rows.
const gapAccountFields = `{"type":"int64","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"balance"}`

// gapChange is a streamed insert into public.<table> as Debezium's JsonConverter writes it
// with schemas on, with its transaction block: the change of source transaction xid at lsn,
// the total_order-th of its transaction and the collOrder-th of its table, after the
// commit at LSN prev (source.sequence[0]).
func gapChange(table string, xid, prev, lsn int64, order, collOrder int, id, balance int64) testbed.Msg {
	value := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.%[1]s.Envelope","version":2,"fields":[
{"type":"struct","optional":true,"name":"dbz.public.%[1]s.Value","field":"before","fields":[%[2]s]},
{"type":"struct","optional":true,"name":"dbz.public.%[1]s.Value","field":"after","fields":[%[2]s]},
{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[
 {"type":"string","optional":false,"field":"db"},{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},
 {"type":"string","optional":true,"field":"sequence"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},
 {"type":"int64","optional":false,"field":"ts_ms"}]},
{"type":"struct","optional":true,"name":"event.block","version":1,"field":"transaction","fields":[
 {"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}]},
{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}]},
"payload":{"before":null,"after":{"id":%[3]d,"balance":%[4]d},
"source":{"db":"src","schema":"public","table":%[1]q,"sequence":"[\"%[5]d\",\"%[6]d\"]","txId":%[7]d,"lsn":%[6]d,"ts_ms":1700000000000},
"transaction":{"id":"%[7]d:%[6]d","total_order":%[8]d,"data_collection_order":%[9]d},"op":"c","ts_ms":1700000000100}}`,
		table, gapAccountFields, id, balance, prev, lsn, xid, order, collOrder)
	key := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbz.public.%s.Key","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{"id":%d}}`,
		table, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// gapCount is an END's event count of public.<table>.
type gapCount struct {
	table string
	n     int
}

// gapMarker is a BEGIN (counts nil) or an END of source transaction xid at lsn on the
// transaction topic, as the JsonConverter writes it with schemas on; counts are the END's
// data_collections.
func gapMarker(xid, lsn int64, counts []gapCount) testbed.Msg {
	id := fmt.Sprintf("%d:%d", xid, lsn)
	status, total, colls := "BEGIN", "null", "null"
	if counts != nil {
		status = "END"
		n := 0
		var cs []string
		for _, c := range counts {
			cs = append(cs, fmt.Sprintf(`{"data_collection":"public.%s","event_count":%d}`, c.table, c.n))
			n += c.n
		}
		total, colls = fmt.Sprint(n), "["+strings.Join(cs, ",")+"]"
	}
	value := fmt.Sprintf(`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},`+
		`{"type":"int64","optional":true,"field":"event_count"},{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},`+
		`{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},`+
		`{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1},`+
		`"payload":{"status":%q,"id":%q,"event_count":%s,"data_collections":%s,"ts_ms":1700000000000}}`, status, id, total, colls)
	key := fmt.Sprintf(`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,`+
		`"name":"io.debezium.connector.common.TransactionMetadataKey","version":1},"payload":{"id":%q}}`, id)
	return testbed.Msg{Key: []byte(key), Value: []byte(value)}
}

// TestCDCTransactionIncomplete: consistency: transaction with incomplete_after: 3s, records
// written by hand in Debezium's JsonConverter format (no connector). (a) source transaction
// 600 (one change on each of two tables) applies; (b) 601's END counts two changes but only
// its accounts_a change is in the log; (c) 602, complete, follows it. `eosink run` must exit
// non-zero within 60 s with sink.ErrSetIncomplete naming 601, its commit LSN and the missing
// accounts_b change; the replica holds (a) alone, the watermark is still (a)'s commit LSN,
// and no stored offset passed (b)'s records. A second start without the change stops the
// same way. Then the missing change is written and `eosink run` starts again: it applies
// (b) and (c) and catches up.
func TestCDCTransactionIncomplete(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	const ddl = `CREATE TABLE %s (id bigint PRIMARY KEY, balance bigint NOT NULL)`
	execAll(t, db, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize(),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_a"}.Sanitize()),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_b"}.Sanitize()))
	prefix := testbed.Name(t, "gap")
	txTopic := testbed.NamedTopic(t, e, prefix+".transaction", 1)
	topicA := testbed.NamedTopic(t, e, prefix+".public.accounts_a", 1)
	topicB := testbed.NamedTopic(t, e, prefix+".public.accounts_b", 1)

	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s, %s]
database:
  url: %s
  schema: %s
sink:
  type: cdc
  table: "%s.$${source.table}"
  consistency: transaction
  transaction_topic: %s
  lease_timeout: 3s
  incomplete_after: 3s
`, pipeline, e.Brokers, pipeline, topicA, topicB, e.DatabaseURL, offsets, replica, txTopic)), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)

	o := pgx.Identifier{offsets}.Sanitize()
	rows := func(table string) string {
		t.Helper()
		rs, err := db.Query(ctx, "SELECT id || '=' || balance FROM "+pgx.Identifier{replica, table}.Sanitize()+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	watermark := func() string {
		t.Helper()
		var w string
		err := db.QueryRow(ctx, `SELECT commit_lsn || ' xid ' || xid || ' after ' || transactions || ' transactions' FROM `+o+
			`.cdc_tx_watermarks WHERE pipeline = $1 AND transaction_topic = $2`, pipeline, txTopic).Scan(&w)
		if errors.Is(err, pgx.ErrNoRows) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	stored := func() map[string]int64 {
		t.Helper()
		rs, err := db.Query(ctx, "SELECT topic, next_offset FROM "+o+".offsets WHERE pipeline = $1 AND partition = 0", pipeline)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		var topic string
		var next int64
		if _, err := pgx.ForEachRow(rs, []any{&topic, &next}, func() error { out[topic] = next; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	start := func(name string) *testbed.Process {
		t.Helper()
		p := testbed.StartProcess(t, eosinkBin, name, []string{"run", "-config", config})
		p.WaitOutput("set: owned", 60*time.Second)
		return p
	}

	// (a) 600: applies. Offsets: accounts_a@0, accounts_b@0, the transaction topic @0-1.
	run := start("eosink run")
	testbed.Produce(t, e, topicA, []testbed.Msg{gapChange("accounts_a", 600, 900, 1000, 1, 1, 1, 100)})
	testbed.Produce(t, e, topicB, []testbed.Msg{gapChange("accounts_b", 600, 900, 1010, 2, 1, 1, 200)})
	testbed.Produce(t, e, txTopic, []testbed.Msg{gapMarker(600, 1000, nil),
		gapMarker(600, 1100, []gapCount{{"accounts_a", 1}, {"accounts_b", 1}})})
	testbed.Eventually(t, 60*time.Second, "transaction 600 applied", func() (bool, string) {
		if run.Exited() {
			t.Fatalf("eosink run exited before (b):\n%s", run.Output())
		}
		a, b, w := rows("accounts_a"), rows("accounts_b"), watermark()
		return a == "1=100" && b == "1=200" && w == "1100 xid 600 after 1 transactions", fmt.Sprintf("a %q, b %q, watermark %s", a, b, w)
	})

	// (b) 601's END counts a change on each table; only accounts_a's is written
	// (accounts_a@1, the transaction topic @2-3). (c) 602 follows, complete, two changes
	// on accounts_a (@2-3, the transaction topic @4-5).
	testbed.Produce(t, e, topicA, []testbed.Msg{gapChange("accounts_a", 601, 1100, 1200, 1, 1, 2, 300)})
	testbed.Produce(t, e, txTopic, []testbed.Msg{gapMarker(601, 1200, nil),
		gapMarker(601, 1300, []gapCount{{"accounts_a", 1}, {"accounts_b", 1}})})
	testbed.Produce(t, e, topicA, []testbed.Msg{gapChange("accounts_a", 602, 1300, 1400, 1, 1, 3, 500),
		gapChange("accounts_a", 602, 1300, 1410, 2, 2, 4, 600)})
	testbed.Produce(t, e, txTopic, []testbed.Msg{gapMarker(602, 1400, nil), gapMarker(602, 1500, []gapCount{{"accounts_a", 2}})})
	produced := time.Now()

	// stops waits for p to exit non-zero on 601 within 60 s of since (when what happened).
	stops := func(p *testbed.Process, since time.Time, what string) {
		t.Helper()
		err, exited := p.WaitFor(60*time.Second - time.Since(since))
		if !exited {
			t.Fatalf("eosink run still runs %s after %s, waiting for an incomplete transaction:\n%s",
				time.Since(since).Round(time.Second), what, p.Output())
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
			t.Fatalf("eosink run exited with %v, want a non-zero exit status:\n%s", err, p.Output())
		}
		out := p.Output()
		for _, want := range []string{sink.ErrSetIncomplete.Error(), "source transaction 601 (commit LSN 1300)",
			"1 changes held, still missing", "public.accounts_b", "for 3s with every partition read to its end", "nothing of it was applied"} {
			if !strings.Contains(out, want) {
				t.Errorf("eosink run's output does not say %q:\n%s", want, out)
			}
		}
		t.Logf("eosink run exited with status %d %s after %s", ee.ExitCode(), time.Since(since).Round(100*time.Millisecond), what)
	}
	// held checks that nothing of (b) or (c) was applied and no position passed (b).
	held := func() {
		t.Helper()
		if a, b := rows("accounts_a"), rows("accounts_b"); a != "1=100" || b != "1=200" {
			t.Errorf("the replica holds accounts_a %q, accounts_b %q: want (a) alone, 1=100 and 1=200", a, b)
		}
		if w := watermark(); w != "1100 xid 600 after 1 transactions" {
			t.Errorf("watermark %s, want (a)'s: 1100 xid 600 after 1 transactions", w)
		}
		// 601's change is accounts_a@1 and its END the transaction topic's @3 (its BEGIN at
		// @2 is needed by nothing, so the position may pass it).
		pos := stored()
		if pos[topicA] != 1 || pos[topicB] != 1 || pos[txTopic] < 2 || pos[txTopic] > 3 {
			t.Errorf("stored next offsets %v: want %s at 1, %s at 1, %s at 2 or 3 (not past 601's records)", pos, topicA, topicB, txTopic)
		}
		t.Logf("after the stop: stored next offsets accounts_a %d, accounts_b %d, transaction topic %d; watermark %s",
			pos[topicA], pos[topicB], pos[txTopic], watermark())
	}
	stops(run, produced, "(b) and (c) were written")
	held()

	// A start without the change stops the same way.
	again := time.Now()
	stops(start("eosink run (again)"), again, "it started again (the lease taken after its timeout)")
	held()
	if t.Failed() {
		return
	}

	// The missing change is written (accounts_b@1): the next start applies 601 and 602 and
	// catches up.
	testbed.Produce(t, e, topicB, []testbed.Msg{gapChange("accounts_b", 601, 1100, 1210, 2, 1, 2, 400)})
	run = start("eosink run (complete)")
	testbed.Eventually(t, 60*time.Second, "601 and 602 applied", func() (bool, string) {
		if run.Exited() {
			t.Fatalf("eosink run exited once the log held 601 whole:\n%s", run.Output())
		}
		a, b, w := rows("accounts_a"), rows("accounts_b"), watermark()
		return a == "1=100 2=300 3=500 4=600" && b == "1=200 2=400" && w == "1500 xid 602 after 3 transactions",
			fmt.Sprintf("a %q, b %q, watermark %s", a, b, w)
	})
	caughtUp(t, e.DatabaseURL, e.Brokers, offsets, pipeline)
	if pos := stored(); pos[topicA] != 4 || pos[topicB] != 2 || pos[txTopic] != 6 {
		t.Errorf("stored next offsets %v after catching up: want %s 4, %s 2, %s 6", pos, topicA, topicB, txTopic)
	}
	run.StopClean(60 * time.Second)
}
