package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
)

const (
	txAccounts   = 40 // per table
	txDataParts  = 4
	txLease      = 3 * time.Second
	txMaxPhase   = 40 * time.Second // the scenario stays under a minute at make chaos's phase
	txReadsEvery = 20 * time.Millisecond
	txMaxHeld    = 120 // max_held_events: dozens of transfers (2 to 4 changes each), not a large one (131 to 200)
)

// 24. consistency: transaction (issue 25) under its faults: transfers between accounts in
// two tables (two topics of four partitions, and the one-partition transaction topic,
// txgen_test.go), applied by three `eosink run` members of which one holds the set's lease.
// The holder is killed with SIGKILL at random points and at the commit path's failpoints,
// frozen with SIGSTOP past the lease timeout (a zombie, sometimes inside its commit's open
// transaction) and let go, the members' database sessions are ended mid-transaction
// (pg_terminate_backend), Debezium restarts send the last transactions again, and an
// operator resets every position to the log start. A reader queries the replica's total
// balance 50 times a second: it must never differ from the constant. At the end the
// replica must equal the model of the generated transfers, the watermark must count every
// distinct source transaction exactly once, and nothing may be left unread or dead-lettered.
func scenarioCDCTransaction(consistency string) func(t *testing.T) {
	return func(t *testing.T) { cdcTransaction(t, consistency) }
}

