package cdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/cdc/app"
	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCAvroSIGKILLAndReplay: Debezium with Avro through the registry → Kafka → eosink run
// with the cdc plugin. The sink is SIGKILLed mid-stream and restarted while the source keeps
// changing; then the pipeline is reset to the earliest offset (a replay) while the source
// changes more. Rows end equal to the source, and during the replay no row's version ever
// goes down and no deleted row comes back.
// At the end old change events are republished verbatim: none moves a row back.
// The sink reads the registry through a proxy that is cut while it restarts after the
// SIGKILL (its schema cache empty) and the source changes: the batches are rolled back and
// retried (cause transient) until the proxy answers again; nothing is dead-lettered, no
// partition stops.
func TestCDCAvroSIGKILLAndReplay(t *testing.T) {
	ph := full
	ph.outage = true
	scenario(t, testbed.Avro, ph)
}

// TestCDCJSONWithSchemas: the same path with Connect's JsonConverter, schemas enabled,
// Debezium's default decimal.handling.mode=precise (base64 bytes with a scale parameter).
func TestCDCJSONWithSchemas(t *testing.T) { scenario(t, testbed.JSONWithSchemas, full) }

// TestCDCJSONPlain: a short run with the JsonConverter without schemas (schemas.enable=false):
// no type names in the events, the target columns' types are the hints. Snapshot, a stream
// of changes, and the republished old events.
func TestCDCJSONPlain(t *testing.T) { scenario(t, testbed.JSONPlain, short) }

// phases says what a scenario runs.
type phases struct {
	steps       int  // source transactions per streaming phase
	kill        bool // SIGKILL the sink mid-stream and restart it
	replay      bool // reset to the earliest offset while the source changes more
	republished int  // old change events republished per partition of accounts and lines
	outage      bool // cut the sink's registry (a proxy) over the restart after the SIGKILL
}

var (
	full  = phases{steps: 150, kill: true, replay: true, republished: 40}
	short = phases{steps: 80, republished: 40}
)

