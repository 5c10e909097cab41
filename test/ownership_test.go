package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
	"github.com/eosink/eosink/sink"
)

// resetWithRowLocked is testbed.ResetWithRowLocked on the pipeline.
func resetWithRowLocked(t *testing.T, p *pipeline, partition int32, target admin.Target) (pgx.Tx, admin.Change) {
	t.Helper()
	return testbed.ResetWithRowLocked(t, p.Env, p.OffsetsSchema, p.Group, p.Topic, partition, target)
}

// TestReclaimAfterResetOutlastsALockedRow (issue 11, finding 2): an operator resets a
// partition of a running sink while another session holds the offset row past LockTimeout
// and past ClaimTimeout. The sink's re-claim fails loudly (a *PartitionError wrapping
// ErrReclaimFailed) instead of leaving the partition paused with no error, and once the lock
// is released it claims the partition and replays from the new position.
func TestReclaimAfterResetOutlastsALockedRow(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 300, 111)
	cfg := p.config(t, nil)
	cfg.LockTimeout = time.Second
	cfg.ClaimTimeout = 3 * time.Second
	cfg.MaxRetryBackoff = time.Second
	r := startSink(t, cfg)
	p.WaitCaughtUp(t, 60*time.Second)
	end, _ := p.stored(t, 0)

	tx, ch := resetWithRowLocked(t, p, 0, admin.Offset(100))
	if ch.From == nil || *ch.From != end || ch.To != 100 {
		t.Fatalf("change %+v, want from %d to 100", ch, end)
	}
	testbed.Eventually(t, 20*time.Second, "the failed re-claim to show in PartitionErrors", func() (bool, string) {
		for _, err := range r.s.PartitionErrors() {
			if errors.Is(err, sink.ErrReclaimFailed) {
				return true, ""
			}
		}
		return false, fmt.Sprint(r.s.PartitionErrors())
	})
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 60*time.Second, "the partition to be claimed again and replayed from 100", func() (bool, string) {
		next, epoch := p.stored(t, 0)
		return next == end && epoch >= 3 && len(r.s.PartitionErrors()) == 0, fmt.Sprintf("next %d epoch %d errors %v", next, epoch, r.s.PartitionErrors())
	})
	p.Produce(t, 20, 112)
	testbed.Eventually(t, 60*time.Second, "new records", func() (bool, string) {
		next, _ := p.stored(t, 0)
		return next == end+20, fmt.Sprint(next)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var twice, other int64
	if err := connect(t, p).QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE n = 2 AND "offset" >= 100 AND "offset" < $1),
		count(*) FILTER (WHERE NOT (n = 2 AND "offset" >= 100 AND "offset" < $1) AND n <> 1)
		FROM (SELECT "offset", count(*) AS n FROM `+pgx.Identifier{p.Schema, "ledger"}.Sanitize()+` GROUP BY 1) c`, end).Scan(&twice, &other); err != nil {
		t.Fatal(err)
	}
	if twice != end-100 || other != 0 {
		t.Fatalf("%d offsets applied twice (want %d, the replayed range), %d applied a wrong number of times", twice, end-100, other)
	}
}

// TestReclaimAfterResetIsConditional (issue 11, finding 3): the instance that an operator's
// reset fenced reads "reset by OPERATOR (was me)" and claims the partition again; if another
// instance claims it between that read and that claim, the re-claim must not take it back
// (before, it was unconditional: the rightful owner was fenced, and when the group then
// moved the partition away from the stale instance nobody consumed it). The rightful
// owner's claim is made while the sink's re-claim waits for the row, the same UPDATE that
// offsets.Store.Claim runs, so the order is deterministic.
func TestReclaimAfterResetIsConditional(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 200, 121)
	cfg := p.config(t, nil)
	cfg.LockTimeout = 10 * time.Second // the sink's re-claim waits while the owner claims
	r := startSink(t, cfg)
	p.WaitCaughtUp(t, 60*time.Second)

	tx, ch := resetWithRowLocked(t, p, 0, admin.Offset(50))
	ctx := context.Background()
	var resetEpoch int64
	if err := tx.QueryRow(ctx, `SELECT epoch FROM `+p.offsetsTable()+` WHERE pipeline = $1 AND topic = $2 AND partition = 0`,
		p.Group, p.Topic).Scan(&resetEpoch); err != nil {
		t.Fatal(err)
	}
	watch := connect(t, p)
	testbed.WaitBlockedBy(t, watch, tx.Conn().PgConn().PID(), rebalance.SessionName(p.Group))
	// The rightful owner's claim.
	if _, err := tx.Exec(ctx, `UPDATE `+p.offsetsTable()+` SET epoch = epoch + 1, owner = 'rightful-owner', claimed_at = now()
		WHERE pipeline = $1 AND topic = $2 AND partition = 0`, p.Group, p.Topic); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The sink's re-claim is over when its session no longer waits and the row settles.
	var owner string
	var epoch int64
	testbed.Eventually(t, 30*time.Second, "the sink's re-claim to end", func() (bool, string) {
		var waiting int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND cardinality(pg_blocking_pids(pid)) > 0`,
			rebalance.SessionName(p.Group)).Scan(&waiting)
		if err == nil {
			err = watch.QueryRow(ctx, `SELECT owner, epoch FROM `+p.offsetsTable()+` WHERE pipeline = $1 AND topic = $2 AND partition = 0`,
				p.Group, p.Topic).Scan(&owner, &epoch)
		}
		done := owner != "rightful-owner" || len(r.s.PartitionErrors()) > 0
		return err == nil && waiting == 0 && done, fmt.Sprint(waiting, owner, epoch, err)
	})
	if owner != "rightful-owner" || epoch != resetEpoch+1 {
		t.Fatalf("row owner %q epoch %d, want the rightful owner's claim at epoch %d: the stale instance took the partition back", owner, epoch, resetEpoch+1)
	}
	fenced := false
	for _, err := range r.s.PartitionErrors() {
		fenced = fenced || errors.Is(err, sink.ErrFenced)
	}
	if !fenced {
		t.Fatalf("partition errors %v, want the partition listed as fenced on the stale instance", r.s.PartitionErrors())
	}
	if next, _ := p.stored(t, 0); next != ch.To {
		t.Fatalf("stored next offset %d, want the reset's %d", next, ch.To)
	}
	_ = r.stop(t)
}

