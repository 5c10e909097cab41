package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
)

// Ownership scenarios (issue 11): operator resets, stalled sessions, re-claims.
//
// An operator's reset that moves a position makes the verifier's exact counts meaningless
// (a replay applies records twice on purpose), so these scenarios reset partitions that are
// caught up to the log end (admin.Latest): the move is in place, but it bumps the epoch and
// fences the owner exactly like any other, and the owner must claim the partition again.

// produceNow writes n events and waits for them.
func (r *run) produceNow(n int) {
	got, err := app.Produce(context.Background(), app.ProduceOptions{Brokers: r.p.Env.Brokers, Topic: r.p.Topic,
		Events: n, Accounts: 41, Seed: r.seed + uint64(r.produced.Load())*7919})
	r.produced.Add(int64(got))
	if err != nil {
		r.t.Fatalf("produce: %v", err)
	}
}

// waitCaughtUp waits until the stored positions reach the log end.
func (r *run) waitCaughtUp(timeout time.Duration) {
	testbed.Eventually(r.t, timeout, "the sinks to catch up", func() (bool, string) {
		v, err := check(context.Background(), r.p.Env.Brokers, r.p.Env.DatabaseURL, r.p.Topic, r.p.Group, r.p.Schema, r.p.OffsetsSchema)
		return err == nil && v.Lag == 0, fmt.Sprintf("%+v %v", v, err)
	})
}

// resetInPlace resets a caught-up partition to the log end with its row locked behind the
// reset (testbed.ResetWithRowLocked); the move must be in place.
func (r *run) resetInPlace(partition int32) pgx.Tx {
	tx, ch := testbed.ResetWithRowLocked(r.t, r.p.Env, r.p.OffsetsSchema, r.p.Group, r.p.Topic, partition, admin.Latest())
	if ch.From == nil || *ch.From != ch.To {
		r.t.Fatalf("reset of a caught-up partition moved it: %+v", ch)
	}
	return tx
}

// waitOwners waits until the rows of all partitions are owned by exactly the instances ids,
// each owning at least one: the group has settled, so no rebalance claims partitions during
// the fault.
func (r *run) waitOwners(partitions int, ids ...string) {
	testbed.Eventually(r.t, 60*time.Second, fmt.Sprintf("partitions owned by %v", ids), func() (bool, string) {
		rows, err := r.watch().Query(context.Background(), `SELECT owner, count(*) FROM `+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
			` WHERE pipeline = $1 AND topic = $2 GROUP BY owner`, r.p.Group, r.p.Topic)
		if err != nil {
			return false, err.Error()
		}
		owners := map[string]int{}
		total := 0
		for rows.Next() {
			var o string
			var n int
			if err := rows.Scan(&o, &n); err != nil {
				return false, err.Error()
			}
			owners[o] = n
			total += n
		}
		if rows.Err() != nil || total != partitions || len(owners) != len(ids) {
			return false, fmt.Sprint(owners, rows.Err())
		}
		for _, id := range ids {
			if owners[id] == 0 {
				return false, fmt.Sprint(owners)
			}
		}
		return true, ""
	})
}

// watch returns a connection for the scenario's own queries, closed at its end.
func (r *run) watch() *pgx.Conn {
	c, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// waitClaimed waits until one of procs has claimed partition in its current assignment: the
// last "partitions assigned" of its log, with no revoke after it, is followed by the claim.
// The rows' owners alone can be those of the previous generation while a claim is pending.
func (r *run) waitClaimed(procs []*testbed.Process, partition int32) {
	claim := fmt.Sprintf(" partition=%d ", partition)
	testbed.Eventually(r.t, 60*time.Second, fmt.Sprintf("partition %d claimed in the current assignment", partition), func() (bool, string) {
		for _, p := range procs {
			out := p.Output()
			i := strings.LastIndex(out, `msg="partitions assigned"`)
			if i < 0 || strings.LastIndex(out, `msg="partitions revoked"`) > i {
				continue
			}
			for _, line := range strings.Split(out[i:], "\n") {
				if strings.Contains(line, `msg="partition claimed"`) && strings.Contains(line, claim) {
					return true, ""
				}
			}
		}
		return false, "not yet"
	})
}

func countAll(procs []*testbed.Process, s string) int {
	n := 0
	for _, p := range procs {
		n += strings.Count(p.Output(), s)
	}
	return n
}

// 20. An operator resets a partition while another session holds its offset row past the
// sinks' lock timeout (2s) and claim timeout (4s). The owner's re-claim fails loudly, is
// tried again later, and claims the partition once the row is free.
func scenarioResetRowLocked(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	ids := []string{fmt.Sprintf("chaos-%d-a", r.seed%10000), fmt.Sprintf("chaos-%d-b", r.seed%10000)}
	procs := []*testbed.Process{r.sink(base("-claim-timeout", "4s", "-instance", ids[0])), r.sink(base("-claim-timeout", "4s", "-instance", ids[1]))}
	for end := time.Now().Add(phase); time.Now().Before(end); {
		r.produceNow(300)
		r.waitCaughtUp(60 * time.Second)
		r.waitOwners(4, ids...)
		failed := countAll(procs, "re-claim after an operator reset failed")
		claimed := countAll(procs, "partition claimed again after an operator reset")
		part := int32(r.rng.IntN(4))
		r.waitClaimed(procs, part)
		tx := r.resetInPlace(part)
		testbed.Eventually(t, 30*time.Second, "the re-claim to give up, loudly", func() (bool, string) {
			return countAll(procs, "re-claim after an operator reset failed") > failed, "not yet"
		})
		if err := tx.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "the partition to be claimed again", func() (bool, string) {
			return countAll(procs, "partition claimed again after an operator reset") > claimed, "not yet"
		})
		r.fault("reset with the row locked past the claim timeout; re-claimed after")
	}
	r.produceNow(300) // the re-claimed partitions consume again
	r.heal()
	r.finish(120 * time.Second)
	stopAll(procs, 45*time.Second)
}

