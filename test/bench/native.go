package main

// The native anchor (issue 26): PostgreSQL's own logical replication, the tool a user of
// PostgreSQL → PostgreSQL would pick, against eosink's cdc plugin on the same source
// workload of updates (not a snapshot).
//
// The workload: BENCH_NATIVE_ROWS rows (default 100,000) of cdcRow's shape, then
// BENCH_NATIVE_UPDATES updates (default 200,000) of random existing rows, each in a source
// transaction of its own (as eos_cdc's stream: one change per transaction), changing what
// eos_cdc's updates change (amount, qty, note, updated_at; account and booked_at stay).
//
// native_apply: a source database (bench_native_src) on the bed's cluster (wal_level=logical,
// test/services/services.sh) holds the table with the initial rows; a publication and a
// pgoutput slot are made, and only then are the updates run, so that the slot holds them as
// a backlog. The target (the bench's database, the same cluster) holds the same initial rows;
// a subscription is created disabled (copy_data=false, create_slot=false, slot_name = the
// slot) and then enabled: what is timed is the apply of the backlog, from the first applied
// transaction to the one whose commit is past the last update's LSN
// (pg_replication_origin_status.remote_lsn, polled every 5 ms).
//
// eos_cdc_native: the same updates as Debezium change events (cdc.go's encoder, the
// JsonConverter envelope with schemas, before and after, one transaction per change), are
// preloaded into a topic before the sink starts; eos_cdc's child applies them to a table
// pre-populated with the same initial rows, at the cdc plugin's defaults.
//
// The source table, the subscriber's table and eosink's table are all checked against the
// final state computed in Go (count and md5; the replicas also row by row).
//
// eos_cdc_vs_native_apply = eos_cdc_native's rate / native_apply's. No target is set for it.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	nativeTopic    = "bench-native"
	nativeSourceDB = "bench_native_src"
	nativeName     = "bench_native" // publication, slot and subscription
	nativeTable    = "native_accounts"
)

