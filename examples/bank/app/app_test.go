package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// source makes a source database with accounts accounts per table (dropped at the end).
func source(t *testing.T, e testbed.Env, accounts int) (string, *pgx.Conn) {
	t.Helper()
	u, _ := testbed.SourceDatabase(t, e, "bank")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := Setup(ctx, c, accounts); err != nil {
		t.Fatal(err)
	}
	return u, c
}

func small(seed uint64) Options {
	return Options{Accounts: 300, Workers: 6, Steps: 150, OrderSteps: 40, BigLines: 10000, Seed: seed}
}

// TestReaderOnTheSource points the reader at the source itself while the workload runs: the
// source is transaction-consistent, so the reader must count no violation (it does not see
// what is not there) yet query often; then a change that breaks the total must be counted.
func TestReaderOnTheSource(t *testing.T) {
	e := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := small(7)
	u, c := source(t, e, o.Accounts)
	log := &logBuf{}
	rd := &Reader{URL: u, Schema: "public", Accounts: o.Accounts, Every: 10 * time.Millisecond, Conns: 2, Log: log}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rd.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()
	testbed.Eventually(t, 30*time.Second, "the reader armed", func() (bool, string) { return rd.Armed(), log.String() })
	w := &Workload{URL: u, O: o}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := w.Committed.Load(), int64(o.Workers*o.Steps+o.OrderSteps); got != want {
		t.Errorf("committed %d transactions, want %d", got, want)
	}
	if w.Big.Load() != 3 {
		t.Errorf("%d transactions of 10,000+ rows, want 3", w.Big.Load())
	}
	s := rd.Stats()
	if s.Violations != 0 || s.Errors != 0 {
		t.Fatalf("the reader saw %d violations (%s) and %d errors on the consistent source:\n%s", s.Violations, s.KindText(), s.Errors, log.String())
	}
	if s.Queries < 50 {
		t.Fatalf("the reader made only %d queries in %.1f s", s.Queries, s.Seconds)
	}
	// Half a transfer, and a line without its order's count: both must be seen.
	if _, err := c.Exec(ctx, `UPDATE public.accounts_a SET balance = balance + 1 WHERE id = 1;
		INSERT INTO public.orders VALUES (999999, 0, 2, 'short'); INSERT INTO public.order_lines VALUES (99999900001, 999999, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "violations counted", func() (bool, string) {
		s := rd.Stats()
		return s.Kinds[0] > 0 && s.Kinds[3] > 0, s.KindText()
	})
	if !strings.Contains(log.String(), "reader: violation") {
		t.Errorf("no violation logged:\n%s", log.String())
	}
}

// TestWorkloadDeterministic runs the concurrent workload twice with one seed: both sources
// end equal; another seed ends elsewhere, so the comparison can tell.
func TestWorkloadDeterministic(t *testing.T) {
	e := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var conns []*pgx.Conn
	for _, seed := range []uint64{11, 11, 12} {
		o := small(seed)
		o.Steps, o.BigLines = 60, 10
		u, c := source(t, e, o.Accounts)
		if err := (&Workload{URL: u, O: o}).Run(ctx); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	rs, diff, err := Compare(ctx, conns[0], conns[1], "public")
	if err != nil {
		t.Fatal(err)
	}
	if Mismatches(rs) != 0 {
		t.Fatalf("one seed, two ends: %s\n%s", Describe(rs), strings.Join(diff, "\n"))
	}
	if rs, _, err = Compare(ctx, conns[0], conns[2], "public"); err != nil {
		t.Fatal(err)
	}
	if Mismatches(rs) == 0 {
		t.Fatalf("two seeds, one end: %s", Describe(rs))
	}
	var sum string
	if err := conns[2].QueryRow(ctx, `SELECT ((SELECT sum(balance) FROM public.accounts_a) + (SELECT sum(balance) FROM public.accounts_b))::text`).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != Total(300) {
		t.Fatalf("total %s, want %s", sum, Total(300))
	}
}

// logBuf is an io.Writer that the reader's goroutines and the test share.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
