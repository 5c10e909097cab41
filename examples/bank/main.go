// Command bank is the bank example's helper (examples/bank/demo.sh, `make txdemo`, runs it;
// bin/cdc's wait, cleanup and free-port do the rest):
//
//	bank setup -source DB -replica SCHEMA -accounts N [-fk]   create the source database with
//	           its tables and N accounts in each account table, and the replica tables
//	bank run   -source DB -replica SCHEMA -accounts N [...]   the reader and the workload
//	           together: wait until the replica holds the initial accounts, run the workload
//	           while the reader queries the replica, then (once the -verify-when file exists)
//	           wait for the replica to equal the source and print the counts
//	bank warmup -source DB                                  one streamed source transaction
//	           (Debezium creates the transaction topic at the first)
//	bank partitions -topics T,... [-one T]                   print each topic's partitions;
//	           fail when one is missing or when T (the transaction topic) has more than one
//
// The source database is a database in the cluster of DATABASE_URL (wal_level=logical); the
// replica schema is in DATABASE_URL's database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/bank/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bank setup|run|warmup|partitions [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("bank "+cmd, flag.ExitOnError)
	source := fs.String("source", "bank_source", "source database (in the cluster of DATABASE_URL)")
	replica := fs.String("replica", "bank", "replica schema (in DATABASE_URL's database)")
	accounts := fs.Int("accounts", 5000, "accounts per account table")
	fk := fs.Bool("fk", false, "setup: the replica's order_lines.order_id references orders (DEFERRABLE INITIALLY DEFERRED)")
	var o app.Options
	fs.IntVar(&o.Workers, "workers", 8, "run: concurrent transfer workers")
	fs.IntVar(&o.Steps, "steps", 600, "run: transfers per worker")
	fs.IntVar(&o.OrderSteps, "order-steps", 160, "run: order transactions (the big ones included; at least 8)")
	fs.IntVar(&o.BigLines, "big-lines", 10000, "run: lines of the big order")
	fs.DurationVar(&o.Pause, "pause", 30*time.Millisecond, "run: pause between a transfer worker's transactions")
	fs.DurationVar(&o.OrderPause, "order-pause", 120*time.Millisecond, "run: pause between the order worker's transactions")
	fs.Uint64Var(&o.Seed, "seed", 1, "run: workload seed")
	every := fs.Duration("every", 25*time.Millisecond, "run: the reader's query interval, per connection")
	conns := fs.Int("conns", 2, "run: the reader's connections, querying at once (staggered)")
	verifyWhen := fs.String("verify-when", "", "run: after the workload, wait for this file to exist before comparing")
	wait := fs.Duration("wait", 3*time.Minute, "run: wait up to this long for the replica to equal the source")
	summary := fs.String("summary", "", "run: write the counts here, one key=value a line")
	topics := fs.String("topics", "", "partitions: comma-separated topics")
	one := fs.String("one", "", "partitions: the topic that must have one partition")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "setup":
		err = setup(ctx, *source, *replica, *accounts, *fk)
	case "run":
		o.Accounts = *accounts
		if o.OrderSteps < 8 {
			err = errors.New("-order-steps must be at least 8")
			break
		}
		err = run(ctx, runArgs{source: *source, replica: *replica, o: o, every: *every, conns: *conns, verifyWhen: *verifyWhen, wait: *wait, summary: *summary})
	case "warmup":
		err = warmup(ctx, *source)
	case "partitions":
		err = partitions(strings.Split(*topics, ","), *one)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bank "+cmd+":", err)
		os.Exit(1)
	}
}

// sourceURL is DATABASE_URL naming database db instead; "" keeps DATABASE_URL's.
func sourceURL(db string) (string, error) {
	u, err := url.Parse(os.Getenv("DATABASE_URL"))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("DATABASE_URL must be a postgres:// URL")
	}
	if db != "" {
		u.Path, u.RawPath = "/"+db, ""
	}
	return u.String(), nil
}

func connect(ctx context.Context, db string) (*pgx.Conn, error) {
	u, err := sourceURL(db)
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, u)
}

func setup(ctx context.Context, source, replica string, accounts int, fk bool) error {
	admin, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{source}.Sanitize()); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, app.ReplicaDDL(pgx.Identifier{replica}.Sanitize(), fk)); err != nil {
		return err
	}
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	if err := app.Setup(ctx, src, accounts); err != nil {
		return err
	}
	key := "without a foreign key (partition mode would break it at commit; the reader counts orphan lines instead)"
	if fk {
		key = "with order_lines.order_id REFERENCES orders DEFERRABLE INITIALLY DEFERRED"
	}
	fmt.Printf("source database %s: %d accounts in accounts_a and in accounts_b, total balance %s; replica tables in schema %s, %s\n",
		source, accounts, app.Total(accounts), replica, key)
	return nil
}