// 21. The pipeline's name is 80 bytes with a non-ASCII character, so PostgreSQL would cut
// and rewrite an application_name made from it. A sink frozen (SIGSTOP) with an open
// transaction holds an offset row, and its sessions have no idle timeout worth waiting for
// (10 min): the next owner must recognise the stalled session as the pipeline's and end it.
func scenarioLongPipelineStalledSession(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	r.p.Group += "-pipeline-für-"
	r.p.Group += strings.Repeat("x", 80-len(r.p.Group))
	noIdle := func() []string { return base("-idle-tx-timeout", "10m") }
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 300, 300*time.Millisecond)
	heir := r.sink(noIdle())
	for end := time.Now().Add(phase); time.Now().Before(end); {
		ended := strings.Count(heir.Output(), "terminated a stalled session")
		// The sleep is long so that SIGSTOP lands inside the transaction even when this
		// loaded machine reads the zombie's output seconds late.
		zombie := r.sink(noIdle(), fmt.Sprintf("EOSINK_FAILPOINTS=before-commit=sleep(10s)@%d", 2+r.rng.IntN(3)))
		zombie.WaitOutput("failpoint fired: before-commit sleep", 60*time.Second)
		zombie.Signal(syscall.SIGSTOP)
		testbed.Eventually(t, 60*time.Second, "the heir to end the stalled session", func() (bool, string) {
			return strings.Count(heir.Output(), "terminated a stalled session") > ended, "not yet"
		})
		zombie.Signal(syscall.SIGCONT)
		testbed.Eventually(t, 60*time.Second, "the zombie's commit to be rejected", func() (bool, string) {
			return zombie.Contains("partition fenced") || zombie.Contains("in-flight batch rolled back") ||
				zombie.Contains("commit outcome unknown"), "not yet"
		})
		r.fault("stalled session of an 80-byte non-ASCII pipeline ended by the next owner")
		zombie.StopClean(60 * time.Second)
	}
	r.endFaults(stop, wait)
	r.finish(120 * time.Second)
	heir.StopClean(60 * time.Second)
}

// 22. The zombie re-claim race: the instance an operator's reset fenced reads "reset by
// OPERATOR (was me)" and claims the partition again, while the rightful owner claims it
// first. The rightful owner's claim is made while the stale instance's re-claim waits for
// the row (the same UPDATE as offsets.Store.Claim, by a session of the test), so the race
// is decided the same way every time. The stale instance must not take the partition back;
// it stops it, and when the group moves the partition the next owner consumes it.
func scenarioZombieReclaimRace(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	instance := func() string { return fmt.Sprintf("chaos-%d-%d", r.seed%10000, r.nproc.Load()+1) }
	start := func() (*testbed.Process, string) {
		id := instance()
		return r.sink(base("-lock-timeout", "5s", "-instance", id)), id
	}
	stale, staleID := start()
	other, otherID := start()
	watch, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	ctx := context.Background()
	for end := time.Now().Add(phase); time.Now().Before(end); {
		r.produceNow(200)
		r.waitCaughtUp(60 * time.Second)
		r.waitOwners(4, staleID, otherID)
		var part int32
		testbed.Eventually(t, 30*time.Second, "a partition owned by "+staleID, func() (bool, string) {
			err := watch.QueryRow(ctx, `SELECT partition FROM `+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
				` WHERE pipeline = $1 AND topic = $2 AND owner = $3 ORDER BY partition LIMIT 1`, r.p.Group, r.p.Topic, staleID).Scan(&part)
			return err == nil, fmt.Sprint(err)
		})
		r.waitClaimed([]*testbed.Process{stale}, part)
		gaveUp := strings.Count(stale.Output(), "partition claimed by another instance before this one could claim it again")
		tx := r.resetInPlace(part)
		testbed.WaitBlockedBy(t, watch, tx.Conn().PgConn().PID(), rebalance.SessionName(r.p.Group))
		var epoch int64
		if err := tx.QueryRow(ctx, `UPDATE `+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
			` SET epoch = epoch + 1, owner = $4, claimed_at = now() WHERE pipeline = $1 AND topic = $2 AND partition = $3 RETURNING epoch`,
			r.p.Group, r.p.Topic, part, otherID).Scan(&epoch); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "the stale instance to give the partition up", func() (bool, string) {
			var owner string
			var e int64
			err := watch.QueryRow(ctx, `SELECT owner, epoch FROM `+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
				` WHERE pipeline = $1 AND topic = $2 AND partition = $3`, r.p.Group, r.p.Topic, part).Scan(&owner, &e)
			if err == nil && (owner != otherID || e != epoch) {
				t.Fatalf("the stale instance took partition %d back: owner %q epoch %d, want %q at %d", part, owner, e, otherID, epoch)
			}
			return strings.Count(stale.Output(), "partition claimed by another instance before this one could claim it again") > gaveUp, "not yet"
		})
		r.fault("stale re-claim lost the race to the rightful owner's claim")
		// The group moves the partition: the stale instance leaves, a new one joins.
		stale.StopClean(60 * time.Second)
		stale, staleID = start()
		stale, staleID, other, otherID = other, otherID, stale, staleID
	}
	r.produceNow(200)
	r.heal()
	r.finish(120 * time.Second)
	stopAll([]*testbed.Process{stale, other}, 45*time.Second)
}
