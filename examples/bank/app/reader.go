package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reader queries the replica every Every on each of Conns connections for the invariants,
// each query one statement, so one snapshot of what the replica committed:
//   - balance: the sum of all balances across accounts_a and accounts_b is Total;
//   - accounts: every account is there (2 x Accounts rows);
//   - orphan lines: no order_lines row whose order is missing;
//   - line counts: every order has as many lines as its lines column says.
//
// It counts only once it has seen the replica hold every account with the total (the
// initial snapshot applied); a query that breaks any invariant is one violation.
type Reader struct {
	URL, Schema string
	Accounts    int
	Every       time.Duration // each connection's query interval
	Conns       int           // connections querying at once, staggered
	Log         io.Writer     // the first violations and the errors, one line each, written under mu

	mu         sync.Mutex
	armedAt    time.Time
	queries    int64
	violations int64
	kinds      [4]int64 // balance, accounts, orphan lines, line counts
	errors     int64
	slowest    time.Duration
	took       time.Duration // all queries' time, for the mean
}

var kindNames = [4]string{"balance", "accounts", "orphan lines", "line counts"}

// Stats is what the reader saw.
type Stats struct {
	Armed      bool
	Queries    int64
	Violations int64
	Kinds      [4]int64
	Errors     int64
	Seconds    float64
	Slowest    time.Duration
	Mean       time.Duration
}

// PerSecond is the queries' rate since the reader was armed.
func (s Stats) PerSecond() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return float64(s.Queries) / s.Seconds
}

// KindText describes the violations by invariant.
func (s Stats) KindText() string {
	var p []string
	for i, n := range s.Kinds {
		p = append(p, fmt.Sprintf("%s %d", kindNames[i], n))
	}
	return strings.Join(p, ", ")
}

// Stats returns the counts so far.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Armed: !r.armedAt.IsZero(), Queries: r.queries, Violations: r.violations, Kinds: r.kinds, Errors: r.errors, Slowest: r.slowest}
	if r.queries > 0 {
		s.Mean = r.took / time.Duration(r.queries)
	}
	if s.Armed {
		s.Seconds = time.Since(r.armedAt).Seconds()
	}
	return s
}

// Armed reports whether the reader has seen the full initial state and counts.
func (r *Reader) Armed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.armedAt.IsZero()
}

func (r *Reader) query() string {
	s := pgx.Identifier{r.Schema}.Sanitize()
	return fmt.Sprintf(`SELECT
  (SELECT coalesce(sum(balance), 0)::text || ' ' || count(*)
     FROM (SELECT balance FROM %[1]s.accounts_a UNION ALL SELECT balance FROM %[1]s.accounts_b) t),
  (SELECT count(*) FROM %[1]s.order_lines l WHERE NOT EXISTS (SELECT 1 FROM %[1]s.orders o WHERE o.id = l.order_id)),
  (SELECT count(*) FROM %[1]s.orders o LEFT JOIN (SELECT order_id, count(*) AS n FROM %[1]s.order_lines GROUP BY order_id) c
     ON c.order_id = o.id WHERE o.lines <> coalesce(c.n, 0))`, s)
}

// Run queries until ctx ends, on Conns connections at once (default 1), each every Every.
func (r *Reader) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range max(r.Conns, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Staggered, so that the queries spread over the interval.
			if sleep(ctx, r.Every*time.Duration(i)/time.Duration(max(r.Conns, 1))) == nil {
				r.loop(ctx)
			}
		}()
	}
	wg.Wait()
}

func (r *Reader) loop(ctx context.Context) {
	q, total := r.query(), Total(r.Accounts)
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	tick := time.NewTicker(r.Every)
	defer tick.Stop()
	for ctx.Err() == nil {
		var err error
		if c == nil {
			c, err = pgx.Connect(ctx, r.URL)
		}
		if err == nil {
			err = r.check(ctx, c, q, total)
		}
		if err != nil {
			r.fail(ctx, err)
			if c != nil {
				c.Close(context.Background())
				c = nil
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// check runs the query once and counts what it saw.
func (r *Reader) check(ctx context.Context, c *pgx.Conn, q, total string) error {
	var orphans, counts, accounts int64
	var sumCount, sum string
	t0 := time.Now()
	if err := c.QueryRow(ctx, q).Scan(&sumCount, &orphans, &counts); err != nil {
		return err
	}
	took := time.Since(t0)
	if _, err := fmt.Sscan(sumCount, &sum, &accounts); err != nil {
		return fmt.Errorf("sum and count %q: %w", sumCount, err)
	}
	// Both sides are numeric(14,2): the sum's text has two decimals, as Total's.
	bad := [4]bool{sum != total, accounts != int64(2*r.Accounts), orphans != 0, counts != 0}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armedAt.IsZero() {
		if bad[0] || bad[1] {
			return nil
		}
		r.armedAt = time.Now()
		fmt.Fprintf(r.Log, "reader: the replica holds all %d accounts with the total %s: counting from now\n", 2*r.Accounts, total)
	}
	r.queries++
	r.took += took
	r.slowest = max(r.slowest, took)
	v := false
	for i, b := range bad {
		if b {
			r.kinds[i]++
			v = true
		}
	}
	if v {
		r.violations++
		if r.violations <= 10 {
			fmt.Fprintf(r.Log, "reader: violation at %s: sum %s (want %s), accounts %d (want %d), orphan lines %d, orders with another line count %d\n",
				time.Now().Format("15:04:05.000"), sum, total, accounts, 2*r.Accounts, orphans, counts)
		}
	}
	return nil
}

func (r *Reader) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors++
	if r.errors <= 5 {
		fmt.Fprintf(r.Log, "reader: query failed (not a violation; retrying): %v\n", err)
	}
}
