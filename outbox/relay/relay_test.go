package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/outbox/relay"
)

var eosinkBin string

func TestMain(m *testing.M) {
	dir, cleanup := testbed.Build("github.com/eosink/eosink/cmd/eosink")
	eosinkBin = filepath.Join(dir, "eosink")
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// bed is one test's outbox: a migrated schema, an events topic, a relay name and a position
// topic of its own.
type bed struct {
	t        *testing.T
	env      testbed.Env
	schema   string
	topic    string
	name     string
	posTopic string
	pool     *pgxpool.Pool
	ob       *outbox.Outbox
}

func newBed(t *testing.T, shards int) *bed {
	t.Helper()
	env := testbed.Require(t)
	b := &bed{t: t, env: env, schema: testbed.Schema(t, env), topic: testbed.Topic(t, env, 3), pool: testbed.Pool(t, env)}
	b.name = testbed.Name(t, "relay")
	b.posTopic = testbed.Topic(t, env, 1)
	if err := outbox.Migrate(context.Background(), env.DatabaseURL, b.schema); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.ob, err = outbox.New(outbox.Config{Schema: b.schema, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bed) config(shards int) relay.Config {
	zero := time.Duration(0)
	return relay.Config{DatabaseURL: b.env.DatabaseURL, Schema: b.schema, Kafka: kafka.ConfigMap{"bootstrap.servers": b.env.Brokers},
		Name: b.name, Shards: shards, PositionTopic: b.posTopic, BatchSize: 50, PollInterval: 20 * time.Millisecond,
		Retention: &zero, CleanupInterval: 200 * time.Millisecond, StatsInterval: 200 * time.Millisecond, TransactionTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{b.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
}

type testWriter struct{ t *testing.T }

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// event returns the i-th test event of a batch named prefix.
func (b *bed) event(prefix string, i int) outbox.Event {
	id := fmt.Sprintf("%s-%d", prefix, i)
	return outbox.Event{Topic: b.topic, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(`{"n":` + fmt.Sprint(i) + `}`), EventID: id,
		Headers: []outbox.Header{{Key: "origin", Value: []byte("test")}}}
}

// commit adds events prefix-from..prefix-(to-1) in one transaction and commits it.
func (b *bed) commit(prefix string, from, to int) {
	b.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var evs []outbox.Event
		for i := from; i < to; i++ {
			evs = append(evs, b.event(prefix, i))
		}
		return b.ob.Add(ctx, tx, evs...)
	})
	if err != nil {
		b.t.Fatal(err)
	}
}

// start runs a relay in this process; stop cancels it and returns Run's error.
func (b *bed) start(c relay.Config) (stop func() error, done <-chan error) {
	b.t.Helper()
	r, err := relay.New(c)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	finished := make(chan struct{}) // closed when Run returned: stop does not take Run's error from ch
	var runErr error
	go func() {
		runErr = r.Run(ctx)
		ch <- runErr
		close(finished)
	}()
	var once sync.Once
	var res error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case <-finished:
				res = runErr
			case <-time.After(60 * time.Second):
				res = errors.New("relay did not stop within 60s")
			}
		})
		return res
	}
	b.t.Cleanup(func() { _ = stop() })
	return stop, ch
}

// published reads the events topic with read_committed up to its end and returns how many
// times each event id occurs, and the ids in the order of partition 0 ... n.
func (b *bed) published() (counts map[string]int, total int) {
	b.t.Helper()
	return readCommitted(b.t, b.env, b.topic)
}

func readCommitted(t *testing.T, env testbed.Env, topic string) (map[string]int, int) {
	t.Helper()
	counts, total := map[string]int{}, 0
	testbed.ReadCommitted(t, env, topic, 60*time.Second, func(m *kafka.Message) {
		id, _ := testbed.Header(m, outbox.EventIDHeader)
		counts[id]++
		total++
	})
	return counts, total
}

