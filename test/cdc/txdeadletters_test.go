package cdc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCTransactionResolvesDeadLetters: a set's commit (consistency: transaction) resolves
// the open dead letters at the offsets it applies, as applied, by the instance, in the
// transaction of the replica's write (the same xmin), like a batch of partition mode: the
// dead letter left at accounts_a@0 (as a run in partition mode would have, before the
// fix and a replay) is resolved when transaction 600 applies it; the one at accounts_b@5,
// beyond what is applied, stays open. Records written by hand in Debezium's JsonConverter
// format (no connector).
func TestCDCTransactionResolvesDeadLetters(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	const ddl = `CREATE TABLE %s (id bigint PRIMARY KEY, balance bigint NOT NULL)`
	execAll(t, db, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize(),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_a"}.Sanitize()),
		fmt.Sprintf(ddl, pgx.Identifier{replica, "accounts_b"}.Sanitize()))
	prefix := testbed.Name(t, "dl")
	txTopic := testbed.NamedTopic(t, e, prefix+".transaction", 1)
	topicA := testbed.NamedTopic(t, e, prefix+".public.accounts_a", 1)
	topicB := testbed.NamedTopic(t, e, prefix+".public.accounts_b", 1)
	pipeline := testbed.Name(t, "p")
	const instance = "cdc-dl-instance"
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`pipeline: %s
instance_id: %s
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
`, pipeline, instance, e.Brokers, pipeline, topicA, topicB, e.DatabaseURL, offsets, replica, txTopic)), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	dead := pgx.Identifier{offsets, "dead_letters"}.Sanitize()
	var applied, beyond int64
	if err := db.QueryRow(ctx, `INSERT INTO `+dead+` (pipeline, topic, partition, "offset", value, error) VALUES ($1, $2, 0, 0, 'x', 'before the fix') RETURNING id`,
		pipeline, topicA).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `INSERT INTO `+dead+` (pipeline, topic, partition, "offset", value, error) VALUES ($1, $2, 0, 5, 'y', 'not reached') RETURNING id`,
		pipeline, topicB).Scan(&beyond); err != nil {
		t.Fatal(err)
	}

	run := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	run.WaitOutput("set: owned", 60*time.Second)
	testbed.Produce(t, e, topicA, []testbed.Msg{gapChange("accounts_a", 600, 900, 1000, 1, 1, 1, 100)})
	testbed.Produce(t, e, topicB, []testbed.Msg{gapChange("accounts_b", 600, 900, 1010, 2, 1, 1, 200)})
	testbed.Produce(t, e, txTopic, []testbed.Msg{gapMarker(600, 1000, nil),
		gapMarker(600, 1100, []gapCount{{"accounts_a", 1}, {"accounts_b", 1}})})
	state := func(id int64) string {
		var s string
		if err := db.QueryRow(ctx, `SELECT coalesce(resolved_how, 'open') || ' by ' || coalesce(resolved_by, '') FROM `+dead+` WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	testbed.Eventually(t, 60*time.Second, "transaction 600 applied and its dead letter resolved", func() (bool, string) {
		if run.Exited() {
			t.Fatalf("eosink run exited:\n%s", run.Output())
		}
		var n int
		_ = db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{replica, "accounts_a"}.Sanitize()).Scan(&n)
		s := state(applied)
		return n == 1 && s == "applied by "+instance, fmt.Sprintf("%d rows in accounts_a, dead letter %s", n, s)
	})
	var same bool
	if err := db.QueryRow(ctx, `SELECT (SELECT xmin::text FROM `+dead+` WHERE id = $1) = (SELECT xmin::text FROM `+
		pgx.Identifier{replica, "accounts_a"}.Sanitize()+` WHERE id = 1)`, applied).Scan(&same); err != nil || !same {
		t.Errorf("the dead letter resolved in the transaction of the replica's write: %v (%v), want true", same, err)
	}
	if s := state(beyond); s != "open by " {
		t.Errorf("the dead letter beyond the applied offsets: %s, want open", s)
	}
	run.StopClean(60 * time.Second)
}