// nativeApply is the phase: the workload, the topic, then BENCH_NATIVE_RUNS (default 1)
// alternating runs of native_apply and eos_cdc_native, the median of each kept.
func (b *bench) nativeApply(ctx context.Context) error {
	rows, updates := envInt("BENCH_NATIVE_ROWS", 100_000), envInt("BENCH_NATIVE_UPDATES", 200_000)
	if rows <= 0 || updates <= 0 {
		return fmt.Errorf("BENCH_NATIVE_ROWS and BENCH_NATIVE_UPDATES must be positive")
	}
	w := nativeGenerate(rows, updates)
	nativeInitial = w.initial
	d := w.data()
	info := &NativeInfo{Rows: rows, Updates: updates, UpdatesPerTx: 1, Topic: nativeTopic, Limits: nativeLimits}
	b.rep.Native = info
	b.logf("native: %d rows, %d updates (one a source transaction); preloading their Debezium events (topic %s)", rows, updates, nativeTopic)
	took, err := preloadNative(ctx, b.brokers, b.partitions, w, d)
	if err != nil {
		return err
	}
	info.AvgValueBytes = float64(d.valueBytes) / float64(d.records)
	b.logf("native: preloaded %d events in %s, %.0f bytes a value", d.records, took.Round(time.Millisecond), info.AvgValueBytes)
	if err := b.loadExpected(ctx, d); err != nil {
		return err
	}
	_, info.SourceMD5 = d.expectedHash()
	info.SourceOK = true
	runs := map[string][]*Measurement{}
	var bad []string
	for round := range max(1, envInt("BENCH_NATIVE_RUNS", 1)) {
		native := func() error {
			m, err := b.nativeRun(ctx, w, d, info)
			if err != nil {
				return err
			}
			runs["native_apply"] = append(runs["native_apply"], m)
			return nil
		}
		eos := func() error {
			if err := checkpoint(ctx, b.url); err != nil {
				return err
			}
			m, err := b.child(ctx, "eos_cdc_native", "eosink's cdc plugin (defaults) on the native workload's updates as Debezium events, "+
				"into a table holding the initial rows", "native", "-mode", "eos", "-topic", nativeTopic, "-format", "cdc",
				"-records", strconv.FormatInt(d.records, 10), "-batch", strconv.Itoa(envInt("BENCH_CDC_BATCH", 0)))
			if err != nil {
				return err
			}
			if m.Verification, err = b.verifyCDC(ctx, d, fmt.Sprintf("t%d_eos_cdc_native", seq)); err != nil {
				return err
			}
			b.logf("eos_cdc_native: %s", m.Verification)
			runs["eos_cdc_native"] = append(runs["eos_cdc_native"], m)
			return nil
		}
		first, second := native, eos
		if round%2 == 1 { // alternate, so that a drift over the rounds favours neither
			first, second = eos, native
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	for name, ms := range runs {
		for _, m := range ms {
			if !m.Verification.OK {
				bad = append(bad, name+": "+m.Verification.String())
			}
		}
		b.rep.Measurements[name] = median(ms)
	}
	if !info.SourceOK {
		bad = append(bad, "source: the table does not hold the expected final state")
	}
	if len(bad) > 0 {
		return fmt.Errorf("verification: %s", strings.Join(bad, "; "))
	}
	b.logf("native: eos_cdc_vs_native_apply %.2f", nativeRatio(b.rep.Measurements["eos_cdc_native"], b.rep.Measurements["native_apply"]))
	return nil
}

func checkpoint(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CHECKPOINT")
	return err
}

// nativeDrop removes what a native run leaves: the subscription (in the bench's database),
// the slot and the source database.
func nativeDrop(ctx context.Context, conn *pgx.Conn) error {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_subscription WHERE subname = $1", nativeName).Scan(&n); err != nil {
		return err
	}
	if n > 0 { // slot_name = NONE: the drop does not need the publisher
		for _, q := range []string{"ALTER SUBSCRIPTION " + nativeName + " DISABLE", "ALTER SUBSCRIPTION " + nativeName + " SET (slot_name = NONE)",
			"DROP SUBSCRIPTION " + nativeName} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
	}
	for range 100 { // the walsender may take a moment to release the slot
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", nativeName)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+nativeSourceDB+" WITH (FORCE)")
	return err
}

// nativeRun is one native_apply run: a fresh source, the updates into the slot, then the
// subscription's apply of them, timed and verified.
func (b *bench) nativeRun(ctx context.Context, w *nativeWorkload, d *cdcData, info *NativeInfo) (*Measurement, error) {
	cfg, err := pgx.ParseConfig(b.url)
	if err != nil {
		return nil, err
	}
	dst, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer dst.Close(context.Background())
	if err := nativeDrop(ctx, dst); err != nil {
		return nil, err
	}
	defer func() {
		if err := nativeDrop(context.Background(), dst); err != nil {
			b.logf("native: cleanup: %v", err)
		}
	}()
	if _, err := dst.Exec(ctx, "CREATE DATABASE "+nativeSourceDB); err != nil {
		return nil, err
	}
	_ = dst.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&info.Postgres)
	scfg := cfg.Copy()
	scfg.Database = nativeSourceDB
	src, err := pgx.ConnectConfig(ctx, scfg)
	if err != nil {
		return nil, err
	}
	defer src.Close(context.Background())
	if err := copyRows(ctx, src, cdcSchema, nativeTable, w.initial, false); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if err := copyRows(ctx, dst, cdcSchema, nativeTable, w.initial, false); err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	t := pgx.Identifier{cdcSchema, nativeTable}.Sanitize()
	var slotLSN string
	if _, err := src.Exec(ctx, "CREATE PUBLICATION "+nativeName+" FOR TABLE "+t); err != nil {
		return nil, fmt.Errorf("publication: %w", err)
	}
	if err := src.QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", nativeName).Scan(&slotLSN); err != nil {
		return nil, fmt.Errorf("slot: %w", err)
	}
	began := time.Now()
	lastLSN, err := nativeUpdates(ctx, src, t, w.updates)
	if err != nil {
		return nil, fmt.Errorf("source updates: %w", err)
	}
	info.WorkloadSeconds = time.Since(began).Seconds()
	var n int64
	var h string
	if err := src.QueryRow(ctx, fmt.Sprintf(cdcHashSQL, t)).Scan(&n, &h); err != nil {
		return nil, err
	}
	en, eh := d.expectedHash()
	info.SourceOK = info.SourceOK && n == en && h == eh
	_ = src.QueryRow(ctx, "SELECT ($1::text::pg_lsn - $2::text::pg_lsn)::bigint", lastLSN, slotLSN).Scan(&info.BacklogWALBytes)
	b.logf("native: %d updates on the source in %.1fs (%d bytes of WAL in the slot's backlog); source %d rows md5 %s (expected %s)",
		len(w.updates), info.WorkloadSeconds, info.BacklogWALBytes, n, h, eh)

	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, nativeSourceDB)
	if cfg.Password != "" {
		conninfo += " password=" + cfg.Password
	}
	if _, err := dst.Exec(ctx, "CREATE SUBSCRIPTION "+nativeName+" CONNECTION '"+strings.ReplaceAll(conninfo, "'", "''")+"' PUBLICATION "+nativeName+
		" WITH (enabled = false, create_slot = false, copy_data = false, slot_name = '"+nativeName+"')"); err != nil {
		return nil, fmt.Errorf("subscription: %w", err)
	}
	if _, err := dst.Exec(ctx, "CHECKPOINT"); err != nil {
		return nil, err
	}
	m := &Measurement{Name: "native_apply", Description: "PostgreSQL logical replication (pgoutput, one subscription) applying the backlog " +
		"of the same updates in its slot, into a table holding the initial rows"}
	k0, p0 := serviceCPU()
	mb0, mt0 := machineCPU()
	enabled := time.Now()
	if _, err := dst.Exec(ctx, "ALTER SUBSCRIPTION "+nativeName+" ENABLE"); err != nil {
		return nil, err
	}
	var first, end time.Time
	var base int64
	lastMove, lastSeen := time.Now(), ""
	stall := stallTimeout()
	for {
		var remote string
		var done bool
		var frac float64
		err := dst.QueryRow(ctx, `SELECT coalesce(s.remote_lsn, '0/0')::text, coalesce(s.remote_lsn > $1::text::pg_lsn, false),
  greatest(0, coalesce((s.remote_lsn - $2::text::pg_lsn) / nullif($1::text::pg_lsn - $2::text::pg_lsn, 0), 0))::float8
FROM pg_subscription sub LEFT JOIN pg_replication_origin_status s ON s.external_id = 'pg_' || sub.oid WHERE sub.subname = $3`,
			lastLSN, slotLSN, nativeName).Scan(&remote, &done, &frac)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if remote != lastSeen {
			lastSeen, lastMove = remote, now
		} else if now.Sub(lastMove) > stall {
			return nil, fmt.Errorf("stalled: the subscription applied nothing for %s, at remote_lsn %s of %s", stall, remote, lastLSN)
		}
		if first.IsZero() && remote != "0/0" && frac > 0 {
			// The updates are all alike: the share of the backlog's WAL applied is the share of the updates.
			first, base = now, int64(frac*float64(len(w.updates)))
		}
		if done {
			end = now
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	k1, p1 := serviceCPU()
	mb1, mt1 := machineCPU()
	// The apply worker and the walsender started at ENABLE: their CPU is this run's.
	var applyPID, sendPID int
	if err := dst.QueryRow(ctx, `SELECT coalesce((SELECT pid FROM pg_stat_subscription WHERE subname = $1 AND relid IS NULL LIMIT 1), 0),
  coalesce((SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1), 0)`, nativeName).Scan(&applyPID, &sendPID); err == nil {
		info.ApplyWorkerCPU, _ = procCPU(fmt.Sprintf("/proc/%d", applyPID))
		info.WalsenderCPU, _ = procCPU(fmt.Sprintf("/proc/%d", sendPID))
	}
	if first.IsZero() || !end.After(first) {
		first, base = enabled, 0
	}
	m.Records, m.Seconds = int64(len(w.updates))-base, end.Sub(first).Seconds()
	m.RecordsPerSecond = float64(m.Records) / m.Seconds
	m.CPU.Kafka, m.CPU.Postgres = k1-k0, p1-p0
	m.CPUSecondsPerM = (m.CPU.Kafka + m.CPU.Postgres) / float64(len(w.updates)) * 1e6
	m.MachineCPUBusy = busyShare(mb0, mt0, mb1, mt1)
	info.StartupSeconds = first.Sub(enabled).Seconds()
	m.Note = fmt.Sprintf("%.2fs from ENABLE to the first applied transaction, %.2fs to the last; CPU s: apply worker %.2f, walsender %.2f",
		info.StartupSeconds, end.Sub(enabled).Seconds(), info.ApplyWorkerCPU, info.WalsenderCPU)
	if m.Verification, err = b.verifyCDC(ctx, d, nativeTable); err != nil {
		return nil, err
	}
	b.logf("native_apply: %d updates in %.2fs: %.0f updates/s, %.1f CPU s per million (PostgreSQL), %s; %s", m.Records, m.Seconds,
		m.RecordsPerSecond, m.CPUSecondsPerM, m.Note, m.Verification)
	return m, nil
}