func scenario(t *testing.T, conv testbed.Converter, ph phases) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "cdcsrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if _, err := src.Exec(ctx, app.SourceDDL); err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorkload(ctx, src, uint64(len(conv)))
	if err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		t.Helper()
		for range n {
			if err := w.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps(30) // rows present before Debezium starts: its snapshot reads them (op r)
	if _, err := src.Exec(ctx, `INSERT INTO public.nopk VALUES ('before')`); err != nil {
		t.Fatal(err)
	}
	db := testbed.Pool(t, e)
	replica := testbed.Schema(t, e)
	offsets := testbed.Schema(t, e)
	if _, err := db.Exec(ctx, app.ReplicaDDL(pgx.Identifier{replica}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables:      []string{"public.accounts", "public.lines", "public.nopk"},
		TopicPrefix: testbed.Name(t, "cdc"), Converter: conv, RegistryURL: registryURL, Partitions: 3})
	t.Logf("Debezium (%s) running after %s", conv, d.StartedIn.Round(time.Millisecond))
	topics := []string{d.Topic("public.accounts"), d.Topic("public.lines"), d.Topic("public.nopk")}
	waitTopics(t, e.Brokers, topics)

	format, registry := "json", ""
	var proxy *testbed.TCPProxy
	if conv == testbed.Avro {
		// Debezium writes through the registry itself; the sink reads it through a proxy.
		var proxied string
		proxy, proxied = testbed.StartTCPProxy(t, registryURL)
		format, registry = "avro", "schema_registry:\n  url: "+proxied+"\n  timeout: 2s\n"
	}
	httpAddr := freeAddr(t)
	pipeline := testbed.Name(t, "p")
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
database:
  url: %s
  schema: %s
on_poison: dead-letter
http: %s
%ssink:
  type: cdc
  format: %s
  table: "%s.$${source.table}"
`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.Join(topics, ", "), e.DatabaseURL, offsets, httpAddr, registry, format, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	run := func(name string) *testbed.Process {
		return testbed.StartProcess(t, eosinkBin, name, []string{"run", "-config", config})
	}
	equal := func(what string, timeout time.Duration) {
		t.Helper()
		var last []app.Result
		testbed.Eventually(t, timeout, what, func() (bool, string) {
			c, diff, err := app.Compare(ctx, src, db, replica)
			if err != nil {
				return false, err.Error()
			}
			last = c
			return app.Equal(c), fmt.Sprint(c, "\n", strings.Join(diff, "\n"))
		})
		for _, r := range last {
			t.Logf("%s: %s: source rows: %d, replica rows: %d, mismatches: %d", what, r.Table, r.Source, r.Replica, r.Mismatches)
		}
	}

	// 1. Stream while the sink is SIGKILLed and restarted.
	sink := run("eosink run (first)")
	steps(ph.steps)
	if ph.kill {
		testbed.Eventually(t, 90*time.Second, "the first sink to apply some changes", func() (bool, string) {
			var n int
			o := pgx.Identifier{offsets}.Sanitize()
			_ = db.QueryRow(ctx, fmt.Sprintf("SELECT (SELECT count(*) FROM %s.cdc_positions) + (SELECT count(*) FROM %s.cdc_positions_int)", o, o)).Scan(&n)
			return n > 20, fmt.Sprint(n)
		})
		sink.Signal(syscall.SIGKILL)
		if err := sink.Wait(10 * time.Second); !testbed.KilledBySIGKILL(err) {
			t.Fatalf("first run: %v, want killed by SIGKILL", err)
		}
		if ph.outage {
			proxy.Cut()
		}
		sink = run("eosink run (after SIGKILL)")
		steps(ph.steps)
		if ph.outage {
			registryOutage(t, sink, httpAddr, proxy)
		}
		equal("after SIGKILL and restart", 3*time.Minute)
		if m := scrape(t, httpAddr); ph.outage && (m.transient == 0 || m.stopped != 0) {
			t.Errorf("after the registry outage: %d transient retries, %d partitions stopped; want some, 0", m.transient, m.stopped)
		}
	} else {
		equal("streamed", 3*time.Minute)
	}

	// 2. Replay from the earliest offset while the source changes more.
	if ph.replay {
		sink.StopClean(60 * time.Second)
		before := versions(t, ctx, db, replica)
		cli(t, "offsets", "set", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", offsets, "-pipeline", pipeline, "-to", "earliest", "-reason", "cdc test replay", "-operator", "cdc-test")
		sink = run("eosink run (replay)")
		stop := make(chan struct{})
		samples := make(chan map[string]int64, 1024)
		go func() {
			defer close(samples)
			for {
				select {
				case <-stop:
					return
				default:
				}
				samples <- versions(t, ctx, db, replica)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		steps(100)
		equal("after the replay", 3*time.Minute)
		close(stop)
		prev, n, gone := before, 0, map[string]bool{}
		for s := range samples {
			n++
			for k, v := range prev {
				got, ok := s[k]
				switch {
				case !ok:
					gone[k] = true
				case got < v:
					t.Errorf("replay moved %s back from version %d to %d", k, v, got)
				}
			}
			for k := range s {
				if gone[k] {
					t.Errorf("replay resurrected deleted row %s", k)
				}
			}
			prev = s
		}
		t.Logf("replay: %d samples of the replica, none moved back", n)
	}

	// 3. Old change events republished verbatim (the first ones of each partition: snapshot
	// reads and early inserts of rows changed, re-keyed or deleted since) change nothing. This
	// fails deterministically without the never-backwards guard: rows go back to old versions
	// and deleted rows come back.
	if ph.republished > 0 {
		for _, table := range []string{"public.accounts", "public.lines"} {
			msgs := earliest(t, e.Brokers, d.Topic(table), 3, ph.republished)
			testbed.Produce(t, e, d.Topic(table), msgs)
			t.Logf("republished %d old events of %s", len(msgs), table)
		}
		caughtUp(t, e.DatabaseURL, e.Brokers, offsets, pipeline)
		c, diff, err := app.Compare(ctx, src, db, replica)
		if err != nil {
			t.Fatal(err)
		}
		if !app.Equal(c) {
			t.Fatalf("republished old events moved the replica back: %v\n%s", c, strings.Join(diff, "\n"))
		}
		t.Logf("after republishing old events: %v (0 mismatches)", c)
	}
	sink.StopClean(60 * time.Second)

	// 3. The table without a primary key was refused, each event dead-lettered with the reason.
	var dead int
	var reason string
	if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), coalesce(max(error), '') FROM %s.dead_letters WHERE topic = $1`,
		pgx.Identifier{offsets}.Sanitize()), d.Topic("public.nopk")).Scan(&dead, &reason); err != nil {
		t.Fatal(err)
	}
	if dead == 0 || !strings.Contains(reason, "has no primary key") {
		t.Errorf("table without a primary key: %d dead letters, reason %q", dead, reason)
	}
	t.Logf("public.nopk: %d events dead-lettered: %s", dead, reason)
	var others int
	_ = db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.dead_letters WHERE topic <> $1`, pgx.Identifier{offsets}.Sanitize()), d.Topic("public.nopk")).Scan(&others)
	if others != 0 {
		t.Errorf("%d dead letters outside public.nopk", others)
	}
}

// versions returns the replica's rows as key → version.
func versions(t *testing.T, ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, replica string) map[string]int64 {
	out := map[string]int64{}
	for table, key := range app.Tables {
		rows, err := db.Query(ctx, fmt.Sprintf("SELECT %s::text, version FROM %s", strings.ReplaceAll(key, ", ", "::text || ',' || "), pgx.Identifier{replica, table}.Sanitize()))
		if err != nil {
			t.Error(err)
			return out
		}
		var k string
		var v int64
		_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[table+":"+k] = v; return nil })
		if err != nil {
			t.Error(err)
		}
	}
	return out
}
