package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/outbox/relay"
)

// clusterBed is a bed whose outbox is in a PostgreSQL cluster of the test's own (a
// testbed.PGCluster), so that the test can restore it or fail it over; Kafka is the bed's.
func clusterBed(t *testing.T, url string) *bed {
	t.Helper()
	env := testbed.Require(t)
	b := &bed{t: t, env: testbed.Env{Brokers: env.Brokers, DatabaseURL: url}, schema: "ob", topic: testbed.Topic(t, env, 3)}
	b.name = testbed.Name(t, "relay")
	b.posTopic = testbed.Topic(t, env, 1)
	if err := outbox.Migrate(context.Background(), url, b.schema); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.ob, err = outbox.New(outbox.Config{Schema: b.schema, Shards: 1}); err != nil {
		t.Fatal(err)
	}
	b.connect(url)
	return b
}

// connect points the bed's writers at url (a new pool: the old one's connections died with
// the server).
func (b *bed) connect(url string) {
	b.t.Helper()
	b.pool = testbed.Pool(b.t, testbed.Env{DatabaseURL: url})
}

// burnXids runs n transactions that take a transaction id each.
func (b *bed) burnXids(n int) {
	b.t.Helper()
	for range n {
		if _, err := b.pool.Exec(context.Background(), `SELECT pg_current_xact_id()`); err != nil {
			b.t.Fatal(err)
		}
	}
}

// rows counts the outbox rows whose event id starts with prefix.
func (b *bed) rows(prefix string) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{b.schema, "outbox"}.Sanitize()+
		` WHERE event_id LIKE $1`, prefix+"-%").Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n
}

// logged runs a relay whose log goes to the test and to the returned buffer.
func (b *bed) logged() (relay.Config, *syncBuffer) {
	c := b.config(1)
	logs := &syncBuffer{}
	c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{b.t}), nil))
	return c, logs
}

// expectRewoundStop waits for the relay's Run to end with ErrDatabaseRewound, named in an
// ERROR line with reason database_rewound and the remedy.
func (b *bed) expectRewoundStop(done <-chan error, logs *syncBuffer) {
	t := b.t
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		counts, _ := b.published()
		t.Fatalf("the relay did not stop within 60s of the database going back; %d of the 20 rows written since are in the outbox, "+
			"%d of them in Kafka (%d distinct events in Kafka)", b.rows("c"), countPrefix(counts, "c"), len(counts))
	}
	var se *relay.ShardError
	if !errors.Is(err, relay.ErrDatabaseRewound) || !errors.As(err, &se) || se.Shard != 0 {
		t.Fatalf("the relay stopped with %v, want a *ShardError for shard 0 wrapping ErrDatabaseRewound", err)
	}
	t.Logf("the relay stopped: %v", err)
	for _, want := range []string{"level=ERROR", "reason=database_rewound", "-resync"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the relay's log does not say %q", want)
		}
	}
}