func warmup(ctx context.Context, source string) error {
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	_, err = src.Exec(ctx, app.Warmup)
	return err
}

type runArgs struct {
	source, replica string
	o               app.Options
	every           time.Duration
	conns           int
	verifyWhen      string
	wait            time.Duration
	summary         string
}

func run(ctx context.Context, a runArgs) error {
	srcURL, err := sourceURL(a.source)
	if err != nil {
		return err
	}
	replicaURL, _ := sourceURL("")
	rd := &app.Reader{URL: replicaURL, Schema: a.replica, Accounts: a.o.Accounts, Every: a.every, Conns: a.conns, Log: os.Stdout}
	rctx, stopReader := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	go func() { rd.Run(rctx); close(readerDone) }()
	defer func() { stopReader(); <-readerDone }()

	fmt.Printf("reader: querying schema %s every %s on each of %d connections; waiting for the replica to hold the initial accounts\n", a.replica, a.every, a.conns)
	for deadline := time.Now().Add(3 * time.Minute); !rd.Armed(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the replica did not hold the %d initial accounts with the total %s within 3 minutes (is the sink running?)", 2*a.o.Accounts, app.Total(a.o.Accounts))
		}
	}

	w := &app.Workload{URL: srcURL, O: a.o}
	fmt.Printf("workload: %d transfer workers x %d transfers, %d order transactions (an order of %d lines, a move of 1 between all %d account pairs, the big order's delete), seed %d\n",
		a.o.Workers, a.o.Steps, a.o.OrderSteps, a.o.BigLines, a.o.Accounts, a.o.Seed)
	werr := make(chan error, 1)
	t0 := time.Now()
	go func() { werr <- w.Run(ctx) }()
	for done := false; !done; {
		select {
		case err := <-werr:
			if err != nil {
				return fmt.Errorf("workload: %w", err)
			}
			done = true
		case <-time.After(5 * time.Second):
			s := rd.Stats()
			fmt.Printf("workload: %d transactions committed; reader: %d queries, %d violations\n", w.Committed.Load(), s.Queries, s.Violations)
		}
	}
	fmt.Printf("workload done: %d transactions committed in %s (%d retried after a deadlock, %d of 10,000+ rows)\n",
		w.Committed.Load(), time.Since(t0).Round(time.Second), w.Retried.Load(), w.Big.Load())

	if a.verifyWhen != "" {
		fmt.Printf("waiting for %s (the faults done) before comparing\n", a.verifyWhen)
		for {
			if _, err := os.Stat(a.verifyWhen); err == nil {
				break
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	rs, diff, err := catchUp(ctx, srcURL, replicaURL, a.replica, a.wait)
	if err != nil {
		return err
	}
	stopReader()
	<-readerDone
	s := rd.Stats()
	for _, r := range rs {
		fmt.Printf("%s: source rows %d, replica rows %d, mismatches %d\n", r.Table, r.Source, r.Replica, r.Mismatches)
	}
	if len(diff) > 0 {
		fmt.Printf("some differing rows (+: only on the source, -: only on the replica):\n  %s\n", strings.Join(diff, "\n  "))
	}
	fmt.Printf("reader: %d queries in %.1f s (%.1f per second, mean %s, slowest %s), %d failed; violations: %d (%s)\n",
		s.Queries, s.Seconds, s.PerSecond(), s.Mean.Round(100*time.Microsecond), s.Slowest.Round(time.Millisecond), s.Errors, s.Violations, s.KindText())
	if a.summary != "" {
		out := fmt.Sprintf("transactions=%d\nviolations=%d\nqueries=%d\nqueries_per_second=%.1f\nreader_errors=%d\nmismatches=%d\nbig_transactions=%d\nkinds=%s\n",
			w.Committed.Load(), s.Violations, s.Queries, s.PerSecond(), s.Errors, app.Mismatches(rs), w.Big.Load(), s.KindText())
		if err := os.WriteFile(a.summary, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// catchUp compares the replica with the source until they are equal or wait has passed, and
// returns the last comparison.
func catchUp(ctx context.Context, srcURL, replicaURL, schema string, wait time.Duration) ([]app.Result, []string, error) {
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		return nil, nil, err
	}
	defer src.Close(context.Background())
	db, err := pgx.Connect(ctx, replicaURL)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close(context.Background())
	deadline, last := time.Now().Add(wait), time.Now()
	for {
		rs, diff, err := app.Compare(ctx, src, db, schema)
		if err != nil {
			return nil, nil, err
		}
		if app.Mismatches(rs) == 0 {
			fmt.Println("the replica equals the source")
			return rs, diff, nil
		}
		if time.Now().After(deadline) {
			fmt.Printf("the replica still differs from the source after %s\n", wait)
			return rs, diff, nil
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			fmt.Printf("catching up: %s ...\n", app.Describe(rs))
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
