package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/testbed"
)

const txAccounts = 30 // per table

const accountsDDL = `CREATE TABLE %s (id int PRIMARY KEY, balance bigint NOT NULL)`

// txConfig writes the pipeline config of a cdc sink in consistency: transaction.
func txConfig(t *testing.T, e testbed.Env, pipeline, offsets, replica, txTopic, instance, consistency string, topics []string, more ...string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	extra := ""
	if consistency == "transaction" {
		extra = fmt.Sprintf("  transaction_topic: %s\n  lease_timeout: 3s\n", txTopic)
	}
	for _, m := range more {
		extra += "  " + m + "\n"
	}
	yaml := fmt.Sprintf(`pipeline: %s
instance_id: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
database:
  url: %s
  schema: %s
batch:
  max_records: 50
sink:
  type: cdc
  table: "%s.$${source.table}"
  consistency: %s
%s`, pipeline, instance, e.Brokers, pipeline, strings.Join(topics, ", "), e.DatabaseURL, offsets, replica, consistency, extra)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// bankReader queries the replica's total balance until stop, counting the reads that see
// a total other than want, once both tables hold their accounts (the snapshot applied).
func bankReader(ctx context.Context, db *pgxpool.Pool, replica string, accounts int, want int64, stop <-chan struct{}) (reads, violations *atomic.Int64, done <-chan struct{}) {
	reads, violations = new(atomic.Int64), new(atomic.Int64)
	ch := make(chan struct{})
	q := fmt.Sprintf(`SELECT (SELECT coalesce(sum(balance), 0) FROM %s) + (SELECT coalesce(sum(balance), 0) FROM %s),
		(SELECT count(*) FROM %[1]s) + (SELECT count(*) FROM %[2]s)`,
		pgx.Identifier{replica, "accounts_a"}.Sanitize(), pgx.Identifier{replica, "accounts_b"}.Sanitize())
	go func() {
		defer close(ch)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			var sum, n int64
			if err := db.QueryRow(ctx, q).Scan(&sum, &n); err != nil {
				continue
			}
			if n < 2*int64(accounts) {
				continue // the snapshot is still being applied
			}
			reads.Add(1)
			if sum != want {
				violations.Add(1)
			}
		}
	}()
	return reads, violations, ch
}

// TestCDCTransactionConsistency: transfers between two tables (two topics of three
// partitions each) through real Debezium with transaction metadata, applied by two
// `eosink run` members in consistency: transaction. A reader checks the replica's total
// balance 50 times a second: it never sees a transfer in part, through a SIGKILL of the
// lease holder (the standby takes over), a paused holder that resumes after a takeover (a
// zombie, fenced), a Debezium restart (events sent again), and the end state equals the
// source.
func TestCDCTransactionConsistency(t *testing.T) {
	reads, violations := bank(t, "transaction")
	if v := violations; v != 0 {
		t.Fatalf("the reader saw %d of %d reads with a total other than the constant: a transfer applied in part", v, reads)
	}
}

// TestCDCPartitionModeShowsPartialTransfers is the control of
// TestCDCTransactionConsistency: the same transfers and reader in consistency: partition
// (one member, no faults) see transfers in part, so the reader can see what it looks for.
func TestCDCPartitionModeShowsPartialTransfers(t *testing.T) {
	reads, violations := bank(t, "partition")
	if violations == 0 {
		t.Fatalf("the reader saw no partial transfer in %d reads of a replica applied per partition: it cannot tell", reads)
	}
	t.Logf("partition mode: %d of %d reads saw a transfer in part", violations, reads)
}