// resyncFile writes a relay config file for the remedy, with the database at url.
func (b *bed) resyncFile(url string) string {
	b.t.Helper()
	path := filepath.Join(b.t.TempDir(), "relay.yaml")
	text := fmt.Sprintf("database: {url: %q, schema: %s}\nkafka: {brokers: %q}\nrelay: {name: %s, position_topic: %s, transaction_timeout: 10s}\n",
		url, b.schema, b.env.Brokers, b.name, b.posTopic)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// resync runs the documented remedy, `eosink relay -config FILE -resync`, against url, and
// checks its report: rewound, the phantom events listed.
func (b *bed) resync(url string, phantoms, notPhantoms []string, inKafka int) {
	b.t.Helper()
	path := b.resyncFile(url)
	p := testbed.StartProcess(b.t, eosinkBin, "relay -resync", []string{"relay", "-config", path, "-resync"})
	if err := p.Wait(120 * time.Second); err != nil {
		b.t.Fatalf("eosink relay -resync: %v\n%s", err, p.Output())
	}
	b.t.Logf("eosink relay -resync:\n%s", p.Output())
	if !p.Contains("shard 0: rewound; from ") {
		b.t.Errorf("eosink relay -resync does not report shard 0 as rewound")
	}
	for _, id := range phantoms {
		if !p.Contains("shard 0: phantom event " + id + "\n") {
			b.t.Errorf("eosink relay -resync does not list the phantom event %s", id)
		}
	}
	for _, id := range notPhantoms {
		if p.Contains("shard 0: phantom event " + id + "\n") {
			b.t.Errorf("eosink relay -resync lists %s as a phantom, but the database holds it", id)
		}
	}
	if want := fmt.Sprintf(" %d of them already in Kafka,", inKafka); !p.Contains(want) {
		b.t.Errorf("eosink relay -resync does not say%s", want)
	}
	if p.Contains("phantom event c-") || p.Contains("phantom event d-") {
		b.t.Errorf("eosink relay -resync lists an event the database holds as a phantom")
	}
}

func countPrefix(counts map[string]int, prefix string) int {
	n := 0
	for id := range counts {
		if strings.HasPrefix(id, prefix+"-") {
			n++
		}
	}
	return n
}

// resyncAgain runs the remedy a second time: the database holds the new position's
// generation, and nothing is done.
func (b *bed) resyncAgain(url string) {
	b.t.Helper()
	path := b.resyncFile(url)
	p := testbed.StartProcess(b.t, eosinkBin, "relay -resync (again)", []string{"relay", "-config", path, "-resync"})
	if err := p.Wait(120 * time.Second); err != nil || !p.Contains("shard 0: the database holds the generation of the Kafka position") {
		b.t.Fatalf("eosink relay -resync a second time: %v, want nothing to do\n%s", err, p.Output())
	}
}

func ids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// afterRemedy starts the relay again, writes more events and checks that every event is in
// Kafka exactly once: those published before (a), the phantoms (b), those written after the
// database went back (c) and after the remedy (d).
func (b *bed) afterRemedy() {
	b.t.Helper()
	stop, _ := b.start(b.config(1))
	b.commit("d", 0, 20)
	counts := b.waitPublished(80, 60*time.Second)
	for _, p := range []string{"a", "b", "c", "d"} {
		expectIDs(b.t, counts, p, 0, 20)
	}
	if err := stop(); err != nil {
		b.t.Fatal(err)
	}
}

// TestRelayDatabaseRestoredFromBackup: a base backup (pg_basebackup) of a cluster of the
// test's own is taken while the relay runs; events are published after it; the backup is
// restored into the same data directory and port, with the relay still running; more
// events are written, whose transaction ids are those of the published events the restore
// lost. The relay stops the shard with ErrDatabaseRewound (an ERROR line with reason
// database_rewound) instead of skipping them, nothing is deleted, and after the documented
// remedy (`eosink relay -resync`, which lists the lost events as phantoms) every event is
// in Kafka once, including those written again with the same event ids after the restore
// (found in Kafka, not published twice).
func TestRelayDatabaseRestoredFromBackup(t *testing.T) {
	root := testbed.ClusterRoot(t, "relay-restore-")
	pg := testbed.NewPrimary(t, root, "pg")
	b := clusterBed(t, pg.URL("postgres"))
	c, logs := b.logged()
	_, done := b.start(c)
	b.commit("a", 0, 20)
	b.waitPublished(20, 60*time.Second)

	backup := filepath.Join(root, "backup")
	pg.Run("pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(pg.Port), "-U", "postgres", "-D", backup, "-X", "stream", "-c", "fast")
	b.burnXids(30) // the events after the backup take transaction ids the restored database hands out again
	b.commit("b", 0, 20)
	b.waitPublished(40, 60*time.Second)

	pg.Stop("immediate")
	if err := os.RemoveAll(pg.Dir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, pg.Dir).CombinedOutput(); err != nil { // keeps the owner and modes
		t.Fatalf("restore the backup: %v\n%s", err, out)
	}
	pg.Start()
	b.connect(pg.URL("postgres"))
	b.commit("c", 0, 20)
	b.commit("b", 0, 10) // the same work done again (a sink replaying from its restored offsets): the same event ids

	b.expectRewoundStop(done, logs)
	if n := b.rows("c"); n != 20 {
		t.Errorf("%d of the 20 rows written after the restore are in the outbox, want all: nothing may be deleted", n)
	}
	if n := b.rows("b"); n != 10 {
		t.Errorf("%d of the 10 rows redone after the restore are in the outbox, want all: nothing may be deleted", n)
	}
	if counts, _ := b.published(); len(counts) != 40 {
		t.Errorf("%d distinct events in Kafka after the stop, want 40 (a and b)", len(counts))
	}
	// b-0..9 are in the database again and already in Kafka: not published again, not
	// phantoms; b-10..19 are phantoms.
	b.resync(pg.URL("postgres"), ids("b", 20)[10:], ids("b", 10), 10)
	b.resyncAgain(pg.URL("postgres"))
	b.afterRemedy()
}

// TestRelayFailoverToLaggingStandby: an asynchronous streaming standby of a cluster of the
// test's own replays the first events, then its replay is paused and it is stopped, so that
// it lags; the primary publishes more, dies, and the standby is promoted. The relay reaches
// whichever is primary through a multi-host URL (target_session_attrs=read-write). Events
// written to the new primary reuse the lost ones' transaction ids. The relay stops the
// shard with ErrDatabaseRewound, nothing is deleted, and after the remedy every event is in
// Kafka once.
func TestRelayFailoverToLaggingStandby(t *testing.T) {
	root := testbed.ClusterRoot(t, "relay-failover-")
	primary := testbed.NewPrimary(t, root, "primary")
	b := clusterBed(t, primary.URL("postgres"))
	standby := primary.Standby("standby")
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port, standby.Port)
	c, logs := b.logged()
	c.DatabaseURL = url
	_, done := b.start(c)
	b.commit("a", 0, 20)
	b.waitPublished(20, 60*time.Second)
	src, err := pgx.Connect(context.Background(), primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	testbed.WaitReplayed(t, src, standby)
	src.Close(context.Background())

	// The standby lags from here on: replay paused, then stopped (no more WAL).
	sby, err := pgx.Connect(context.Background(), standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sby.Exec(context.Background(), `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	sby.Close(context.Background())
	standby.Stop("fast")
	b.burnXids(30)
	b.commit("b", 0, 20)
	b.waitPublished(40, 60*time.Second)

	primary.Stop("immediate")
	standby.Start()
	standby.Promote()
	b.connect(standby.URL("postgres"))
	b.commit("c", 0, 20)

	b.expectRewoundStop(done, logs)
	if n := b.rows("c"); n != 20 {
		t.Errorf("%d of the 20 rows written after the failover are in the outbox, want all: nothing may be deleted", n)
	}
	if counts, _ := b.published(); len(counts) != 40 {
		t.Errorf("%d distinct events in Kafka after the stop, want 40 (a and b)", len(counts))
	}
	b.env.DatabaseURL = url
	b.resync(url, ids("b", 20), nil, 0)
	b.afterRemedy()
}
