package cdc

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCStreamsLargeTransactions: source transactions far larger than the memory bound
// (max_held_events: 300; each large one moves one unit from every account of one table
// to every account of the other: 2 × 1,500 changes) through real Debezium, applied in
// consistency: transaction, mixed with small transfers. Each large one streams into one
// open replica transaction; a reader checks the replica's total balance 50 times a second
// and never sees a transaction in part, through a SIGKILL of `eosink run` in the middle of
// a stream; the replica equals the source and the watermark counts every transaction once.
func TestCDCStreamsLargeTransactions(t *testing.T) {
	const accounts = 1500
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := newBankBed(t, "cdcstream", accounts, nil)
	e, src, db, replica, offsets, txTopic, topics := b.e, b.src, b.db, b.replica, b.offsets, b.txTopic, b.topics
	const total = 2 * accounts * 1000

	var committed atomic.Int64
	run := func(stmts ...string) {
		t.Helper()
		tx, err := src.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		committed.Add(1)
	}
	large := func(from, to string) {
		run(`UPDATE public.`+from+` SET balance = balance - 1`, `UPDATE public.`+to+` SET balance = balance + 1`)
	}
	small := func(i int) {
		id := i%accounts + 1
		run(fmt.Sprintf(`UPDATE public.accounts_a SET balance = balance - 7 WHERE id = %d`, id),
			fmt.Sprintf(`UPDATE public.accounts_b SET balance = balance + 7 WHERE id = %d`, id))
	}
	for i := range 5 {
		small(i)
	}
	waitTopics(t, e.Brokers, append([]string{txTopic}, topics...))

	pipeline := testbed.Name(t, "p")
	config := txConfig(t, e, pipeline, offsets, replica, txTopic, "member-a", "transaction", topics, "max_held_events: 300")
	cli(t, "migrate", "up", "-config", config)
	stop := make(chan struct{})
	reads, violations, readerDone := bankReader(ctx, db, replica, accounts, total, stop)
	p := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	p.WaitOutput("set: owned", 60*time.Second)
	equal := func(what string) { t.Helper(); b.equal(what, 3*time.Minute) }
	large("accounts_a", "accounts_b")
	small(10)
	large("accounts_b", "accounts_a")
	small(11)
	large("accounts_a", "accounts_b")
	equal("three large transactions and small ones")
	streams := func(out string) int {
		return strings.Count(out, "too large to hold streams into one replica transaction")
	}
	if n := streams(p.Output()); n != 3 {
		t.Fatalf("%d source transactions streamed, want the three of 3,000 changes over a bound of 300:\n%s", n, p.Output())
	}
	if n := strings.Count(p.Output(), "the unit streamed is committed"); n != 3 {
		t.Fatalf("%d streamed commits logged, want one per large transaction (3)", n)
	}

	var lines []string
	for _, l := range strings.Split(p.Output(), "\n") {
		if strings.Contains(l, "streams into one") || strings.Contains(l, "streamed is committed") {
			lines = append(lines, l)
		}
	}
	t.Logf("the streams:\n%s", strings.Join(lines, "\n"))

	// SIGKILL in the middle of a stream: nothing of it was committed; after the restart it
	// streams again, from the stored positions, whole.
	before := streams(p.Output())
	large("accounts_b", "accounts_a")
	testbed.Eventually(t, time.Minute, "a stream begins", func() (bool, string) {
		return streams(p.Output()) > before, ""
	})
	time.Sleep(300 * time.Millisecond)
	done := strings.Count(p.Output(), "the unit streamed is committed")
	p.Signal(syscall.SIGKILL)
	_ = p.Wait(30 * time.Second)
	midStream := strings.Count(p.Output(), "the unit streamed is committed") == done
	p = testbed.StartProcess(t, eosinkBin, "eosink run (again)", []string{"run", "-config", config})
	p.WaitOutput("set: owned", 60*time.Second)
	small(12)
	large("accounts_a", "accounts_b")
	equal("after the SIGKILL mid-stream")

	close(stop)
	<-readerDone
	if reads.Load() < 100 {
		t.Fatalf("the reader read the replica only %d times", reads.Load())
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("the reader saw %d of %d reads with a total other than the constant: a transaction applied in part", v, reads.Load())
	}
	var applied int64
	if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT transactions FROM %s WHERE pipeline = $1`,
		pgx.Identifier{offsets, "cdc_tx_watermarks"}.Sanitize()), pipeline).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != committed.Load() {
		t.Fatalf("the watermark counts %d source transactions applied, the source committed %d", applied, committed.Load())
	}
	t.Logf("%d source transactions (5 of 3,000 changes), %d applied, %d reads, 0 partial; killed mid-stream: %v",
		committed.Load(), applied, reads.Load(), midStream)
	if !midStream {
		t.Errorf("the SIGKILL came after the stream committed: it did not test a kill mid-stream")
	}
	p.StopClean(60 * time.Second)
}
