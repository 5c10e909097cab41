package chaos

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
)

// soakDuration is CHAOS_SOAK (a Go duration, `make chaos DURATION=30m`); zero means no soak.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("CHAOS_SOAK")
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("CHAOS_SOAK=%q: want a positive Go duration such as 30m", s)
	}
	return d
}

// scenarioSoak runs three sinks for d under a steady load with one fault every 15 seconds,
// drawn from SIGKILL, SIGTERM, a frozen zombie, a killed PostgreSQL session, a cut COMMIT
// and a member joining or leaving; then it drains and verifies.
func scenarioSoak(d time.Duration) func(t *testing.T) {
	return func(t *testing.T) {
		r := newRun(t, testbed.Require(t), 12)
		proxy, proxied := testbed.StartPGProxy(t, r.p.Env.DatabaseURL)
		args := func() []string { return base("-database-url", proxied) }
		ctx, stop := context.WithCancel(context.Background())
		wait := r.produce(ctx, 500, 250*time.Millisecond)
		procs := []*testbed.Process{r.sink(args()), r.sink(args()), r.sink(args())}
		admin, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		began := time.Now()
		for n := 1; time.Since(began) < d; n++ {
			time.Sleep(15 * time.Second)
			i := r.rng.IntN(len(procs))
			switch kind := r.rng.IntN(6); kind {
			case 0:
				procs[i].Signal(syscall.SIGKILL)
				if err, _ := procs[i].WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
					r.fault("SIGKILL")
				}
				procs[i] = r.sink(args())
			case 1:
				procs[i].StopClean(60 * time.Second)
				r.fault("SIGTERM, drained")
				procs[i] = r.sink(args())
			case 2:
				_ = procs[i].Cmd.Process.Signal(syscall.SIGSTOP)
				time.Sleep(10 * time.Second)
				_ = procs[i].Cmd.Process.Signal(syscall.SIGCONT)
				r.fault("zombie: SIGSTOP 10s, SIGCONT")
			case 3:
				var k int
				if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE application_name = $1 AND state IN ('active', 'idle in transaction')) x`, rebalance.SessionName(r.p.Group)).Scan(&k); err == nil && k > 0 {
					r.fault("pg_terminate_backend")
				}
			case 4:
				before := proxy.Fired.Load()
				proxy.Arm(testbed.CutMode(1 + r.rng.IntN(2)))
				time.Sleep(2 * time.Second)
				proxy.Arm(testbed.CutOff)
				if proxy.Fired.Load() > before {
					r.fault("COMMIT cut")
				}
			case 5:
				if len(procs) < 5 {
					procs = append(procs, r.sink(args()))
					r.fault("member joined")
				} else {
					procs[i].StopClean(60 * time.Second)
					procs = append(procs[:i], procs[i+1:]...)
					r.fault("member left")
				}
			}
			t.Logf("soak: %s elapsed, fault %d, %d events produced", time.Since(began).Round(time.Second), n, r.produced.Load())
		}
		r.endFaults(stop, wait)
		r.finish(5 * time.Minute)
		stopAll(procs, 60*time.Second)
		fmt.Printf("soak: %s with %d faults\n", d, r.faults.Load())
	}
}
