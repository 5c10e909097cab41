// Package app is the bank example's source database, workload, reader and checker
// (examples/bank/demo.sh, `make txdemo`): two account tables, so that a transfer between
// them spans two topics, and orders with their lines; a workload of concurrent transfers
// (the total balance never changes), orders written and deleted whole, and a few
// transactions of 10,000+ rows; a reader that queries the replica many times a second for
// the invariants a transaction-consistent replica keeps; and a comparison of the replica's
// rows with the source's. examples/bank/main.go is its command line.
package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Balance is each account's balance at the start, in whole units.
const Balance = 1000

// SourceDDL creates the source tables in public. The accounts are inserted by Setup.
const SourceDDL = `
CREATE TABLE public.accounts_a (id bigint PRIMARY KEY, balance numeric(14,2) NOT NULL);
CREATE TABLE public.accounts_b (id bigint PRIMARY KEY, balance numeric(14,2) NOT NULL);
CREATE TABLE public.orders (id bigint PRIMARY KEY, customer integer NOT NULL, lines integer NOT NULL, note text);
CREATE TABLE public.order_lines (id bigint PRIMARY KEY, order_id bigint NOT NULL REFERENCES public.orders,
	qty integer NOT NULL, price numeric(10,2) NOT NULL);
CREATE INDEX ON public.order_lines (order_id);`

// ReplicaDDL creates the replica tables in schema (an SQL identifier, quoted as needed): the
// same columns and primary keys. With fk, order_lines.order_id references orders, checked at
// each commit (DEFERRABLE INITIALLY DEFERRED): a transaction-consistent replica keeps it at
// every commit, while per-partition apply breaks it (a line's batch may commit before its
// order's), so the control replica goes without it and the reader counts the orphans.
func ReplicaDDL(schema string, fk bool) string {
	ref := ""
	if fk {
		ref = fmt.Sprintf(" REFERENCES %s.orders DEFERRABLE INITIALLY DEFERRED", schema)
	}
	return fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE %[1]s.accounts_a (id bigint PRIMARY KEY, balance numeric(14,2) NOT NULL);
CREATE TABLE %[1]s.accounts_b (id bigint PRIMARY KEY, balance numeric(14,2) NOT NULL);
CREATE TABLE %[1]s.orders (id bigint PRIMARY KEY, customer integer NOT NULL, lines integer NOT NULL, note text);
CREATE TABLE %[1]s.order_lines (id bigint PRIMARY KEY, order_id bigint NOT NULL%[2]s,
	qty integer NOT NULL, price numeric(10,2) NOT NULL);
CREATE INDEX ON %[1]s.order_lines (order_id);`, schema, ref)
}

// Tables are the replicated tables, each keyed by id.
var Tables = []string{"accounts_a", "accounts_b", "order_lines", "orders"}

// Total is the sum of all balances, on the source at every commit and on a consistent
// replica at every commit, for accounts accounts per table.
func Total(accounts int) string { return fmt.Sprintf("%d.00", 2*accounts*Balance) }

// Setup creates the source tables in src with accounts accounts in each account table and
// order 0 with three lines (so that every table's topic exists after the snapshot).
func Setup(ctx context.Context, src *pgx.Conn, accounts int) error {
	if _, err := src.Exec(ctx, SourceDDL+`
INSERT INTO public.orders VALUES (0, 0, 3, 'snapshot');
INSERT INTO public.order_lines SELECT g, 0, g, 1.00 FROM generate_series(1, 3) g;`); err != nil {
		return err
	}
	for _, t := range []string{"accounts_a", "accounts_b"} {
		if _, err := src.Exec(ctx, fmt.Sprintf(`INSERT INTO public.%s SELECT g, %d FROM generate_series(1, $1) g`, t, Balance), accounts); err != nil {
			return err
		}
	}
	return nil
}

// Warmup is one streamed source transaction, after the snapshot: it makes Debezium create the
// transaction topic (snapshot reads have no transaction).
const Warmup = `UPDATE public.orders SET note = 'streamed' WHERE id = 0`

// Querier is a pgx.Conn or pgx.Tx.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// rowsOf returns each row of table as text, by id.
func rowsOf(ctx context.Context, q Querier, schema, table string) ([]string, error) {
	rows, err := q.Query(ctx, fmt.Sprintf("SELECT t::text FROM %s t ORDER BY id", pgx.Identifier{schema, table}.Sanitize()))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Result is one table's comparison.
type Result struct {
	Table                       string
	Source, Replica, Mismatches int
}

// Compare reads every replicated table on both sides and compares the rows as text. It
// returns one Result per table and up to six differing rows, each with its count on the
// source minus its count on the replica.
func Compare(ctx context.Context, src, replica Querier, schema string) ([]Result, []string, error) {
	var out []Result
	var diff []string
	for _, table := range Tables {
		a, err := rowsOf(ctx, src, "public", table)
		if err != nil {
			return nil, nil, fmt.Errorf("source %s: %w", table, err)
		}
		b, err := rowsOf(ctx, replica, schema, table)
		if err != nil {
			return nil, nil, fmt.Errorf("replica %s: %w", table, err)
		}
		seen := map[string]int{}
		for _, r := range a {
			seen[r]++
		}
		for _, r := range b {
			seen[r]--
		}
		mis := 0
		for r, n := range seen {
			if n != 0 {
				mis++
				if len(diff) < 6 {
					diff = append(diff, fmt.Sprintf("%s %+d: %s", table, n, r))
				}
			}
		}
		out = append(out, Result{table, len(a), len(b), mis})
	}
	return out, diff, nil
}

// Mismatches sums the Results' mismatches.
func Mismatches(rs []Result) int {
	n := 0
	for _, r := range rs {
		n += r.Mismatches
	}
	return n
}

// Describe is one line per table: rows on each side and how many differ.
func Describe(rs []Result) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%s %d/%d rows, %d differ", r.Table, r.Replica, r.Source, r.Mismatches))
	}
	return strings.Join(s, "; ")
}
