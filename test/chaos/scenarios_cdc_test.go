package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// cdcRun is the pipeline of scenarios 18 and 22: the change topics (in the order of the
// generator's topic indexes), the replica schema and eosink's schema, and the config file of
// `eosink run`.
type cdcRun struct {
	*run
	env      testbed.Env
	topics   []string
	replica  string
	offsets  string
	pipeline string
	config   string

	members []*testbed.Process // every member started

	mu   sync.Mutex
	gen  *cdcGen
	sent [][]sentRecord // per topic, the records delivered, in order
}

// sentRecord is a delivered record, kept to be republished.
type sentRecord struct {
	partition int32
	key, val  []byte
}

const cdcPartitions = 4

// cdcShape is what a cdc scenario replicates: the source tables, the topics per table
// (cdcGen.fanout), and the cdc plugin's table template, %s standing for the replica schema.
type cdcShape struct {
	tables   []*cdcTable
	fanout   int
	template string
}

// scenario 18's: three tables, Debezium's topic per table, replica.${source.table}.
var cdcPerTable = cdcShape{tables: cdcTables, fanout: 1, template: "%s.$${source.table}"}

func newCDCRun(t *testing.T, shape cdcShape) *cdcRun {
	e := testbed.Require(t)
	c := &cdcRun{run: newBareRun(t), env: e, replica: testbed.Schema(t, e), offsets: testbed.Schema(t, e),
		pipeline: testbed.Name(t, "cdc")}
	prefix := testbed.Name(t, "dbz")
	c.gen = newCDCGen(rand.New(rand.NewPCG(c.seed, 18)), prefix, shape.tables, shape.fanout) // its own: the generator runs in another goroutine
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var specs []kafka.TopicSpecification
	c.topics = c.gen.topics()
	for _, tp := range c.topics {
		specs = append(specs, kafka.TopicSpecification{Topic: tp, NumPartitions: cdcPartitions, ReplicationFactor: 1})
	}
	c.sent = make([][]sentRecord, len(c.topics))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("create topic %s: %v", r.Topic, r.Error)
		}
	}
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, c.topics)
	})
	testbed.Eventually(t, 30*time.Second, "the change topics in the metadata", func() (bool, string) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err.Error()
		}
		for _, tp := range c.topics {
			if m, ok := md.Topics[tp]; !ok || m.Error.Code() != kafka.ErrNoError || len(m.Partitions) != cdcPartitions {
				return false, "no topic " + tp
			}
		}
		return true, ""
	})

	conn, err := pgx.Connect(context.Background(), e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := pgx.Identifier{c.replica}.Sanitize()
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+q); err != nil {
		t.Fatal(err)
	}
	for _, tb := range shape.tables {
		if _, err := conn.Exec(context.Background(), tb.ddl(q)); err != nil {
			t.Fatal(err)
		}
	}
	c.config = filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
    partition.assignment.strategy: cooperative-sticky
database:
  url: %s
  schema: %s
batch: { max_records: 100 }
timeouts: { lock: 2s, idle_in_transaction: 8s, revoke: 30s, shutdown: 30s }
on_poison: dead-letter
sink:
  type: cdc
  format: json
  table: "%s"
