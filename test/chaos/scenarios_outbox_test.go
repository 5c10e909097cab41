package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/outbox"
)

// relayBed is an outbox scenario's own schema, events topic, relay name and position topic,
// with a writer committing events into the outbox while faults are injected.
type relayBed struct {
	*run
	env    testbed.Env
	schema string
	topic  string
	file   string
	ob     *outbox.Outbox

	mu        sync.Mutex
	committed int // events w-0 .. w-(committed-1) are committed
}

func newRelayBed(t *testing.T) *relayBed {
	env := testbed.Require(t)
	b := &relayBed{run: newBareRun(t), env: env, schema: testbed.Schema(t, env), topic: testbed.Topic(t, env, 3)}
	if err := outbox.Migrate(context.Background(), env.DatabaseURL, b.schema); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.ob, err = outbox.New(outbox.Config{Schema: b.schema, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	b.file = filepath.Join(t.TempDir(), "relay.yaml")
	text := fmt.Sprintf(`database:
  url: ${DATABASE_URL}
  schema: %q
kafka:
  brokers: ${KAFKA_BOOTSTRAP_SERVERS}
relay:
  name: %s
  shards: 2
  position_topic: %s
  batch_size: 40
  poll_interval: 20ms
  retention: 0s
  cleanup_interval: 500ms
  transaction_timeout: 10s
`, b.schema, testbed.Name(t, "relay"), testbed.Topic(t, env, 1))
	if err := os.WriteFile(b.file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// relay starts a relay process with extra environment (failpoints).
func (b *relayBed) relay(env ...string) *testbed.Process {
	n := b.nproc.Add(1)
	return testbed.StartProcess(b.t, eosinkBin, fmt.Sprintf("relay-%d", n), []string{"relay", "-config", b.file},
		append([]string{"DATABASE_URL=" + b.env.DatabaseURL, "KAFKA_BOOTSTRAP_SERVERS=" + b.env.Brokers}, env...)...)
}

// write commits 10 events per transaction until ctx ends; wait returns when it has stopped.
func (b *relayBed) write(ctx context.Context) (wait func()) {
	pool := testbed.Pool(b.t, b.env)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			b.mu.Lock()
			from := b.committed
			b.mu.Unlock()
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				evs := make([]outbox.Event, 10)
				for i := range evs {
					id := fmt.Sprintf("w-%d", from+i)
					evs[i] = outbox.Event{Topic: b.topic, Key: []byte(fmt.Sprint((from + i) % 13)), Value: []byte(id), EventID: id}
				}
				return b.ob.Add(context.Background(), tx, evs...)
			})
			if err == nil {
				b.mu.Lock()
				b.committed += 10
				b.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { <-done }
}

// finishRelay starts a clean relay, waits until every committed event is in Kafka
// (read_committed), stops it with SIGTERM, and records duplicates and losses.
func (b *relayBed) finishRelay(timeout time.Duration) {
	b.heal()
	p := b.relay()
	b.mu.Lock()
	want := b.committed
	b.mu.Unlock()
	var counts map[string]int
	var records int
	deadline := time.Now().Add(timeout)
	for {
		counts, records = readEvents(b.t, b.env, b.topic)
		if len(counts) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovery := time.Since(b.healed).Seconds()
	p.StopClean(60 * time.Second)
	lost := 0
	for i := 0; i < want; i++ {
		if counts[fmt.Sprintf("w-%d", i)] == 0 {
			lost++
		}
	}
	var problems []string
	dups := records - len(counts)
	if dups > 0 {
		problems = append(problems, fmt.Sprintf("C1: %d duplicate event ids in committed transactions", dups))
	}
	if lost > 0 {
		problems = append(problems, fmt.Sprintf("C2: %d committed events missing from Kafka", lost))
	}
	if extra := len(counts) - (want - lost); extra > 0 {
		problems = append(problems, fmt.Sprintf("%d event ids never committed", extra))
	}
	b.record(b.result(want, dups, lost, recovery), problems)
}

// readEvents reads topic with read_committed to its current end: how often each
// eosink-event-id occurs, and the number of records.
func readEvents(t *testing.T, env testbed.Env, topic string) (map[string]int, int) {
	t.Helper()
	counts, records := map[string]int{}, 0
	testbed.ReadCommitted(t, env, topic, 60*time.Second, func(m *kafka.Message) {
		if id, ok := testbed.Header(m, outbox.EventIDHeader); ok {
			counts[id]++
		}
		records++
	})
	return counts, records
}

var relayBoundaries = []string{"relay-after-read", "relay-mid-transaction", "relay-after-commit"}

// 19. The relay killed with SIGKILL at each boundary (after reading, mid-transaction,
// after the commit before cleanup) and at random times, while events are committed.
func scenarioRelayKills(t *testing.T) {
	t.Parallel()
	b := newRelayBed(t)
	ctx, stop := context.WithCancel(context.Background())
	wait := b.write(ctx)
	defer func() { stop(); wait() }()
	end := time.Now().Add(phase)
	for i := 0; time.Now().Before(end); i++ {
		point := relayBoundaries[i%len(relayBoundaries)]
		var p *testbed.Process
		if i%4 == 3 {
			p = b.relay()
			time.Sleep(time.Duration(500+b.rng.IntN(2000)) * time.Millisecond)
			p.Signal(syscall.SIGKILL)
			if testbed.KilledBySIGKILL(p.Wait(30 * time.Second)) {
				b.fault("random SIGKILL")
			}
			continue
		}
		p = b.relay(fmt.Sprintf("EOSINK_FAILPOINTS=%s=kill@%d", point, 1+b.rng.IntN(4)))
		if testbed.KilledBySIGKILL(p.Wait(60*time.Second)) && p.Contains("failpoint fired: "+point) {
			b.fault("failpoint " + point)
		}
	}
	b.endFaults(stop, wait)
	b.finishRelay(120 * time.Second)
}

// 20. A zombie relay: SIGSTOP past the transaction timeout while another relay takes its
// shards, then SIGCONT; the zombie's commits are refused (fenced).
func scenarioRelayZombie(t *testing.T) {
	t.Parallel()
	b := newRelayBed(t)
	ctx, stop := context.WithCancel(context.Background())
	wait := b.write(ctx)
	defer func() { stop(); wait() }()
	zombie := b.relay("EOSINK_FAILPOINTS=relay-mid-transaction=sleep(200ms)")
	zombie.WaitOutput("failpoint fired: relay-mid-transaction", 60*time.Second)
	zombie.Signal(syscall.SIGSTOP)
	time.Sleep(12 * time.Second) // past transaction_timeout (10s)
	successor := b.relay()
	successor.WaitOutput("relay shard publishing", 60*time.Second)
	time.Sleep(time.Second)
	zombie.Signal(syscall.SIGCONT)
	if err, exited := zombie.WaitFor(60 * time.Second); exited && err != nil && zombie.Contains("fenced") {
		b.fault("zombie fenced after SIGSTOP")
	} else {
		t.Logf("zombie: exited %v, err %v\n%s", exited, err, zombie.Output())
	}
	time.Sleep(phase / 2)
	b.endFaults(stop, wait)
	successor.StopClean(60 * time.Second)
	b.finishRelay(120 * time.Second)
}

// 21. Two relays racing for the same shards, started together again and again.
func scenarioRelayRace(t *testing.T) {
	t.Parallel()
	b := newRelayBed(t)
	ctx, stop := context.WithCancel(context.Background())
	wait := b.write(ctx)
	defer func() { stop(); wait() }()
	end := time.Now().Add(phase)
	for time.Now().Before(end) {
		a, c := b.relay(), b.relay()
		time.Sleep(time.Duration(2000+b.rng.IntN(2000)) * time.Millisecond)
		for _, p := range []*testbed.Process{a, c} {
			// A relay fenced on a shard logs it and goes on with its other shards.
			if p.Contains(`msg="relay shard stopped"`) && p.Contains("fenced") {
				b.fault("relay fenced by its rival on a shard")
			}
			p.Signal(syscall.SIGKILL)
			_ = p.Wait(30 * time.Second)
		}
	}
	b.endFaults(stop, wait)
	b.finishRelay(120 * time.Second)
}
