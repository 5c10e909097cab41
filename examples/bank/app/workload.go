package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options shape the workload. Each worker's sequence of transactions is a function of Seed
// alone: only their interleaving depends on timing, and every transaction is retried whole
// after a deadlock or serialization failure, so the source ends the same for a seed.
type Options struct {
	Accounts   int           // accounts per table (Setup made them)
	Workers    int           // concurrent transfer workers
	Steps      int           // transfers per worker
	OrderSteps int           // order transactions (the order worker's steps), big ones included
	BigLines   int           // lines of the big order (10,000+)
	Pause      time.Duration // pause between a transfer worker's transactions
	OrderPause time.Duration // pause between the order worker's transactions
	Seed       uint64
}

// Workload runs the transactions on the source database at URL.
type Workload struct {
	URL       string
	O         Options
	Committed atomic.Int64 // source transactions committed
	Retried   atomic.Int64 // transactions retried after a deadlock or serialization failure
	Big       atomic.Int64 // transactions of BigLines rows or more committed
}

// Run runs the transfer workers and the order worker until each has done its steps.
func (w *Workload) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context, *pgx.Conn) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgx.Connect(ctx, w.URL)
			if err == nil {
				defer c.Close(context.Background())
				err = f(ctx, c)
			}
			if err != nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	for i := range w.O.Workers {
		r := rand.New(rand.NewPCG(w.O.Seed, uint64(i)))
		run(fmt.Sprintf("transfer worker %d", i), func(ctx context.Context, c *pgx.Conn) error {
			for range w.O.Steps {
				if err := w.transfer(ctx, c, r); err != nil {
					return err
				}
				if err := sleep(ctx, w.O.Pause); err != nil {
					return err
				}
			}
			return nil
		})
	}
	run("order worker", w.orders)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// inTx runs f in a transaction and commits it, again from the start after a deadlock or a
// serialization failure.
func (w *Workload) inTx(ctx context.Context, c *pgx.Conn, f func(pgx.Tx) error) error {
	for {
		err := pgx.BeginFunc(ctx, c, f)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
			w.Retried.Add(1)
			continue
		}
		if err == nil {
			w.Committed.Add(1)
		}
		return err
	}
}

type account struct {
	table string
	id    int64
}

var accountTables = [2]string{"accounts_a", "accounts_b"}

// transfer moves an amount from one account to another: in the other table seven times in
// ten (the transaction spans two topics), else in the same one (another key, so often another
// partition). Rows are locked in one global order (table, id), so transfers never deadlock.
func (w *Workload) transfer(ctx context.Context, c *pgx.Conn, r *rand.Rand) error {
	from := account{accountTables[r.IntN(2)], 1 + r.Int64N(int64(w.O.Accounts))}
	to := account{from.table, 0}
	if r.IntN(10) < 7 {
		to.table = accountTables[0]
		if from.table == to.table {
			to.table = accountTables[1]
		}
	}
	for to.id = 1 + r.Int64N(int64(w.O.Accounts)); to == from; to.id = 1 + r.Int64N(int64(w.O.Accounts)) {
	}
	cents := 1 + r.IntN(10000)
	amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	ops := []struct {
		a    account
		sign string
	}{{from, "-"}, {to, "+"}}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].a.table != ops[j].a.table {
			return ops[i].a.table < ops[j].a.table
		}
		return ops[i].a.id < ops[j].a.id
	})
	return w.inTx(ctx, c, func(tx pgx.Tx) error {
		for _, op := range ops {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE public.%s SET balance = balance %s $1::numeric WHERE id = $2`, op.a.table, op.sign),
				amount, op.a.id); err != nil {
				return err
			}
		}
		return nil
	})
}

// orders is the order worker: orders of 1 to 8 lines written in one transaction, three in
// four steps; whole orders deleted with their lines in one transaction, the others. At a
// quarter of its steps it writes an order of BigLines lines, at half it moves 1 from every
// account of accounts_a to the same account of accounts_b (2 x Accounts rows), at three
// quarters it deletes the big order.
func (w *Workload) orders(ctx context.Context, c *pgx.Conn) error {
	r := rand.New(rand.NewPCG(w.O.Seed, 1<<32))
	var live []int64
	next, big := int64(1), int64(0)
	n := w.O.OrderSteps
	for i := range n {
		var err error
		switch {
		case i == n/4:
			big, next = next, next+1
			err = w.order(ctx, c, big, w.O.BigLines, r)
		case i == n/2:
			err = w.inTx(ctx, c, func(tx pgx.Tx) error {
				// Lock in the transfers' order first, so that this never deadlocks with them.
				for _, t := range accountTables {
					if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT FROM public.%s ORDER BY id FOR UPDATE`, t)); err != nil {
						return err
					}
				}
				_, err := tx.Exec(ctx, `UPDATE public.accounts_a SET balance = balance - 1; UPDATE public.accounts_b SET balance = balance + 1`)
				return err
			})
			if err == nil {
				w.Big.Add(1)
			}
		case i == 3*n/4 && big != 0:
			err = w.deleteOrder(ctx, c, big)
			big = 0
			if err == nil {
				w.Big.Add(1)
			}
		case r.IntN(4) == 0 && len(live) > 0:
			j := r.IntN(len(live))
			err = w.deleteOrder(ctx, c, live[j])
			live = append(live[:j], live[j+1:]...)
		default:
			id := next
			next++
			err = w.order(ctx, c, id, 1+r.IntN(8), r)
			live = append(live, id)
		}
		if err != nil {
			return err
		}
		if err := sleep(ctx, w.O.OrderPause); err != nil {
			return err
		}
	}
	return nil
}

// order writes order id with its lines in one transaction; line k's id is id*100000+k.
func (w *Workload) order(ctx context.Context, c *pgx.Conn, id int64, lines int, r *rand.Rand) error {
	customer, qty, cents := r.IntN(1000), 1+r.IntN(20), 100+r.IntN(100000)
	err := w.inTx(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO public.orders VALUES ($1, $2, $3, $4)`, id, customer, lines, fmt.Sprintf("order %d", id)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO public.order_lines
			SELECT $1::bigint * 100000 + g, $1, $3 + g % 7, ($4::numeric + g) / 100 FROM generate_series(1, $2::int) g`, id, lines, qty, cents)
		return err
	})
	if err == nil && lines >= w.O.BigLines {
		w.Big.Add(1)
	}
	return err
}

// deleteOrder deletes order id and its lines in one transaction.
func (w *Workload) deleteOrder(ctx context.Context, c *pgx.Conn, id int64) error {
	return w.inTx(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM public.order_lines WHERE order_id = $1`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM public.orders WHERE id = $1`, id)
		return err
	})
}