`, c.pipeline, e.Brokers, testbed.Name(t, "g"), strings.Join(c.topics, ", "), e.DatabaseURL, c.offsets, fmt.Sprintf(shape.template, c.replica))
	if err := os.WriteFile(c.config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c.eosink("migrate", "up", "-config", c.config)
	return c
}

// eosink runs the eosink CLI and returns its standard output.
func (c *cdcRun) eosink(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(eosinkBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("eosink %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// member starts `eosink run` on the pipeline with extra environment (failpoints).
func (c *cdcRun) member(env ...string) *testbed.Process {
	n := c.nproc.Add(1)
	p := testbed.StartProcess(c.t, eosinkBin, fmt.Sprintf("eosink-%d", n), []string{"run", "-config", c.config}, env...)
	c.members = append(c.members, p)
	return p
}

// send produces the events from index from on of the generator's list, each to its topic
// with its key (so one key's changes on one topic stay in one partition, in order), and
// waits for them to be delivered.
func (c *cdcRun) send(p *kafka.Producer, from int) error {
	c.mu.Lock()
	events := c.gen.events[from:]
	c.mu.Unlock()
	return c.deliver(p, len(events), func(i int) (int, int32, []byte, []byte) {
		return events[i].topic, kafka.PartitionAny, events[i].k, events[i].v
	}, true)
}

// deliver produces n records (topic index, partition, key, value) and waits for every
// delivery report; with keep, it records them in sent (to be republished).
func (c *cdcRun) deliver(p *kafka.Producer, n int, rec func(int) (int, int32, []byte, []byte), keep bool) error {
	dr := make(chan kafka.Event, n)
	for i := 0; i < n; i++ {
		ti, part, k, v := rec(i)
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &c.topics[ti], Partition: part},
			Key: k, Value: v, Opaque: ti}, dr); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		m := (<-dr).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			return m.TopicPartition.Error
		}
		c.produced.Add(1)
		if keep {
			ti := m.Opaque.(int)
			c.mu.Lock()
			c.sent[ti] = append(c.sent[ti], sentRecord{partition: m.TopicPartition.Partition, key: m.Key, val: m.Value})
			c.mu.Unlock()
		}
	}
	return nil
}

func (c *cdcRun) producer() *kafka.Producer {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": c.env.Brokers, "enable.idempotence": true,
		"acks": "all", "linger.ms": 5, "go.logs.channel.enable": false})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// stream generates source transactions in chunks until ctx ends.
func (c *cdcRun) stream(ctx context.Context, p *kafka.Producer, chunk int, pause time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.mu.Lock()
			from := len(c.gen.events)
			for i := 0; i < chunk; i++ {
				c.gen.tx()
			}
			c.mu.Unlock()
			if err := c.send(p, from); err != nil {
				c.t.Errorf("produce: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return func() { <-done }
}

// republish sends again, verbatim and to the same partitions, a slice of up to n records of
// each topic from the first half of what was delivered: old change events at new offsets.
func (c *cdcRun) republish(p *kafka.Producer, n int) int {
	var recs []sentRecord
	var tis []int
	c.mu.Lock()
	for ti, s := range c.sent {
		half := len(s) / 2
		if half == 0 {
			continue
		}
		from := c.rng.IntN(half)
		to := min(from+n, half)
		for _, r := range s[from:to] {
			recs, tis = append(recs, r), append(tis, ti)
		}
	}
	c.mu.Unlock()
	if err := c.deliver(p, len(recs), func(i int) (int, int32, []byte, []byte) {
		return tis[i], recs[i].partition, recs[i].key, recs[i].val
	}, false); err != nil {
		c.t.Fatalf("republish: %v", err)
	}
	return len(recs)
}

// resetToEarliest is the operator's reset of every partition of the pipeline to the log
// start, while the sinks run: everything is applied again. It returns how many partitions
// moved back.
func (c *cdcRun) resetToEarliest() int {
	var out string
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(eosinkBin, "offsets", "set", "-database-url", c.env.DatabaseURL, "-brokers", c.env.Brokers,
			"-schema", c.offsets, "-pipeline", c.pipeline, "-to", "earliest", "-reason", "chaos 18: replay", "-operator", "chaos", "-json")
		b, err := cmd.CombinedOutput()
		if err == nil {
			out = string(b)
			break
		}
		if attempt == 5 {
			c.t.Fatalf("eosink offsets set: %v\n%s", err, b)
		}
		c.t.Logf("eosink offsets set (attempt %d): %v: %s", attempt, err, b)
		time.Sleep(time.Second)
	}
	var changes []struct {
		From *int64 `json:"from"`
		To   int64  `json:"to"`
	}
	// The JSON list, then (on standard error, after it) what the replay does.
	if i := strings.Index(out, "["); i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&changes) != nil {
		c.t.Fatalf("eosink offsets set: unexpected output %q", out)
	}
	back := 0
	for _, ch := range changes {
		if ch.From != nil && *ch.From > ch.To {
			back++
		}
	}
	return back
}

// cdcTableResult compares one replica table with the model.
type cdcTableResult struct {
	Table                      string
	Source, Replica            int // rows in the model (the source) and in the replica
	Missing, Extra, Mismatches int // rows only in the model, only in the replica, with other contents
	Diff                       []string
}

// compare reads the replica tables and compares their rows, column by column as
// PostgreSQL prints them, with the model of every generated event.
func (c *cdcRun) compare(ctx context.Context, conn *pgx.Conn) ([]cdcTableResult, error) {
	c.mu.Lock()
	model := cdcModel(c.gen.tables, c.gen.events)
	c.mu.Unlock()
	var out []cdcTableResult
	for ti, tb := range c.gen.tables {
		got := map[string][]string{}
		rows, err := conn.Query(ctx, tb.selectText(pgx.Identifier{c.replica}.Sanitize()))
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			vals := make([]*string, len(tb.cols))
			dest := make([]any, len(vals))
			for i := range vals {
				dest[i] = &vals[i]
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, err
			}
			row := make([]string, len(vals))
			for i, v := range vals {
				row[i] = nullText
				if v != nil {
					row[i] = *v
				}
			}
			got[strings.Join(row[:tb.nkeys], "|")] = row
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		r := cdcTableResult{Table: tb.name, Source: len(model[ti]), Replica: len(got)}
		show := func(row []string) string {
			s := make([]string, len(row))
			for i, v := range row {
				s[i] = "NULL"
				if v != nullText {
					s[i] = fmt.Sprintf("%q", v)
				}
			}
			return "(" + strings.Join(s, ", ") + ")"
		}
		for k, want := range model[ti] {
			g, ok := got[k]
			switch {
			case !ok:
				r.Missing++
				r.Diff = append(r.Diff, fmt.Sprintf("%s: + %s (only in the source)", tb.name, show(want)))
			case strings.Join(g, "\x01") != strings.Join(want, "\x01"):
				r.Mismatches++
				r.Diff = append(r.Diff, fmt.Sprintf("%s: ~ source %s, replica %s", tb.name, show(want), show(g)))
			}
		}
		for k, g := range got {
			if _, ok := model[ti][k]; !ok {
				r.Extra++
				r.Diff = append(r.Diff, fmt.Sprintf("%s: - %s (only in the replica)", tb.name, show(g)))
			}
		}
		sort.Strings(r.Diff)
		out = append(out, r)
	}
	return out, nil
}

// lagAndDead returns the summed lag over every partition of the change topics (log end
// minus the stored next offset) and the pipeline's dead letters.
func (c *cdcRun) lagAndDead(ctx context.Context, conn *pgx.Conn) (lag int64, dead int, err error) {
	next := map[string]int64{}
	rows, err := conn.Query(ctx, "SELECT topic, partition, next_offset FROM "+pgx.Identifier{c.offsets, "offsets"}.Sanitize()+
		" WHERE pipeline = $1", c.pipeline)
	if err != nil {
		return 0, 0, err
	}
	var topic string
	var part int32
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&topic, &part, &n}, func() error {
		next[fmt.Sprintf("%s/%d", topic, part)] = n
		return nil
	}); err != nil {
		return 0, 0, err
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{c.offsets, "dead_letters"}.Sanitize()+
		" WHERE pipeline = $1", c.pipeline).Scan(&dead); err != nil {
		return 0, 0, err
	}
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": c.env.Brokers, "group.id": "eosink-chaos-verifier",
		"go.logs.channel.enable": false})
	if err != nil {
		return 0, 0, err
	}
	defer cons.Close()
	for _, tp := range c.topics {
		for p := int32(0); p < cdcPartitions; p++ {
			low, high, err := cons.QueryWatermarkOffsets(tp, p, 10000)
			if err != nil {
				return 0, 0, err
			}
			stored, ok := next[fmt.Sprintf("%s/%d", tp, p)]
			if !ok {
				stored = low
			}
			if high > stored {
				lag += high - stored
			}
		}
	}
	return lag, dead, nil
}

// watch samples the replica's (key, version) every 100 ms in one snapshot of all tables
// until stop is closed, and reports every row whose version went down between two samples
// and every deleted key that came back (keys are never used again by the generator).
func (c *cdcRun) watch(stop <-chan struct{}) (wait func() (samples int, problems []string)) {
	type result struct {
		n        int
		problems []string
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() { done <- res }()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.env.DatabaseURL)
		if err != nil {
			res.problems = append(res.problems, err.Error())
			return
		}
		defer conn.Close(ctx)
		prev := map[string]int64{}
		gone := map[string]bool{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			cur := map[string]int64{}
			err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				for _, tb := range c.gen.tables {
					keys := make([]string, tb.nkeys)
					for i := range keys {
						keys[i] = tb.cols[i].name + "::text"
					}
					rows, err := tx.Query(ctx, fmt.Sprintf("SELECT concat_ws('|', %s), version FROM %s.%s", strings.Join(keys, ", "),
						pgx.Identifier{c.replica}.Sanitize(), tb.name))
					if err != nil {
						return err
					}
					var k string
					var v int64
					if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { cur[tb.name+":"+k] = v; return nil }); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				res.problems = append(res.problems, "sample: "+err.Error())
				return
			}
			res.n++
			for k, v := range prev {
				if got, ok := cur[k]; !ok {
					gone[k] = true
				} else if got < v && len(res.problems) < 20 {
					res.problems = append(res.problems, fmt.Sprintf("%s moved back from version %d to %d", k, v, got))
				}
			}
			for k := range cur {
				if gone[k] && len(res.problems) < 20 {
					res.problems = append(res.problems, fmt.Sprintf("deleted row %s came back", k))
					delete(gone, k)
				}
			}
			prev = cur
		}
	}()
	return func() (int, []string) {
		r := <-done
		return r.n, r.problems
	}
}

// failpoints of cmd/eosink's commit path (mid-write is the points example's).
var cdcBoundaries = []string{"after-fetch", "after-offset-update", "in-handler", "before-commit", "after-commit"}

// 18. The cdc plugin under a rebalance storm with SIGKILLs, over three change topics of
// four partitions each (one per source table, one with a composite key), with an operator's
// reset to the earliest offsets and old change events republished in the middle. The
// replica's rows must equal the model of the generated events, column by column; lag 0;
// nothing dead-lettered; no row ever moves back or comes back after its delete.
func scenarioCDCStorm(t *testing.T) { cdcStorm(t, cdcPerTable, false) }

// 22. Several topics feed one target: the storm of scenario 18 over the three topics of one
// source table's partitions (accounts_p0..p2, four partitions each), all routed by a fixed
// template to the one replica table accounts, each change event sent on one of the three at
// random (cdcgen_test.go), with short-lived rows whose insert and delete travel on different
// topics. Half of the members started without a kill hold each transaction open 300 ms
// before its commit (failpoint before-commit=sleep), so that merges of other partitions wait
// on their position locks: the race of a merge that decides after such a wait but writes
// with what it saw before (issue 22, "Concurrent partitions on one target"). The replica
// must equal the model, ordered by source position.
func scenarioCDCMultiTopicOneTarget(t *testing.T) {
	cdcStorm(t, cdcShape{tables: cdcTables[:1], fanout: 3, template: "%s.accounts"}, true)
}

// cdcStorm runs the storm of scenario 18 over shape; with slow, half of the members without
// a failpoint kill sleep 300 ms before each commit.
func cdcStorm(t *testing.T, shape cdcShape, slow bool) {
	t.Parallel()
	c := newCDCRun(t, shape)
	ctx := context.Background()
	prod := c.producer()
	defer prod.Close()
	c.mu.Lock()
	c.gen.snapshot(40)
	c.mu.Unlock()
	if err := c.send(prod, 0); err != nil {
		t.Fatal(err)
	}

	stopWatch := make(chan struct{})
	waitWatch := c.watch(stopWatch)
	var procs []*testbed.Process
	victim := map[*testbed.Process]string{} // members started with a failpoint kill, and its point
	for i := 0; i < 4; i++ {
		if slow && i%2 == 1 {
			procs = append(procs, c.member("EOSINK_FAILPOINTS=before-commit=sleep(300ms)"))
			continue
		}
		procs = append(procs, c.member())
	}
	sctx, stopStream := context.WithCancel(ctx)
	waitStream := c.stream(sctx, prod, 40, 200*time.Millisecond)
	defer func() { stopStream(); waitStream() }() // before the producer closes, also on a failure

	// reap removes the members that exited, counting the failpoint kills.
	reap := func() {
		for i := 0; i < len(procs); i++ {
			p := procs[i]
			err, exited := p.WaitFor(0)
			if !exited {
				continue
			}
			fp := victim[p]
			if fp == "" || !testbed.KilledBySIGKILL(err) || !p.Contains("failpoint fired: "+fp+" kill") {
				t.Fatalf("a member exited on its own: %v\n%s", err, p.Output())
			}
			c.fault("failpoint kill at " + fp)
			procs = append(procs[:i], procs[i+1:]...)
			i--
		}
	}
	// Replays a third and two thirds into the fault phase (at most 30 s apart, alternating in
	// longer runs): the operator's reset to the earliest offsets, then old events republished.
	every := min(phase/3, 30*time.Second)
	replay := func(i int) {
		if i%2 == 0 {
			if back := c.resetToEarliest(); back > 0 {
				c.fault("operator reset to the earliest offsets while running (partitions moved back)")
			}
		} else if n := c.republish(prod, 150); n > 0 {
			c.fault("old change events republished")
			t.Logf("republished %d old change events", n)
		}
	}
	start := time.Now()
	replays, nextReplay := 0, start.Add(every)
	for end := start.Add(phase); time.Now().Before(end); {
		time.Sleep(time.Duration(800+c.rng.IntN(1700)) * time.Millisecond)
		reap()
		if time.Now().After(nextReplay) {
			replay(replays)
			replays++
			nextReplay = time.Now().Add(every)
			continue
		}
		switch {
		case len(procs) < 6 && (len(procs) <= 3 || c.rng.IntN(2) == 0):
			if c.rng.IntN(3) == 0 {
				fp := cdcBoundaries[c.rng.IntN(len(cdcBoundaries))]
				p := c.member(fmt.Sprintf("EOSINK_FAILPOINTS=%s=kill@%d", fp, 1+c.rng.IntN(3)))
				victim[p] = fp
				procs = append(procs, p)
			} else if slow && c.rng.IntN(2) == 0 {
				procs = append(procs, c.member("EOSINK_FAILPOINTS=before-commit=sleep(300ms)"))
				c.fault("member started, holding each transaction 300 ms before its commit")
				continue
			} else {
				procs = append(procs, c.member())
			}
			c.fault("member started")
		default:
			i := c.rng.IntN(len(procs))
			if fp := victim[procs[i]]; fp != "" && c.rng.IntN(2) == 0 {
				// Armed with a failpoint, which may fire while it drains.
				procs[i].Signal(syscall.SIGTERM)
				err := procs[i].Wait(60 * time.Second)
				switch {
				case err == nil:
					c.fault("member stopped with SIGTERM")
				case testbed.KilledBySIGKILL(err) && procs[i].Contains("failpoint fired: "+fp+" kill"):
					c.fault("failpoint kill at " + fp)
				default:
					t.Fatalf("a member armed with a failpoint, after SIGTERM: %v", err)
				}
			} else if fp == "" && c.rng.IntN(2) == 0 {
				procs[i].StopClean(60 * time.Second)
				c.fault("member stopped with SIGTERM")
			} else {
				procs[i].Signal(syscall.SIGKILL)
				if err, _ := procs[i].WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
					c.fault("member killed with SIGKILL")
				}
			}
			procs = append(procs[:i], procs[i+1:]...)
		}
	}
	for ; replays < 2; replays++ { // a fault phase too short for the schedule
		replay(replays)
	}
	// The members still armed with a failpoint: fired by now, or killed here.
	reap()
	for i := 0; i < len(procs); i++ {
		if victim[procs[i]] != "" {
			procs[i].Signal(syscall.SIGKILL)
			if err, _ := procs[i].WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
				if procs[i].Contains("failpoint fired: " + victim[procs[i]] + " kill") {
					c.fault("failpoint kill at " + victim[procs[i]])
				} else {
					c.fault("member killed with SIGKILL")
				}
			}
			procs = append(procs[:i], procs[i+1:]...)
			i--
		}
	}
	if len(procs) == 0 {
		procs = append(procs, c.member())
	}
	c.endFaults(stopStream, waitStream)

	// Wait for the lag to reach 0 and the replica to equal the model.
	conn, err := pgx.Connect(ctx, c.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var results []cdcTableResult
	var lag int64
	var dead int
	equal := func() bool {
		for _, r := range results {
			if r.Missing+r.Extra+r.Mismatches > 0 {
				return false
			}
		}
		return len(results) == len(c.gen.tables)
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		lag, dead, err = c.lagAndDead(ctx, conn)
		if err == nil {
			results, err = c.compare(ctx, conn)
		}
		if err == nil && lag == 0 && equal() || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovery := time.Since(c.healed).Seconds()
	close(stopWatch)
	samples, backwards := waitWatch()

	var problems []string
	if err != nil {
		problems = append(problems, "verifier: "+err.Error())
	}
	missing, extra, mismatches, rows := 0, 0, 0, 0
	var diff []string
	for _, r := range results {
		t.Logf("%s: source rows: %d, replica rows: %d, mismatches: %d (missing %d, extra %d, different %d)", r.Table, r.Source, r.Replica,
			r.Missing+r.Extra+r.Mismatches, r.Missing, r.Extra, r.Mismatches)
		missing, extra, mismatches, rows = missing+r.Missing, extra+r.Extra, mismatches+r.Mismatches, rows+r.Source
		diff = append(diff, r.Diff...)
		if n := r.Missing + r.Extra + r.Mismatches; n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d mismatches (%d rows missing, %d extra, %d different)", r.Table, n, r.Missing, r.Extra, r.Mismatches))
		}
	}
	if len(diff) > 0 {
		if len(diff) > 40 {
			diff = append(diff[:40], fmt.Sprintf("... and %d more", len(diff)-40))
		}
		t.Logf("replica differs from the model of the generated events (+: only in the source, -: only in the replica, ~: different):\n  %s",
			strings.Join(diff, "\n  "))
	}
	t.Logf("lag: %d, dead letters: %d, %d samples of the replica while it changed", lag, dead, samples)
	if lag != 0 {
		problems = append(problems, fmt.Sprintf("C4: lag %d", lag))
	}
	if dead != 0 {
		problems = append(problems, fmt.Sprintf("%d dead letters", dead))
	}
	if len(backwards) > 0 {
		problems = append(problems, "never backwards: "+strings.Join(backwards, ", "))
	}
	if samples == 0 {
		problems = append(problems, "no sample of the replica taken")
	}
	claims, afterReset := 0, 0
	for _, p := range c.members {
		claims += strings.Count(p.Output(), "partition claimed")
		afterReset += strings.Count(p.Output(), "partition claimed again after an operator reset")
	}
	t.Logf("%d members started; %d claims, %d of them after the operator's reset", len(c.members), claims, afterReset)
	if claims == 0 {
		problems = append(problems, "no claims logged")
	}
	if !c.evidenceOf("operator reset") {
		problems = append(problems, "the operator's reset moved no partition back")
	}
	res := c.result(int(c.produced.Load()), extra, missing+mismatches, recovery)
	c.record(res, problems)
	stopAll(procs, 60*time.Second)
}

// evidenceOf reports whether a fault whose evidence starts with prefix fired.
func (r *run) evidenceOf(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for what := range r.evidence {
		if strings.HasPrefix(what, prefix) {
			return true
		}
	}
	return false
}
