package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
)

// base are the sink flags every scenario uses: short classic-protocol timeouts so that dead
// members leave within seconds, and small batches so that faults land inside batches.
func base(extra ...string) []string {
	return append([]string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000",
		"-batch-records", "100", "-lock-timeout", "2s", "-idle-tx-timeout", "8s"}, extra...)
}

var boundaries = []string{"after-fetch", "after-offset-update", "mid-write", "in-handler", "before-commit", "after-commit"}

// TestChaos runs every scenario. Each one proves that its fault fired (C5) and checks
// C1-C4 with the independent verifier.
func TestChaos(t *testing.T) {
	if d := soakDuration(t); d > 0 {
		t.Run("00-soak", scenarioSoak(d))
		return
	}
	t.Run("01-sigkill", scenarioSIGKILL)
	t.Run("02-sigterm-rolling", scenarioSIGTERM)
	t.Run("03-zombie-pause", scenarioZombiePause)
	t.Run("04-zombie-slow-handler", scenarioZombieSlow)
	classic := []string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000"}
	t.Run("05-storm-eager", scenarioStorm(append(classic, "-kafka", "partition.assignment.strategy=range"), false))
	t.Run("05-storm-cooperative-sticky", scenarioStorm(append(classic, "-kafka", "partition.assignment.strategy=cooperative-sticky"), false))
	t.Run("05-storm-consumer-protocol", scenarioStorm([]string{"-kafka", "group.protocol=consumer"}, false))
	t.Run("05-storm-static-membership", scenarioStorm(append(classic, "-kafka", "partition.assignment.strategy=cooperative-sticky"), true))
	t.Run("06-pg-connection-kill", scenarioPGConnKill)
	t.Run("07-pg-restart-fast", scenarioPGRestart("fast"))
	t.Run("07-pg-restart-immediate", scenarioPGRestart("immediate"))
	t.Run("08-competing-writer", scenarioCompetingWriter)
	t.Run("09-broker-kill", scenarioBrokerKill)
	t.Run("10-aborting-producer", scenarioAbortingProducer)
	t.Run("11-records-deleted", scenarioRecordsDeleted)
	t.Run("11-topic-recreated", scenarioTopicRecreated)
	t.Run("12-retention-past-commit-marker", scenarioRetentionPastMarker)
	t.Run("13-topic-recreated-running", scenarioTopicRecreatedRunning)
	t.Run("14-reset-row-locked", scenarioResetRowLocked)
	t.Run("15-long-pipeline-stalled-session", scenarioLongPipelineStalledSession)
	t.Run("16-zombie-reclaim-race", scenarioZombieReclaimRace)
	t.Run("17-non-utf8-header-dead-letter", scenarioNonUTF8HeaderDeadLetter)
	t.Run("18-cdc-storm", scenarioCDCStorm)
	t.Run("19-relay-kills", scenarioRelayKills)
	t.Run("20-relay-zombie-sigstop", scenarioRelayZombie)
	t.Run("21-relay-race", scenarioRelayRace)
	t.Run("22-cdc-multi-topic-one-target", scenarioCDCMultiTopicOneTarget)
	for _, p := range staleClaimProtocols {
		t.Run("23-stale-claim-"+p.name, scenarioStaleClaim(p.args))
	}
	t.Run("24-cdc-transaction", scenarioCDCTransaction("transaction"))
}

// 1. SIGKILL at every commit boundary through failpoints, and at random times.
func scenarioSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 6)
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 400, 300*time.Millisecond)
	steady := r.sink(base())
	for end := time.Now().Add(phase); time.Now().Before(end); {
		fp := boundaries[r.rng.IntN(len(boundaries))]
		nth := 1 + r.rng.IntN(4)
		victim := r.sink(base(), fmt.Sprintf("EOSINK_FAILPOINTS=%s=kill@%d", fp, nth))
		err, exited := victim.WaitFor(20 * time.Second)
		switch {
		case exited && testbed.KilledBySIGKILL(err) && victim.Contains("failpoint fired: "+fp+" kill"):
			r.fault("failpoint kill at " + fp)
		case !exited:
			victim.Signal(syscall.SIGKILL) // it never reached the failpoint: a random-time kill instead
			if err, _ := victim.WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
				r.fault("random SIGKILL")
			}
		default:
			t.Fatalf("victim exited without the failpoint: %v", err)
		}
		if r.rng.IntN(3) == 0 {
			time.Sleep(time.Duration(r.rng.IntN(1500)) * time.Millisecond)
			steady.Signal(syscall.SIGKILL)
			if err, _ := steady.WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
				r.fault("random SIGKILL")
			}
			steady = r.sink(base())
		}
	}
	r.endFaults(stop, wait)
	r.finish(120 * time.Second)
	steady.StopClean(60 * time.Second)
}