// waitPublished waits until want distinct ids are in committed transactions, then checks
// that none is there twice and that every id of wantIDs is.
func (b *bed) waitPublished(want int, timeout time.Duration) map[string]int {
	b.t.Helper()
	var counts map[string]int
	testbed.Eventually(b.t, timeout, fmt.Sprintf("%d events in Kafka", want), func() (bool, string) {
		var total int
		counts, total = b.published()
		return len(counts) >= want, fmt.Sprintf("%d distinct of %d records", len(counts), total)
	})
	for id, n := range counts {
		if n != 1 {
			b.t.Errorf("event %s published %d times", id, n)
		}
	}
	if len(counts) != want {
		b.t.Errorf("%d distinct events published, want %d", len(counts), want)
	}
	return counts
}

func expectIDs(t *testing.T, counts map[string]int, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if counts[fmt.Sprintf("%s-%d", prefix, i)] != 1 {
			t.Errorf("event %s-%d published %d times, want once", prefix, i, counts[fmt.Sprintf("%s-%d", prefix, i)])
		}
	}
}

// TestRelayPublishesCommittedEventsOnce: committed events reach Kafka once, rolled-back ones
// never; a restarted relay reads its position from Kafka and publishes nothing again; cleanup
// deletes only published rows.
func TestRelayPublishesCommittedEventsOnce(t *testing.T) {
	b := newBed(t, 2)
	b.commit("a", 0, 120)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ob.Add(ctx, tx, b.event("rolledback", 0)); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)

	stop, _ := b.start(b.config(2))
	counts := b.waitPublished(120, 60*time.Second)
	expectIDs(t, counts, "a", 0, 120)
	b.commit("b", 0, 30)
	b.waitPublished(150, 60*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}

	// A new relay with the same name: its positions come from Kafka, nothing is sent again.
	stop2, _ := b.start(b.config(2))
	b.commit("c", 0, 10)
	counts = b.waitPublished(160, 60*time.Second)
	expectIDs(t, counts, "c", 0, 10)
	if counts["rolledback-0"] != 0 {
		t.Errorf("a rolled-back event was published")
	}
	testbed.Eventually(t, 30*time.Second, "cleanup of published rows", func() (bool, string) {
		var n int64
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{b.schema, "outbox"}.Sanitize()).Scan(&n)
		return err == nil && n == 0, fmt.Sprintf("%d rows left (%v)", n, err)
	})
	if err := stop2(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	var shards int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{b.schema, "outbox_relays"}.Sanitize()+` WHERE relay = $1`, b.name).Scan(&shards); err != nil || shards != 2 {
		t.Errorf("outbox_relays rows: %d (%v), want 2", shards, err)
	}
}

