package cdc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCSourceRewoundPromotedStandby: a source cluster of the test's own with a streaming
// standby (pg_basebackup). Debezium captures the primary into `eosink run` with the cdc
// plugin. The standby's replay is paused and the standby is stopped (so that it lags: a
// paused standby that still receives WAL replays it when promoted), the primary changes
// more and the sink applies it, then the primary dies and the lagging standby is promoted:
// its LSNs are behind the positions the sink stored. The new primary changes rows and
// Debezium is started against it with its offsets. The sink must stop the partitions that
// receive the new timeline's changes, with reason source_rewound (ERROR line, gauge,
// eosink status), refusing nothing silently; after the documented resync (docs/cdc.md, "A
// source that fails over") the replica equals the new source, row::text for row::text.
//
// Two variants: in `behind` Debezium snapshots the new primary at an LSN below the highest
// position the sink applied from the old one (the partitions' marks catch it); in `passed`
// the new primary first writes more WAL than the old one lost, so its snapshot's LSN is above
// every position applied, and only the snapshot reads that contradict the replica tell
// (snapshotCheckSQL in sink/cdc/merge.go).
func TestCDCSourceRewoundPromotedStandby(t *testing.T) {
	for _, passed := range []bool{false, true} {
		name := "behind"
		if passed {
			name = "passed"
		}
		t.Run(name, func(t *testing.T) { testPromotedStandby(t, passed) })
	}
}