// bank runs the transfers through Debezium into a replica in consistency, with a reader,
// and returns its reads and violations once the replica equals the source. In
// transaction mode two members run, and the holder is killed mid-stream.
func bank(t *testing.T, consistency string) (reads, violations int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b0 := newBankBed(t, "cdctx", txAccounts, map[string]string{"offset.flush.interval.ms": "5000"})
	e, src, db, replica, offsets, dbz, d, txTopic, topics := b0.e, b0.src, b0.db, b0.replica, b0.offsets, b0.dbz, b0.d, b0.txTopic, b0.topics
	const total = 2 * txAccounts * 1000

	var transfers atomic.Int64
	transfer := func(rng *rand.Rand) {
		from, to := rng.IntN(txAccounts)+1, rng.IntN(txAccounts)+1
		ft, tt := "accounts_a", "accounts_b"
		if rng.IntN(2) == 0 {
			ft, tt = tt, ft
		}
		amount := rng.IntN(50) + 1
		tx, err := src.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE public.%s SET balance = balance - $1 WHERE id = $2`, ft), amount, from); err != nil {
			t.Error(err)
			return
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE public.%s SET balance = balance + $1 WHERE id = $2`, tt), amount, to); err != nil {
			t.Error(err)
			return
		}
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
			return
		}
		transfers.Add(1)
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	work := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		for range n {
			transfer(rng)
		}
	}
	work(20) // the transaction topic and both data topics exist
	waitTopics(t, e.Brokers, append([]string{txTopic}, topics...))

	pipeline := testbed.Name(t, "p")
	cfgA := txConfig(t, e, pipeline, offsets, replica, txTopic, "member-a", consistency, topics)
	cfgB := txConfig(t, e, pipeline, offsets, replica, txTopic, "member-b", consistency, topics)
	cli(t, "migrate", "up", "-config", cfgA)

	stop := make(chan struct{})
	nreads, nviolations, readerDone := bankReader(ctx, db, replica, txAccounts, total, stop)
	a := testbed.StartProcess(t, eosinkBin, "eosink run (a)", []string{"run", "-config", cfgA})
	b := a
	sequenced := consistency == "transaction"
	if sequenced {
		a.WaitOutput("set: owned", 60*time.Second)
		b = testbed.StartProcess(t, eosinkBin, "eosink run (b)", []string{"run", "-config", cfgB})
		b.WaitOutput("standing by", 60*time.Second)
	}

	equal := func(what string) { t.Helper(); b0.equal(what, 2*time.Minute) }
	work(150)
	equal("streamed")
	if !sequenced {
		work(150)
		equal("streamed more")
		close(stop)
		<-readerDone
		a.StopClean(60 * time.Second)
		return nreads.Load(), nviolations.Load()
	}

	// The holder dies mid-stream; the standby takes the lease after its timeout.
	go work(150)
	time.Sleep(500 * time.Millisecond)
	a.Signal(syscall.SIGKILL)
	b.WaitOutput("set: owned", 60*time.Second)
	work(50)
	equal("after the takeover")
	if st := cli(t, "status", "-config", cfgB); !strings.Contains(st, "lease: "+pipeline+" "+txTopic+": held by member-b") {
		t.Fatalf("status does not show member-b holding the lease:\n%s", st)
	}

	// A zombie: the holder pauses past the lease timeout, the standby takes over, the old
	// holder resumes: it must not commit again, and stands by.
	a = testbed.StartProcess(t, eosinkBin, "eosink run (a, again)", []string{"run", "-config", cfgA})
	a.WaitOutput("standing by", 60*time.Second)
	b.Signal(syscall.SIGSTOP)
	a.WaitOutput("set: owned", 60*time.Second)
	work(50)
	b.Signal(syscall.SIGCONT)
	b.WaitOutput("another instance owns the set now", 60*time.Second)
	work(20)
	equal("after the zombie resumed")

	// Debezium restarts and sends its last events again.
	d.Kill()
	work(30)
	startDebezium(t, dbz)
	work(50)
	equal("after the Debezium restart")

	// A replay from the log's start, online: everything at or before the watermark is
	// skipped, nothing is applied twice.
	resumed := func() int { return strings.Count(a.Output(), "resuming after the stored watermark") }
	before := resumed()
	cli(t, "offsets", "set", "-config", cfgA, "-to", "earliest", "-reason", "replay test", "-operator", "test")
	work(20)
	equal("after the replay")
	testbed.Eventually(t, time.Minute, "the holder reads again from the new positions", func() (bool, string) {
		return resumed() > before, a.Output()
	})

	close(stop)
	<-readerDone
	if nreads.Load() < 100 {
		t.Fatalf("the reader read the replica only %d times", nreads.Load())
	}
	var applied int64
	if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT transactions FROM %s WHERE pipeline = $1`,
		pgx.Identifier{offsets, "cdc_tx_watermarks"}.Sanitize()), pipeline).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != transfers.Load() {
		t.Fatalf("the watermark counts %d source transactions applied, the workload committed %d", applied, transfers.Load())
	}
	t.Logf("%d transfers, %d source transactions applied, %d reads of the replica, %d saw a partial transfer",
		transfers.Load(), applied, nreads.Load(), nviolations.Load())
	b.StopClean(60 * time.Second)
	a.StopClean(60 * time.Second)
	return nreads.Load(), nviolations.Load()
}

// bankBed is a source database with two account tables, a replica schema with the same
// tables, and real Debezium capturing both with transaction metadata (a one-partition
// transaction topic, data topics of three partitions).
type bankBed struct {
	t                *testing.T
	e                testbed.Env
	src              *pgx.Conn
	db               *pgxpool.Pool
	replica, offsets string
	dbz              testbed.DebeziumOptions
	d                *testbed.Debezium
	txTopic          string
	topics           []string // the data topics: accounts_a's, accounts_b's
}

func newBankBed(t *testing.T, name string, accounts int, worker map[string]string) *bankBed {
	t.Helper()
	b := &bankBed{t: t, e: testbed.Require(t)}
	srcURL, _ := testbed.SourceDatabase(t, b.e, name)
	b.src = connect(t, srcURL)
	execAll(t, b.src, fmt.Sprintf(accountsDDL, "public.accounts_a"), fmt.Sprintf(accountsDDL, "public.accounts_b"),
		fmt.Sprintf(`INSERT INTO public.accounts_a SELECT g, 1000 FROM generate_series(1, %d) g`, accounts),
		fmt.Sprintf(`INSERT INTO public.accounts_b SELECT g, 1000 FROM generate_series(1, %d) g`, accounts))
	b.db = testbed.Pool(t, b.e)
	b.replica, b.offsets = testbed.Schema(t, b.e), testbed.Schema(t, b.e)
	execAll(t, b.db, "CREATE SCHEMA "+pgx.Identifier{b.replica}.Sanitize(),
		fmt.Sprintf(accountsDDL, pgx.Identifier{b.replica, "accounts_a"}.Sanitize()),
		fmt.Sprintf(accountsDDL, pgx.Identifier{b.replica, "accounts_b"}.Sanitize()))
	prefix := testbed.Name(t, "tx")
	b.dbz = testbed.DebeziumOptions{Brokers: b.e.Brokers, SourceURL: srcURL, Tables: []string{"public.accounts_a", "public.accounts_b"},
		TopicPrefix: prefix, Partitions: 3, Dir: t.TempDir(), Worker: worker,
		Connector: map[string]string{"provide.transaction.metadata": "true",
			"topic.creation.groups":                 "txn",
			"topic.creation.txn.include":            strings.ReplaceAll(prefix, ".", `\.`) + `\.transaction`,
			"topic.creation.txn.partitions":         "1",
			"topic.creation.txn.replication.factor": "1"}}
	b.d = startDebezium(t, b.dbz)
	b.txTopic = prefix + ".transaction"
	b.topics = []string{b.d.Topic("public.accounts_a"), b.d.Topic("public.accounts_b")}
	return b
}

// equal waits until the replica's accounts equal the source's, as text.
func (b *bankBed) equal(what string, within time.Duration) {
	t := b.t
	t.Helper()
	testbed.Eventually(t, within, what, func() (bool, string) {
		var diff []string
		for _, tb := range []string{"accounts_a", "accounts_b"} {
			diff = append(diff, diffRows(rowsText(t, b.src, "public."+tb), rowsText(t, b.db, pgx.Identifier{b.replica, tb}.Sanitize()))...)
		}
		if len(diff) > 5 {
			diff = append(diff[:5], fmt.Sprintf("… %d rows differ", len(diff)))
		}
		return len(diff) == 0, strings.Join(diff, "\n")
	})
}