// TestRelayWaitsForOutOfOrderCommits: a row committed while an older transaction is still
// in flight is held back, not skipped; and a later id committed first is published once, as
// is the earlier id when its transaction commits.
func TestRelayWaitsForOutOfOrderCommits(t *testing.T) {
	b := newBed(t, 1)
	ctx := context.Background()
	c := b.config(1)
	c.HorizonWarn = time.Second
	var logs syncBuffer
	c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))
	stop, _ := b.start(c)

	// Case 1: A takes its xid and id first and stays open; B commits after it.
	txA, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = txA.Rollback(ctx) }) // before the pool's Close, which waits for it
	if err := b.ob.Add(ctx, txA, b.event("early", 0)); err != nil {
		t.Fatal(err)
	}
	b.commit("late", 0, 1) // later id, committed first
	time.Sleep(time.Second)
	if counts, _ := b.published(); counts["late-0"] != 0 {
		t.Fatalf("late-0 published while an older transaction was in flight: its order position was passed")
	}
	testbed.Eventually(t, 30*time.Second, "a WARN about rows held back by the open transaction", func() (bool, string) {
		return strings.Contains(logs.String(), "committed outbox rows are held back by a transaction still in flight"), "not yet"
	})
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	counts := b.waitPublished(2, 30*time.Second)
	expectIDs(t, counts, "early", 0, 1)
	expectIDs(t, counts, "late", 0, 1)

	// Case 2: B takes its xid first (an unrelated write), A then inserts the smaller id, B
	// the larger one and commits first: B's id is published, then A's, none skipped.
	txB, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = txB.Rollback(ctx) })
	if _, err := txB.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	txA2, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = txA2.Rollback(ctx) })
	txA = txA2
	if err := b.ob.Add(ctx, txA, b.event("smallid", 0)); err != nil {
		t.Fatal(err)
	}
	if err := b.ob.Add(ctx, txB, b.event("largeid", 0)); err != nil {
		t.Fatal(err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	counts = b.waitPublished(4, 30*time.Second)
	expectIDs(t, counts, "smallid", 0, 1)
	expectIDs(t, counts, "largeid", 0, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRelayZombieIsFenced: a second relay with the same name takes the shard; the first
// one's next commit is refused (ErrFenced) and every event is in Kafka once.
func TestRelayZombieIsFenced(t *testing.T) {
	b := newBed(t, 1)
	stopA, doneA := b.start(b.config(1))
	b.commit("x", 0, 50)
	b.waitPublished(50, 60*time.Second)

	stopB, _ := b.start(b.config(1))
	// Keep writing: A's next transaction meets the fence.
	var errA error
	ys := 0
	for ; ys < 1000 && errA == nil; ys += 5 {
		b.commit("y", ys, ys+5)
		select {
		case errA = <-doneA:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !errors.Is(errA, relay.ErrFenced) {
		t.Fatalf("first relay: %v, want ErrFenced", errA)
	}
	var se *relay.ShardError
	if !errors.As(errA, &se) || se.Shard != 0 {
		t.Errorf("first relay's error %v is not a *ShardError for shard 0", errA)
	}
	_ = stopA
	b.commit("z", 0, 10)
	counts := b.waitPublished(50+ys+10, 60*time.Second)
	expectIDs(t, counts, "x", 0, 50)
	expectIDs(t, counts, "y", 0, ys)
	expectIDs(t, counts, "z", 0, 10)
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
}

// relayFile writes a relay config file for b and returns its path.
func (b *bed) relayFile(shards int) string {
	b.t.Helper()
	path := filepath.Join(b.t.TempDir(), "relay.yaml")
	text := fmt.Sprintf(`database:
  url: ${DATABASE_URL}
  schema: %q
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
relay:
  name: %s
  shards: %d
  position_topic: %s
  batch_size: 50
  poll_interval: 20ms
  retention: 0s
  cleanup_interval: 200ms
  transaction_timeout: 10s
`, b.schema, b.name, shards, b.posTopic)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// TestRelayKilledAtEachBoundary: the relay process is killed with SIGKILL after reading,
// in the middle of a Kafka transaction and after a commit; each restart resumes from the
// position in Kafka, and every event is there once.
func TestRelayKilledAtEachBoundary(t *testing.T) {
	b := newBed(t, 2)
	b.commit("e", 0, 400)
	file := b.relayFile(2)
	env := []string{"DATABASE_URL=" + b.env.DatabaseURL, "KAFKA_BOOTSTRAP_SERVERS=" + b.env.Brokers}
	for i, fp := range []string{"relay-mid-transaction=kill@3", "relay-after-commit=kill@2", "relay-after-read=kill@4"} {
		p := testbed.StartProcess(t, eosinkBin, fmt.Sprintf("relay-%d", i), []string{"relay", "-config", file}, append(env, "EOSINK_FAILPOINTS="+fp)...)
		err := p.Wait(120 * time.Second)
		if !testbed.KilledBySIGKILL(err) || !p.Contains("failpoint fired: ") {
			t.Fatalf("relay with %s: exit %v, want SIGKILL by the failpoint\n%s", fp, err, p.Output())
		}
		b.commit(fmt.Sprintf("k%d", i), 0, 20)
	}
	counts, _ := b.published()
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("after the kills, event %s is in Kafka %d times", id, n)
		}
	}
	p := testbed.StartProcess(t, eosinkBin, "relay-final", []string{"relay", "-config", file}, env...)
	counts = b.waitPublished(460, 120*time.Second)
	expectIDs(t, counts, "e", 0, 400)
	p.StopClean(60 * time.Second)
	if !p.Contains("relay stopped after draining") {
		t.Errorf("no drain line in the relay's output:\n%s", p.Output())
	}
	// eosink status shows the outbox: nothing unpublished, each shard's last position.
	st := testbed.StartProcess(t, eosinkBin, "status", []string{"status", "-schema", b.schema}, env...)
	if err := st.Wait(60 * time.Second); err != nil {
		t.Fatalf("eosink status: %v\n%s", err, st.Output())
	}
	for _, want := range []string{"outbox: 0 unpublished", "outbox relay " + b.name + " shard 0: last id ", "outbox relay " + b.name + " shard 1: last id "} {
		if !st.Contains(want) {
			t.Errorf("eosink status does not say %q:\n%s", want, st.Output())
		}
	}
}

// TestRelayOrdersByNumericXid: rows of finished transactions whose xids differ in their
// number of digits (9, 99, 100, 1000) are published in numeric order, each once, across
// several Kafka transactions. Sorting the xids as text would put 1000 before 99 and publish
// rows again.
func TestRelayOrdersByNumericXid(t *testing.T) {
	b := newBed(t, 1)
	ctx := context.Background()
	xids := []int{1000, 99, 9, 100, 10, 999}
	// The rows' xids must be below every running transaction's (the relay reads up to the
	// snapshot's xmin): on a fresh server the counter may still be below 1000.
	for {
		var x int64
		if err := b.pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		if x > 1100 {
			break
		}
	}
	for i, x := range xids {
		if _, err := b.pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{b.schema, "outbox"}.Sanitize()+
			` (xid, shard, topic, key, value, event_id) VALUES ($1::text::xid8, 0, $2, 'same-key', $3, $4)`,
			fmt.Sprint(x), b.topic, []byte(fmt.Sprint(x)), fmt.Sprintf("x-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c := b.config(1)
	c.BatchSize = 2
	stop, _ := b.start(c)
	b.waitPublished(len(xids), 60*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// One key, one partition: the values are the xids in publishing order.
	var got []string
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.env.Brokers, "group.id": "order", "isolation.level": "read_committed",
		"enable.partition.eof": true, "auto.offset.reset": "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if err := cons.Subscribe(b.topic, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(xids) && time.Now().Before(deadline) {
		if m, ok := cons.Poll(200).(*kafka.Message); ok {
			got = append(got, string(m.Value))
		}
	}
	if want := []string{"9", "10", "99", "100", "999", "1000"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published in order %v, want %v", got, want)
	}
}

// TestRelayStalledPastTransactionTimeoutIsFenced: a relay process stalls in the middle of a
// Kafka transaction (a failpoint sleeps past transaction_timeout); another relay takes the
// shard meanwhile. When the stalled one wakes, its commit is refused, its shard stops as
// fenced, it exits non-zero, and every event is in Kafka once.
func TestRelayStalledPastTransactionTimeoutIsFenced(t *testing.T) {
	b := newBed(t, 1)
	b.commit("s", 0, 200)
	env := []string{"DATABASE_URL=" + b.env.DatabaseURL, "KAFKA_BOOTSTRAP_SERVERS=" + b.env.Brokers,
		"EOSINK_FAILPOINTS=relay-mid-transaction=sleep(20s)@2"}
	zombie := testbed.StartProcess(t, eosinkBin, "zombie", []string{"relay", "-config", b.relayFile(1)}, env...)
	zombie.WaitOutput("failpoint fired: relay-mid-transaction", 60*time.Second)
	stop, _ := b.start(b.config(1))
	b.commit("t", 0, 50)
	counts := b.waitPublished(250, 90*time.Second)
	expectIDs(t, counts, "s", 0, 200)
	err := zombie.Wait(60 * time.Second)
	if err == nil || !zombie.Contains("fenced") {
		t.Fatalf("the stalled relay exited with %v, want an error naming the fence\n%s", err, zombie.Output())
	}
	b.commit("u", 0, 10)
	counts = b.waitPublished(260, 60*time.Second)
	expectIDs(t, counts, "u", 0, 10)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRelaysRacingForShards: two relays with the same name start at once on two shards
// while events are written; where both claim a shard, one is fenced. Every event is in
// Kafka once, and each shard is published by exactly one of them at the end.
func TestRelaysRacingForShards(t *testing.T) {
	b := newBed(t, 2)
	b.commit("r", 0, 100)
	stop1, done1 := b.start(b.config(2))
	stop2, done2 := b.start(b.config(2))
	for i := 0; i < 30; i++ {
		b.commit("w", i*10, i*10+10)
		time.Sleep(50 * time.Millisecond)
	}
	counts := b.waitPublished(400, 120*time.Second)
	expectIDs(t, counts, "r", 0, 100)
	expectIDs(t, counts, "w", 0, 300)
	// Each relay still running publishes the shards it was not fenced from.
	select {
	case err := <-done1:
		if !errors.Is(err, relay.ErrFenced) {
			t.Errorf("relay 1 stopped with %v, want ErrFenced", err)
		}
	case err := <-done2:
		if !errors.Is(err, relay.ErrFenced) {
			t.Errorf("relay 2 stopped with %v, want ErrFenced", err)
		}
	case <-time.After(time.Second):
	}
	_ = stop1()
	_ = stop2()
}

// TestRelayRefusesPositionsItCannotTrust: a position topic that lost the shard's position
// (outbox_relays records a later one) gives ErrPositionLost; a position with an xid the
// database has not reached (a restored database) gives ErrPositionAhead. Neither publishes.
func TestRelayRefusesPositionsItCannotTrust(t *testing.T) {
	b := newBed(t, 1)
	b.commit("p", 0, 5)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{b.schema, "outbox_relays"}.Sanitize()+
		` (relay, shard, last_xid, last_id, owner) VALUES ($1, 0, '5', 7, 'test')`, b.name); err != nil {
		t.Fatal(err)
	}
	_, done := b.start(b.config(1))
	if err := <-done; !errors.Is(err, relay.ErrPositionLost) {
		t.Fatalf("with outbox_relays ahead of an empty position topic: %v, want ErrPositionLost", err)
	}

	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dr := make(chan kafka.Event, 1)
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &b.posTopic, Partition: kafka.PartitionAny},
		Key: []byte(b.name + "-0"), Value: []byte(`{"xid": "999999999999", "id": 9}`)}, dr); err != nil {
		t.Fatal(err)
	}
	if m := (<-dr).(*kafka.Message); m.TopicPartition.Error != nil {
		t.Fatal(m.TopicPartition.Error)
	}
	_, done = b.start(b.config(1))
	if err := <-done; !errors.Is(err, relay.ErrPositionAhead) {
		t.Fatalf("with a position ahead of the database's xids: %v, want ErrPositionAhead", err)
	}
	if counts, _ := b.published(); len(counts) != 0 {
		t.Fatalf("published %d events", len(counts))
	}
}

// TestRelayStoppedWhileStarting: a cancellation before the shards run (a SIGTERM while the
// relay checks its table) is a clean stop, nil, as one later is; an unreachable database is
// still an error.
func TestRelayStoppedWhileStarting(t *testing.T) {
	b := newBed(t, 1)
	r, err := relay.New(b.config(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run with its context cancelled before it started: %v, want nil", err)
	}
	c := b.config(1)
	c.DatabaseURL = "postgres://u@127.0.0.1:1/x?connect_timeout=2"
	r, err = relay.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err == nil {
		t.Fatal("Run with an unreachable database: nil, want an error")
	}
}