func testPromotedStandby(t *testing.T, passed bool) {
	e := testbed.Require(t)
	ctx := context.Background()
	root := testbed.ClusterRoot(t, "cdc-failover-")
	primary := testbed.NewPrimary(t, root, "primary")
	src := connect(t, primary.URL("postgres"))
	execAll(t, src, fmt.Sprintf(itemsDDL, "public.items"),
		`INSERT INTO public.items SELECT g, 0, 'first' FROM generate_series(1, 40) g`)
	standby := primary.Standby("standby")

	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	replicaTable := pgx.Identifier{replica, "items"}.Sanitize()
	execAll(t, db, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize(), fmt.Sprintf(itemsDDL, replicaTable))
	dbz := testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: primary.URL("postgres"), Tables: []string{"public.items"},
		TopicPrefix: testbed.Name(t, "fo"), Partitions: 2, Dir: t.TempDir()}
	d := startDebezium(t, dbz)
	topic := d.Topic("public.items")
	waitTopics(t, e.Brokers, []string{topic})
	pipeline, httpAddr := testbed.Name(t, "p"), freeAddr(t)
	config := sinkConfig(t, e, pipeline, offsets, replica, httpAddr, []string{topic})
	cli(t, "migrate", "up", "-config", config)
	run := func(name string) *testbed.Process {
		return testbed.StartProcess(t, eosinkBin, name, []string{"run", "-config", config})
	}
	sink := run("eosink run")
	equalTo := func(what string, source *pgx.Conn) {
		t.Helper()
		testbed.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			diff := diffRows(rowsText(t, source, "public.items"), rowsText(t, db, replicaTable))
			return len(diff) == 0, strings.Join(diff, "\n")
		})
	}
	execAll(t, src, `UPDATE public.items SET v = 1, note = 'streamed' WHERE id <= 30`)
	equalTo("the replica equal to the primary", src)
	testbed.WaitReplayed(t, src, standby)

	// The standby lags from here on: replay paused, then stopped (no more WAL).
	sby := connect(t, standby.URL("postgres"))
	execAll(t, sby, `SELECT pg_wal_replay_pause()`)
	sby.Close(ctx)
	standby.Stop("fast")
	for i := range 40 { // enough WAL that the new primary stays behind it
		execAll(t, src, fmt.Sprintf(`UPDATE public.items SET v = v + 10, note = 'lost %d' WHERE id %% 5 = %d`, i, i%5))
	}
	execAll(t, src, `DELETE FROM public.items WHERE id > 35`, `INSERT INTO public.items SELECT g, 7, 'lost insert' FROM generate_series(41, 45) g`)
	equalTo("the replica equal to the primary before it dies", src)
	var lostLSN string
	_ = src.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lostLSN)

	// The primary dies; the lagging standby is promoted and changes the rows again.
	src.Close(ctx)
	primary.Stop("immediate")
	d.Kill()
	standby.Start()
	standby.Promote()
	time.Sleep(1500 * time.Millisecond) // a failover takes longer than rewindSlack (1 s) anyway
	newSrc := connect(t, standby.URL("postgres"))
	var newLSN string
	_ = newSrc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&newLSN)
	t.Logf("old primary ended at LSN %s; the promoted standby starts at %s", lostLSN, newLSN)
	for i := range 5 {
		execAll(t, newSrc, fmt.Sprintf(`UPDATE public.items SET v = v + 100, note = 'new timeline %d' WHERE id %% 5 = %d`, i, i))
	}
	execAll(t, newSrc, `DELETE FROM public.items WHERE id <= 3`, `INSERT INTO public.items SELECT g, 9, 'new insert' FROM generate_series(50, 54) g`)
	if passed { // WAL past the old primary's end: the snapshot's LSN is above every position applied
		execAll(t, newSrc, `CREATE TABLE public.pad AS SELECT g, md5(g::text) m FROM generate_series(1, 40000) g`)
		_ = newSrc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&newLSN)
		var ahead bool
		_ = newSrc.QueryRow(ctx, `SELECT pg_current_wal_lsn() > $1::pg_lsn`, lostLSN).Scan(&ahead)
		if !ahead {
			t.Fatalf("the new primary's WAL (%s) is not past the old one's end (%s)", newLSN, lostLSN)
		}
		t.Logf("the new primary's WAL is past the old one's end: %s > %s", newLSN, lostLSN)
	}

	// Debezium again, against the new primary, with the offsets it had. It refuses to
	// stream: its offset is not in the new primary's new slot. Its message says to use a
	// snapshot mode, and with snapshot.mode=when_needed it snapshots the new primary (op r
	// at the new primary's LSN, behind the positions stored) and streams from there.
	dbz.SourceURL = standby.URL("postgres")
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	_, err := testbed.StartDebezium(sctx, dbz)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "no longer available on the server") {
		t.Fatalf("Debezium against the promoted standby with the old offsets: %v; want it refused (no longer available on the server)", err)
	}
	t.Logf("Debezium against the promoted standby with its old offsets: %.300s", err)
	dbz.SnapshotMode = "when_needed"
	d2 := startDebezium(t, dbz)
	testbed.Eventually(t, 2*time.Minute, "both partitions stopped with reason source_rewound", func() (bool, string) {
		got := stoppedReasons(t, httpAddr)
		rewound := 0
		for _, s := range got {
			if strings.HasSuffix(s, "/source_rewound") {
				rewound++
			}
		}
		diff := diffRows(rowsText(t, newSrc, "public.items"), rowsText(t, db, replicaTable))
		var marks []string
		mr, err := db.Query(ctx, `SELECT format('%s[%s] (%s, %s) ts %s', topic, partition, commit_lsn, lsn, ts_ms) FROM `+pgx.Identifier{offsets, "cdc_source_marks"}.Sanitize())
		if err == nil {
			marks, _ = pgx.CollectRows(mr, pgx.RowTo[string])
		}
		return rewound == 2, fmt.Sprintf("stopped partitions: %v; the replica differs from the new source in %d rows, lag: %s; marks: %v (%v); first: %s",
			got, len(diff), lagText(t, e, offsets, pipeline), marks, err, strings.Join(diff[:min(3, len(diff))], "; "))
	})
	stopped := stoppedReasons(t, httpAddr)
	t.Logf("stopped partitions: %v", stopped)
	if !sink.Contains("level=ERROR") || !sink.Contains("reason=source_rewound") || !sink.Contains("cdc: source rewound") {
		t.Errorf("no ERROR line naming source_rewound in the sink's log:\n%s", sink.Output())
	}
	if st := cli(t, "status", "-database-url", e.DatabaseURL, "-schema", offsets, "-pipeline", pipeline); !strings.Contains(st, "source_rewound") {
		t.Errorf("eosink status does not show source_rewound:\n%s", st)
	} else {
		t.Logf("eosink status:\n%s", st)
	}

	// The resync of docs/cdc.md: stop the sink and the connector, reset the replica and
	// its positions, skip the rest of the rewound stream, snapshot the new primary again.
	sink.StopClean(60 * time.Second)
	d2.Kill()
	if err := d2.Stop(); err != nil { // drops the slot and publication on the new primary
		t.Fatal(err)
	}
	resync(t, db, offsets, pipeline, replicaTable, []string{topic})
	cli(t, "offsets", "set", "-database-url", e.DatabaseURL, "-brokers", e.Brokers, "-schema", offsets, "-pipeline", pipeline,
		"-to", "latest", "-reason", "resync after the source failed over", "-operator", "cdc-test")
	dbz.Dir, dbz.SnapshotMode = t.TempDir(), "initial" // a connector without offsets: it snapshots the new primary
	startDebezium(t, dbz)
	sink = run("eosink run (after the resync)")
	execAll(t, newSrc, `UPDATE public.items SET v = v + 1000, note = 'after the resync' WHERE id % 7 = 0`)
	equalTo("the replica equal to the new source after the resync", newSrc)
	if got := stoppedReasons(t, httpAddr); len(got) != 0 {
		t.Errorf("after the resync, stopped partitions: %v", got)
	}
	t.Logf("after the resync: the replica equals the new source (%d rows, row::text)", len(rowsText(t, newSrc, "public.items")))
	sink.StopClean(60 * time.Second)
}