func cdcTransaction(t *testing.T, consistency string) {
	t.Parallel()
	e := testbed.Require(t)
	c := &cdcRun{run: newBareRun(t), env: e, replica: testbed.Schema(t, e), offsets: testbed.Schema(t, e),
		pipeline: testbed.Name(t, "cdctx")}
	gen := newTxGen(rand.New(rand.NewPCG(c.seed, 24)), testbed.Name(t, "dbz"), txAccounts)
	all := gen.topics()
	c.topics = all
	txTopic := all[txTopicIdx]
	createTopics(t, e.Brokers, map[string]int{all[0]: txDataParts, all[1]: txDataParts, txTopic: 1})
	sequenced := consistency == "transaction"

	ctx := context.Background()
	db, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	q := pgx.Identifier{c.replica}.Sanitize()
	for _, s := range []string{"CREATE SCHEMA " + q,
		"CREATE TABLE " + q + ".accounts_a (id integer PRIMARY KEY, balance numeric(12,2) NOT NULL)",
		"CREATE TABLE " + q + ".accounts_b (id integer PRIMARY KEY, balance numeric(12,2) NOT NULL)"} {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	c.config = filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s, %s]
database:
  url: %s
  schema: %s
timeouts: { lock: 2s, idle_in_transaction: 4s, revoke: 30s, shutdown: 30s }
on_poison: dead-letter
sink:
  type: cdc
  format: json
  table: "%s.$${source.table}"
  consistency: %s
`, c.pipeline, e.Brokers, testbed.Name(t, "g"), all[0], all[1], e.DatabaseURL, c.offsets, c.replica, consistency)
	if sequenced {
		// A bound the large transfers pass: each streams into an open replica transaction
		// when it commits next (under the same faults); later ones pause their partitions.
		yaml += fmt.Sprintf("  transaction_topic: %s\n  lease_timeout: %s\n  max_held_events: %d\n", txTopic, txLease, txMaxHeld)
	}
	if err := os.WriteFile(c.config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c.eosink("migrate", "up", "-config", c.config)

	prod := c.producer()
	defer prod.Close()
	var sent int // records of gen.recs delivered
	sendNew := func() {
		c.mu.Lock()
		recs := gen.recs[sent:]
		sent = len(gen.recs)
		c.mu.Unlock()
		if err := c.deliver(prod, len(recs), func(i int) (int, int32, []byte, []byte) {
			return recs[i].topic, kafka.PartitionAny, recs[i].k, recs[i].v
		}, false); err != nil {
			t.Errorf("produce: %v", err)
		}
	}
	gen.snapshot()
	sendNew()

	// The reader: one statement, so one snapshot of both tables, every 20 ms.
	stopRead, readDone := make(chan struct{}), make(chan struct{})
	var stopReadOnce sync.Once
	// stopReader ends the reader and waits for it, once: at the end of the checks, or when
	// the scenario fails earlier (a t.Fatal), before the cleanup drops its tables.
	stopReader := func() { stopReadOnce.Do(func() { close(stopRead); <-readDone }) }
	var reads, violations atomic.Int64
	var firstBad atomic.Value
	defer stopReader()
	readStart := time.Now()
	go func() {
		defer close(readDone)
		rconn, err := pgx.Connect(ctx, e.DatabaseURL)
		if err != nil {
			t.Errorf("reader: %v", err)
			return
		}
		defer rconn.Close(ctx)
		sql := fmt.Sprintf(`SELECT (((SELECT coalesce(sum(balance), 0) FROM %[1]s.accounts_a) + (SELECT coalesce(sum(balance), 0) FROM %[1]s.accounts_b)) * 100)::bigint,
			(SELECT count(*) FROM %[1]s.accounts_a) + (SELECT count(*) FROM %[1]s.accounts_b)`, q)
		tick := time.NewTicker(txReadsEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopRead:
				return
			case <-tick.C:
			}
			var sum, n int64
			if err := rconn.QueryRow(ctx, sql).Scan(&sum, &n); err != nil {
				t.Errorf("reader: %v", err)
				return
			}
			if n < int64(len(txTables)*txAccounts) {
				continue // the snapshot is still being applied
			}
			reads.Add(1)
			if sum != gen.total {
				if violations.Add(1) == 1 {
					firstBad.Store(fmt.Sprintf("total %d, want %d", sum, gen.total))
				}
			}
		}
	}()

	var procs []*testbed.Process
	armed := map[*testbed.Process]string{} // members started with a failpoint kill, and its point
	slow := map[*testbed.Process]bool{}    // members that hold each commit open 400 ms before COMMIT
	start := func() {
		switch k := c.rng.IntN(6); {
		case sequenced && k < 3:
			fp := cdcBoundaries[c.rng.IntN(len(cdcBoundaries))]
			p := c.member(fmt.Sprintf("EOSINK_FAILPOINTS=%s=kill@%d", fp, 1+c.rng.IntN(3)))
			armed[p] = fp
			procs = append(procs, p)
		case sequenced && k == 3:
			p := c.member("EOSINK_FAILPOINTS=before-commit=sleep(400ms)")
			slow[p] = true
			procs = append(procs, p)
		default:
			procs = append(procs, c.member())
		}
	}
	procs = append(procs, c.member())
	if sequenced {
		procs[0].WaitOutput("set: owned", 60*time.Second)
		p := c.member("EOSINK_FAILPOINTS=before-commit=sleep(400ms)")
		slow[p] = true
		procs = append(procs, p, c.member())
		for _, p := range procs[1:] {
			p.WaitOutput("set: standing by", 60*time.Second)
		}
	}

	// The stream: 15 transfers every 100 ms; now and then a Debezium restart.
	sctx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for sctx.Err() == nil {
			c.mu.Lock()
			for i := 0; i < 15; i++ {
				gen.tx()
			}
			restart := gen.rng.IntN(25) == 0
			var n, recs int
			if restart {
				n = 1 + gen.rng.IntN(40)
				recs = gen.resend(n, gen.rng.IntN(2) == 0)
			}
			c.mu.Unlock()
			if restart {
				c.fault("Debezium restart: the last transactions sent again")
				t.Logf("Debezium restart: %d transactions sent again (%d records)", n, recs)
			}
			sendNew()
			select {
			case <-sctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		c.mu.Lock()
		restarted := gen.resent > 0
		if !restarted { // a fault phase too short for one: a restart now
			gen.resend(10, true)
		}
		gen.tx() // a last one after any resend
		c.mu.Unlock()
		if !restarted {
			c.fault("Debezium restart: the last transactions sent again")
		}
		sendNew()
	}()
	defer func() { stopStream(); <-streamDone }()

	reap := func() {
		for i := 0; i < len(procs); i++ {
			p := procs[i]
			err, exited := p.WaitFor(0)
			if !exited {
				continue
			}
			fp := armed[p]
			if fp == "" || !testbed.KilledBySIGKILL(err) || !p.Contains("failpoint fired: "+fp+" kill") {
				t.Fatalf("a member exited on its own: %v\n%s", err, p.Output())
			}
			c.fault("failpoint kill of the holder at " + fp)
			procs = append(procs[:i], procs[i+1:]...)
			i--
		}
	}
	owned := func(except *testbed.Process) int {
		n := 0
		for _, p := range c.members {
			if p != except {
				n += strings.Count(p.Output(), "set: owned")
			}
		}
		return n
	}

	faultPhase := min(phase, txMaxPhase)
	end := time.Now().Add(faultPhase)
	resetAt := time.Now().Add(faultPhase / 2)
	reset := false
	turn := 0 // SIGKILL, SIGSTOP and pg_terminate_backend in turn
	for sequenced && time.Now().Before(end) {
		time.Sleep(time.Duration(300+c.rng.IntN(1700)) * time.Millisecond)
		reap()
		for len(procs) < 3 {
			start()
		}
		if !reset && time.Now().After(resetAt) {
			reset = true
			if back := c.resetToEarliest(); back > 0 {
				c.fault("operator reset to the earliest offsets while running (partitions moved back)")
			}
			continue
		}
		h := c.holder(ctx, db, procs)
		if h == nil {
			continue // between holders
		}
		turn++
		if turn%3 == 0 { // the members' database sessions ended mid-transaction (scenario 6's fault)
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1 AND state IN ('active', 'idle in transaction')) k`, rebalance.SessionName(c.pipeline)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			for range n {
				c.fault("pg_terminate_backend of a member's session mid-transaction")
			}
			continue
		}
		if turn%3 == 1 {
			time.Sleep(time.Duration(c.rng.IntN(300)) * time.Millisecond)
			h.Signal(syscall.SIGKILL)
			if err, _ := h.WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
				if fp := armed[h]; fp != "" && h.Contains("failpoint fired: "+fp+" kill") {
					c.fault("failpoint kill of the holder at " + fp)
				} else {
					c.fault("holder killed with SIGKILL")
				}
			}
			for i, p := range procs {
				if p == h {
					procs = append(procs[:i], procs[i+1:]...)
					break
				}
			}
			continue
		}
		// A zombie: frozen past the lease timeout (a slow member inside its commit's open
		// transaction, after CheckLease), a standby takes over, then it runs again.
		mark := len(h.Output())
		inTx := false
		if slow[h] {
			fired := strings.Count(h.Output(), "failpoint fired: before-commit sleep")
			for wait := time.Now().Add(20 * time.Second); strings.Count(h.Output(), "failpoint fired: before-commit sleep") == fired; {
				if h.Exited() || time.Now().After(wait) {
					t.Fatalf("the slow holder entered no commit within 20 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			inTx = true
		}
		before := owned(h)
		h.Signal(syscall.SIGSTOP)
		took := false
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && !took {
			time.Sleep(200 * time.Millisecond)
			took = owned(h) > before
		}
		h.Signal(syscall.SIGCONT)
		if !took {
			t.Fatalf("no standby took the set within 30 s of the holder's SIGSTOP (lease timeout %s)", txLease)
		}
		for wait := time.Now().Add(30 * time.Second); !strings.Contains(h.Output()[mark:], "set: standing by"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(wait) {
				h.Dump() // where it hangs: its goroutines go into the output logged below
				t.Fatalf("timed out after 30s waiting for the zombie to stand by (sent it SIGQUIT: its goroutines are in its output)")
			}
		}
		out := h.Output()[mark:]
		how := "its lease lost"
		switch {
		case strings.Contains(out, "idle-in-transaction timeout"):
			how = "its COMMIT failed (the server had ended its open transaction), the lease lost"
		case strings.Contains(out, "ownership ends"):
			how = "its ownership ended"
		case strings.Contains(out, "another instance owns the set now"):
			how = "its commit or renewal rejected: lease lost"
		}
		where := "at a random point"
		if inTx {
			where = "inside its commit's open transaction"
		}
		c.fault(fmt.Sprintf("holder frozen with SIGSTOP %s past the lease timeout; a standby took over; after SIGCONT %s, it stood by", where, how))
	}
	if !sequenced {
		time.Sleep(faultPhase)
		c.fault("none (control)")
	}
	reap()
	for i := 0; i < len(procs); i++ { // members still armed: they would die when they take over
		if armed[procs[i]] != "" {
			procs[i].Signal(syscall.SIGKILL)
			_, _ = procs[i].WaitFor(10 * time.Second)
			procs = append(procs[:i], procs[i+1:]...)
			i--
		}
	}
	if len(procs) == 0 {
		procs = append(procs, c.member())
	}
	c.endFaults(stopStream, func() { <-streamDone })

	// Caught up: every partition read to its end, the replica equal to the model.
	model := gen.model()
	var diffs []string
	var missing, extra, mismatched int
	var lag int64
	var dead int
	compare := func() error {
		missing, extra, mismatched, diffs = 0, 0, 0, nil
		for ti, tb := range txTables {
			got := map[int]int64{}
			rows, err := db.Query(ctx, fmt.Sprintf("SELECT id, (balance * 100)::bigint FROM %s.%s", q, tb))
			if err != nil {
				return err
			}
			var id int
			var b int64
			if _, err := pgx.ForEachRow(rows, []any{&id, &b}, func() error { got[id] = b; return nil }); err != nil {
				return err
			}
			for i, want := range model[ti] {
				g, ok := got[i+1]
				switch {
				case !ok:
					missing++
					diffs = append(diffs, fmt.Sprintf("%s %d: missing (source %d)", tb, i+1, want))
				case g != want:
					mismatched++
					diffs = append(diffs, fmt.Sprintf("%s %d: replica %d, source %d", tb, i+1, g, want))
				}
				delete(got, i+1)
			}
			for id := range got {
				extra++
				diffs = append(diffs, fmt.Sprintf("%s %d: only in the replica", tb, id))
			}
		}
		return nil
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		lag, dead, err = c.txLag(ctx, db, map[string]int32{all[0]: txDataParts, all[1]: txDataParts, txTopic: 1}, sequenced)
		if err == nil {
			err = compare()
		}
		if err == nil && lag == 0 && missing+extra+mismatched == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovery := time.Since(c.healed).Seconds()
	stopReader()
	readSecs := time.Since(readStart).Seconds()

	var problems []string
	if err != nil {
		problems = append(problems, "verifier: "+err.Error())
	}
	distinct := int64(len(gen.txs))
	var applied int64 = -1
	if sequenced {
		if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT transactions FROM %s WHERE pipeline = $1`,
			pgx.Identifier{c.offsets, "cdc_tx_watermarks"}.Sanitize()), c.pipeline).Scan(&applied); err != nil {
			problems = append(problems, "watermark: "+err.Error())
		}
	}
	duplicates, lost := extra, missing+mismatched
	if sequenced && applied > distinct {
		duplicates += int(applied - distinct)
		problems = append(problems, fmt.Sprintf("the watermark counts %d source transactions applied, %d were generated", applied, distinct))
	}
	if sequenced && applied >= 0 && applied < distinct {
		lost += int(distinct - applied)
		problems = append(problems, fmt.Sprintf("the watermark counts %d source transactions applied, %d were generated", applied, distinct))
	}
	if len(diffs) > 0 {
		if len(diffs) > 20 {
			diffs = append(diffs[:20], fmt.Sprintf("... and %d more", len(diffs)-20))
		}
		t.Logf("replica differs from the model of the transfers:\n  %s", strings.Join(diffs, "\n  "))
		problems = append(problems, fmt.Sprintf("%d accounts differ from the model (%d missing, %d extra, %d different)",
			missing+extra+mismatched, missing, extra, mismatched))
	}
	rate := float64(reads.Load()) / readSecs
	t.Logf("%s: %d distinct source transactions (%d sent again by %d restarts), watermark %d; reader: %d reads (%.1f/s), %d violations%s; lag %d, dead letters %d",
		consistency, distinct, gen.resent, c.evidenceCount("Debezium restart"), applied, reads.Load(), rate, violations.Load(), firstOf(&firstBad), lag, dead)
	if consistency == "partition" {
		fmt.Printf("control (partition mode): violations seen by the reader: %d of %d reads\n", violations.Load(), reads.Load())
	}
	if lag != 0 {
		problems = append(problems, fmt.Sprintf("C4: lag %d", lag))
	}
	if dead != 0 {
		problems = append(problems, fmt.Sprintf("%d dead letters", dead))
	}
	if rate < 20 {
		problems = append(problems, fmt.Sprintf("the reader read %.1f times a second, not 20", rate))
	}
	if v := violations.Load(); v != 0 && sequenced {
		problems = append(problems, fmt.Sprintf("the reader saw %d of %d reads with a total other than %d (first: %s): a transfer applied in part",
			v, reads.Load(), gen.total, firstOf(&firstBad)))
	}
	if sequenced {
		streams := 0
		for _, m := range c.members {
			streams += strings.Count(m.Output(), "too large to hold streams into one replica transaction")
		}
		c.note(fmt.Sprintf("source transactions streamed (max_held_events %d): %d", txMaxHeld, streams))
		if streams == 0 {
			problems = append(problems, fmt.Sprintf("no source transaction streamed under max_held_events %d", txMaxHeld))
		}
		for _, need := range []string{"holder killed with SIGKILL", "holder frozen", "Debezium restart", "operator reset"} {
			if !c.evidenceOf(need) && !(need == "holder killed with SIGKILL" && c.evidenceOf("failpoint kill")) {
				problems = append(problems, "no fault: "+need)
			}
		}
	}
	c.note(fmt.Sprintf("reader: %d reads, %d violations", reads.Load(), violations.Load()))
	res := c.result(int(c.produced.Load()), duplicates, lost, recovery)
	c.record(res, problems)
	stopAll(procs, 60*time.Second)
}

func firstOf(v *atomic.Value) string {
	if s, ok := v.Load().(string); ok {
		return " (first: " + s + ")"
	}
	return ""
}

// evidenceCount is how many faults whose evidence starts with prefix fired.
func (r *run) evidenceCount(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for what, k := range r.evidence {
		if strings.HasPrefix(what, prefix) {
			n += k
		}
	}
	return n
}

// holder returns the member that holds the set's lease, by its instance id
// (<host>-<pid>-<n>), or nil.
func (c *cdcRun) holder(ctx context.Context, db *pgx.Conn, procs []*testbed.Process) *testbed.Process {
	var holder *string
	if err := db.QueryRow(ctx, "SELECT holder FROM "+pgx.Identifier{c.offsets, "leases"}.Sanitize()+" WHERE pipeline = $1",
		c.pipeline).Scan(&holder); err != nil || holder == nil {
		return nil
	}
	s := (*holder)[:max(strings.LastIndex(*holder, "-"), 0)]
	pid, err := strconv.Atoi(s[strings.LastIndex(s, "-")+1:])
	if err != nil {
		return nil
	}
	for _, p := range procs {
		if p.Cmd.Process.Pid == pid && !p.Exited() {
			return p
		}
	}
	return nil
}

// txLag is the summed lag over the given topics' partitions (the log end minus the
// stored next offset) and the pipeline's dead letters. Without the set (partition mode),
// the transaction topic is not read and not counted.
func (c *cdcRun) txLag(ctx context.Context, db *pgx.Conn, parts map[string]int32, sequenced bool) (lag int64, dead int, err error) {
	next := map[string]int64{}
	rows, err := db.Query(ctx, "SELECT topic, partition, next_offset FROM "+pgx.Identifier{c.offsets, "offsets"}.Sanitize()+
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
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{c.offsets, "dead_letters"}.Sanitize()+
		" WHERE pipeline = $1", c.pipeline).Scan(&dead); err != nil {
		return 0, 0, err
	}
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": c.env.Brokers, "group.id": "eosink-chaos-verifier",
		"go.logs.channel.enable": false})
	if err != nil {
		return 0, 0, err
	}
	defer cons.Close()
	for tp, np := range parts {
		if !sequenced && tp == c.topics[txTopicIdx] {
			continue
		}
		for p := int32(0); p < np; p++ {
			low, high, err := cons.QueryWatermarkOffsets(tp, p, 10000)
			if err != nil {
				return 0, 0, err
			}
			stored, ok := next[fmt.Sprintf("%s/%d", tp, p)]
			if !ok {
				stored = low
			}
			lag += max(high-stored, 0)
		}
	}
	return lag, dead, nil
}

// createTopics creates the topics with their partition counts, deleted at the end.
func createTopics(t *testing.T, brokers string, parts map[string]int) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var specs []kafka.TopicSpecification
	var names []string
	for tp, n := range parts {
		specs = append(specs, kafka.TopicSpecification{Topic: tp, NumPartitions: n, ReplicationFactor: 1})
		names = append(names, tp)
	}
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
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, names)
	})
	testbed.Eventually(t, 30*time.Second, "the topics in the metadata", func() (bool, string) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err.Error()
		}
		for tp, n := range parts {
			if m, ok := md.Topics[tp]; !ok || m.Error.Code() != kafka.ErrNoError || len(m.Partitions) != n {
				return false, "no topic " + tp
			}
		}
		return true, ""
	})
}