// 2. SIGTERM rolling restarts in the middle of batches: each process must drain and exit 0.
func scenarioSIGTERM(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 6)
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 400, 200*time.Millisecond)
	procs := []*testbed.Process{r.sink(base()), r.sink(base()), r.sink(base())}
	for end := time.Now().Add(phase); time.Now().Before(end); {
		i := r.rng.IntN(len(procs))
		time.Sleep(time.Duration(500+r.rng.IntN(1500)) * time.Millisecond)
		procs[i].StopClean(45 * time.Second) // fails the test unless it exits 0 in time
		if !strings.Contains(procs[i].Output(), "sink stopped") {
			t.Fatalf("no clean stop in the output of a SIGTERMed sink")
		}
		r.fault("SIGTERM, drained, exit 0")
		procs[i] = r.sink(base())
	}
	r.endFaults(stop, wait)
	r.finish(120 * time.Second)
	stopAll(procs, 45*time.Second)
}

// 3. Zombie by pause: a sink holding an open transaction is frozen with SIGSTOP past the
// session timeout; the group moves on; then SIGCONT. Its commit must be rejected and the new
// owner must not stay blocked by its locks.
func scenarioZombiePause(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 300, 300*time.Millisecond)
	heir := r.sink(base())
	for end := time.Now().Add(phase); time.Now().Before(end); {
		zombie := r.sink(base(), fmt.Sprintf("EOSINK_FAILPOINTS=before-commit=sleep(2s)@%d", 2+r.rng.IntN(3)))
		zombie.WaitOutput("failpoint fired: before-commit sleep", 60*time.Second)
		if err := zombie.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // past session.timeout.ms (6s) and idle-tx-timeout (8s)
		if err := zombie.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 60*time.Second, "the zombie's commit to be rejected", func() (bool, string) {
			return zombie.Contains("partition fenced") || zombie.Contains("in-flight batch rolled back") ||
				zombie.Contains("commit outcome unknown"), "not yet"
		})
		r.fault("zombie frozen with an open transaction; its commit rejected")
		zombie.StopClean(60 * time.Second)
	}
	r.endFaults(stop, wait)
	r.finish(120 * time.Second)
	heir.StopClean(60 * time.Second)
}

// 6. PostgreSQL connections killed in the middle of transactions (pg_terminate_backend by
// application_name), and connections cut around COMMIT by a proxy so that the sink cannot
// know whether it committed.
func scenarioPGConnKill(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 6)
	proxy, proxied := testbed.StartPGProxy(t, r.p.Env.DatabaseURL)
	args := func() []string { return base("-database-url", proxied) } // the last -database-url wins
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 400, 200*time.Millisecond)
	procs := []*testbed.Process{r.sink(args()), r.sink(args())}
	admin, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	modes := []testbed.CutMode{testbed.CutAfterForward, testbed.CutBeforeSend}
	for end := time.Now().Add(phase); time.Now().Before(end); {
		time.Sleep(time.Duration(300+r.rng.IntN(700)) * time.Millisecond)
		if r.rng.IntN(2) == 0 {
			var n int
			err := admin.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1 AND state IN ('active', 'idle in transaction')) k`, rebalance.SessionName(r.p.Group)).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				r.fault("pg_terminate_backend mid-transaction")
			}
		} else {
			before := proxy.Fired.Load()
			proxy.Arm(modes[r.rng.IntN(2)])
			time.Sleep(500 * time.Millisecond)
			if proxy.Fired.Load() > before {
				r.fault("connection cut around COMMIT")
			}
			proxy.Arm(testbed.CutOff)
		}
	}
	r.endFaults(stop, wait)
	// A cut COMMIT of a batch is settled by reading the row back; a cut COMMIT of a claim's
	// transaction is retried as a claim. Both show in the sinks' logs.
	for _, p := range procs {
		for i := strings.Count(p.Output(), "commit outcome settled"); i > 0; i-- {
			r.fault("unknown COMMIT outcome settled by re-reading the row")
		}
	}
	r.finish(120 * time.Second)
	stopAll(procs, 45*time.Second)
}