// TestStalledSessionOfLongNonASCIIPipelineIsEnded (issue 11, finding 4): the pipeline's name
// is 80 bytes long and holds a non-ASCII character, so PostgreSQL would cut and rewrite an
// application_name made from it. A sink frozen (SIGSTOP) with an open transaction holds the
// offset row, and its sessions have no idle timeout worth waiting for; the next owner's claim
// must still recognise the stalled session as one of the pipeline's and end it.
func TestStalledSessionOfLongNonASCIIPipelineIsEnded(t *testing.T) {
	t.Parallel()
	const events = 2000
	p := newPipeline(t, 1)
	p.Group += "-pipeline-für-"
	p.Group += strings.Repeat("x", 80-len(p.Group))
	p.Produce(t, events, 131)

	zombie := startChild(t, "zombie", p.Args("-batch-records", "100", "-idle-tx-timeout", "10m", "-commit-to-kafka=false"),
		"EOSINK_FAILPOINTS=before-commit=sleep(10s)@3")
	zombie.WaitOutput("failpoint fired: before-commit sleep", 60*time.Second)
	zombie.Signal(syscall.SIGSTOP)
	frozen := true
	defer func() {
		if frozen {
			zombie.Signal(syscall.SIGCONT)
		}
	}()
	heir := startChild(t, "heir", p.Args("-batch-records", "100", "-lock-timeout", "1s", "-idle-tx-timeout", "10m"))
	rep := p.WaitCaughtUp(t, 90*time.Second)
	if rep.Applied != events {
		t.Fatalf("applied %d of %d", rep.Applied, events)
	}
	if !heir.Contains("terminated a stalled session") {
		t.Fatal("the heir caught up without ending the stalled session")
	}
	zombie.Signal(syscall.SIGCONT)
	frozen = false
	zombie.StopClean(60 * time.Second)
	heir.StopClean(60 * time.Second)
	if rep := p.Verify(t); !rep.OK() || rep.Lag != 0 {
		t.Fatalf("after the zombie woke: %+v", rep)
	}
}
