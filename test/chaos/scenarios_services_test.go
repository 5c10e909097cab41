package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/internal/testbed"
)

// 7. PostgreSQL restarts, fast and immediate, on a private cluster (a restart of the shared
// one would disturb the other tests). Nothing committed may be lost; the sinks resume.
func scenarioPGRestart(mode string) func(t *testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		bed := testbed.StartBed(t, "pg")
		env := testbed.Require(t)
		env.DatabaseURL = bed.Env.DatabaseURL
		r := newRun(t, env, 4)
		ctx, stop := context.WithCancel(context.Background())
		wait := r.produce(ctx, 400, 200*time.Millisecond)
		procs := []*testbed.Process{r.sink(base()), r.sink(base())}
		for end := time.Now().Add(phase); time.Now().Before(end); {
			time.Sleep(time.Duration(1500+r.rng.IntN(2000)) * time.Millisecond)
			bed.Do(t, "pg-restart", mode)
			r.fault("pg_ctl restart -m " + mode)
		}
		r.endFaults(stop, wait)
		r.finish(180 * time.Second)
		stopAll(procs, 60*time.Second)
	}
}

// 9. The broker is killed with SIGKILL and restarted (a private broker). The sinks must not
// reset any position and must resume.
func scenarioBrokerKill(t *testing.T) {
	t.Parallel()
	bed := testbed.StartBed(t, "kafka")
	env := testbed.Require(t)
	env.Brokers = bed.Env.Brokers
	r := newRun(t, env, 4)
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 300, 300*time.Millisecond)
	procs := []*testbed.Process{r.sink(base()), r.sink(base())}
	for end := time.Now().Add(phase); time.Now().Before(end); {
		time.Sleep(time.Duration(2000+r.rng.IntN(2000)) * time.Millisecond)
		bed.Do(t, "kafka-kill")
		r.fault("broker SIGKILL and restart")
		time.Sleep(time.Duration(500+r.rng.IntN(1500)) * time.Millisecond)
		bed.Do(t, "kafka-start")
	}
	r.endFaults(stop, wait)
	r.finish(180*time.Second, func(verdict) string {
		for _, p := range procs {
			if p.Exited() {
				return "a sink exited while the broker was down"
			}
		}
		return ""
	})
	stopAll(procs, 60*time.Second)
}

// 8. A competing writer updates the same balances rows in the opposite lock order, under
// SERIALIZABLE, while the sinks run serializable transactions: serialization failures and
// deadlocks hit the sinks, which must retry them (and count them) without advancing.
func scenarioCompetingWriter(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	args := base("-isolation", "serializable", "-batch-records", "50")
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 400, 100*time.Millisecond)
	procs := []*testbed.Process{r.sink(args), r.sink(args)}
	var wg sync.WaitGroup
	var writerConflicts atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			balances := pgx.Identifier{r.p.Schema, "balances"}.Sanitize()
			for i := 0; ctx.Err() == nil; i++ {
				single := i%2 == 1 // every other transaction updates one row: a serialization failure, not a deadlock
				err := pgx.BeginTxFunc(context.Background(), conn, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
					var ids []string
					rows, err := tx.Query(context.Background(), "SELECT account_id FROM "+balances+" ORDER BY account_id DESC")
					if err != nil {
						return err
					}
					for rows.Next() {
						var id string
						if err := rows.Scan(&id); err != nil {
							return err
						}
						ids = append(ids, id)
					}
					if rows.Err() != nil {
						return rows.Err()
					}
					// ids are in descending order: the opposite of the sink's lock order.
					if single && len(ids) > 0 {
						ids = ids[len(ids)/2 : len(ids)/2+1]
					}
					for _, id := range ids {
						if _, err := tx.Exec(context.Background(), "UPDATE "+balances+" SET balance = balance WHERE account_id = $1", id); err != nil {
							return err
						}
					}
					time.Sleep(20 * time.Millisecond)
					return nil
				})
				var pe *pgconn.PgError
				if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
					writerConflicts.Add(1)
				}
			}
		}()
	}
	time.Sleep(phase)
	stop()
	wg.Wait()
	wait()
	r.heal()
	retried := map[string]int{}
	for _, p := range procs {
		for _, line := range strings.Split(p.Output(), "\n") {
			if !strings.Contains(line, "batch failed, retrying") {
				continue
			}
			for _, code := range []string{"40001", "40P01"} {
				if strings.Contains(line, code) {
					retried[code]++
				}
			}
		}
	}
	for code, n := range retried {
		for i := 0; i < n; i++ {
			r.fault(fmt.Sprintf("sink batch retried after SQLSTATE %s", code))
		}
	}
	t.Logf("competing writer saw %d conflicts itself; sinks retried %v", writerConflicts.Load(), retried)
	r.finish(120 * time.Second)
	stopAll(procs, 60*time.Second)
}
