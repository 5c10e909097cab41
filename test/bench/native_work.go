package main

// The native anchor's workload (native.go): the rows, the updates, their SQL and their
// Debezium events, and the report's section.

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// nativeLimits says what bounds each side of the comparison (in the report).
var nativeLimits = map[string]string{
	"native_apply": "one apply worker per subscription (PostgreSQL 15: no parallel apply; later versions parallelize " +
		"only large streamed transactions): every source transaction is applied in commit order by one process, " +
		"one row lookup and update and one local commit each (synchronous_commit=off on the subscriber by default), " +
		"with the walsender decoding the WAL in a second process; it does not scale with cores or keys",
	"eos_cdc_native": "Kafka partitions (one pipeline each) and batches: changes are merged per batch " +
		"(the cdc plugin's defaults: 5,000 records or 8 MiB) into staging COPYs, a positions upsert and merge statements, one transaction " +
		"per batch with the offsets; bounded by PostgreSQL's CPU for those statements and by the decoding of " +
		"the JSON envelopes (the schema with every value: avg_value_bytes)",
}

// NativeInfo describes the native anchor's workload (report section native_apply).
type NativeInfo struct {
	Rows            int     `json:"rows"`
	Updates         int     `json:"updates"`
	UpdatesPerTx    int     `json:"updates_per_source_transaction"`
	Topic           string  `json:"topic"`
	AvgValueBytes   float64 `json:"avg_value_bytes"`
	WorkloadSeconds float64 `json:"workload_seconds"` // the updates on the source, each run (not timed)
	// StartupSeconds: from ALTER SUBSCRIPTION ... ENABLE to the first applied transaction.
	StartupSeconds float64 `json:"startup_seconds"`
	// BacklogWALBytes: the WAL between the slot's creation and the last update.
	BacklogWALBytes int64 `json:"backlog_wal_bytes"`
	// ApplyWorkerCPU and WalsenderCPU: the CPU seconds of the subscription's apply worker
	// and of the walsender decoding the slot, from ENABLE to the end of the apply (last run).
	ApplyWorkerCPU float64           `json:"apply_worker_cpu_seconds"`
	WalsenderCPU   float64           `json:"walsender_cpu_seconds"`
	SourceMD5      string            `json:"source_md5"`
	SourceOK       bool              `json:"source_ok"` // the source table holds the expected final state
	Postgres       string            `json:"postgres"`
	Limits         map[string]string `json:"limits"`
}

// nativeUpdate is one update of the workload: the row's state before and after it.
type nativeUpdate struct {
	id            int64
	before, after *cdcRow
}

// nativeWorkload is the initial rows (ids 1..n) and the updates, in order.
type nativeWorkload struct {
	initial []*cdcRow // initial[i] is row i+1
	updates []nativeUpdate
}

// nativeGenerate makes the workload deterministically. Update k (1-based) sets updated_at
// to cdcEpoch + k ms + less than 1 ms: later than every earlier state of every row.
func nativeGenerate(rows, updates int) *nativeWorkload {
	rng := rand.New(rand.NewPCG(26, 2026))
	w := &nativeWorkload{initial: make([]*cdcRow, rows), updates: make([]nativeUpdate, 0, updates)}
	note := func() *string {
		if rng.IntN(5) == 0 {
			return nil
		}
		s := "payment received, thank you #" + strconv.Itoa(rng.IntN(100000))
		return &s
	}
	for i := range w.initial {
		w.initial[i] = &cdcRow{account: fmt.Sprintf("acct-%04d", rng.IntN(10000)), cents: rng.Int64N(20_000_000) - 1_000_000,
			qty: rng.Int32N(1000), note: note(), updated: cdcEpoch - 86_400_000_000 + int64(i), booked: cdcEpoch - rng.Int64N(86_400_000_000)}
	}
	cur := append([]*cdcRow(nil), w.initial...)
	for k := int64(1); k <= int64(updates) && rows > 0; k++ {
		id := rng.Int64N(int64(rows)) + 1
		old := cur[id-1]
		r := &cdcRow{account: old.account, cents: rng.Int64N(20_000_000) - 1_000_000, qty: rng.Int32N(1000), note: note(),
			updated: cdcEpoch + k*1000 + rng.Int64N(1000), booked: old.booked}
		cur[id-1] = r
		w.updates = append(w.updates, nativeUpdate{id: id, before: old, after: r})
	}
	return w
}

// data is the expected final state after every update.
func (w *nativeWorkload) data() *cdcData {
	d := &cdcData{ops: map[string]int64{}, final: make(map[int64]*cdcRow, len(w.initial))}
	for i, r := range w.initial {
		d.final[int64(i)+1] = r
	}
	for _, u := range w.updates {
		d.final[u.id] = u.after
	}
	return d
}

// centsText is numeric(14,2)'s text of cents.
func centsText(c int64) string {
	sign := ""
	if c < 0 {
		c, sign = -c, "-"
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// nativeUpdateSQL is the source's UPDATE for u, with literals (sent in the simple protocol).
func nativeUpdateSQL(table string, u nativeUpdate) string {
	note := "NULL"
	if u.after.note != nil {
		note = "'" + strings.ReplaceAll(*u.after.note, "'", "''") + "'"
	}
	return fmt.Sprintf("UPDATE %s SET amount = %s, qty = %d, note = %s, updated_at = '%s' WHERE id = %d", table,
		centsText(u.after.cents), u.after.qty, note, time.UnixMicro(u.after.updated).UTC().Format("2006-01-02 15:04:05.000000Z"), u.id)
}

// nativeRatio is eos_cdc_vs_native_apply: eosink's rate over the subscription's (0 when
// either is missing).
func nativeRatio(eos, native *Measurement) float64 {
	if eos == nil || native == nil || native.RecordsPerSecond <= 0 {
		return 0
	}
	return eos.RecordsPerSecond / native.RecordsPerSecond
}

// nativeInitial is the running phase's initial rows, for nativeTableCreate (the child's
// table is created by b.child through b.table).
var nativeInitial []*cdcRow

// copyRows creates table (schema.name, with loaded_at when withLoaded) and copies rows into it.
func copyRows(ctx context.Context, conn *pgx.Conn, schema, name string, rows []*cdcRow, withLoaded bool) error {
	t := pgx.Identifier{schema, name}.Sanitize()
	cols := cdcColumns
	if withLoaded {
		cols += ", loaded_at timestamptz NOT NULL DEFAULT clock_timestamp()"
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()+"; DROP TABLE IF EXISTS "+t+"; CREATE TABLE "+t+" ("+cols+")"); err != nil {
		return err
	}
	src := pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		var note any
		if r.note != nil {
			note = *r.note
		}
		return []any{int64(i) + 1, r.account, pgtype.Numeric{Int: big.NewInt(r.cents), Exp: -2, Valid: true}, r.qty, note,
			time.UnixMicro(r.updated).UTC(), time.UnixMicro(r.booked).UTC()}, nil
	})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, name}, []string{"id", "account", "amount", "qty", "note", "updated_at", "booked_at"}, src); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "VACUUM ANALYZE "+t)
	return err
}

// nativeTableCreate is b.table for kind "native": eos_cdc_native's replica with the initial rows.
func (b *bench) nativeTableCreate(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return copyRows(ctx, conn, cdcSchema, name, nativeInitial, true)
}

// preloadNative produces the workload's updates as change events, one a source transaction
// (oneTxPerChange), keyed by id over the partitions.
func preloadNative(ctx context.Context, brokers string, partitions int, w *nativeWorkload, d *cdcData) (time.Duration, error) {
	if err := createTopic(ctx, brokers, nativeTopic, partitions); err != nil {
		return 0, err
	}
	began := time.Now()
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true,
		"linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 64 << 10, "compression.type": "none"}, false)
	if err != nil {
		return 0, err
	}
	out := newCDCOut(ctx, p, cdcStream{topic: nativeTopic}, partitions, d)
	for k, u := range w.updates {
		d.ops["u"]++
		if err := out.change("u", u.id, u.before, u.after, int64(k)+1); err != nil {
			_, _ = p.close(10 * time.Second)
			return 0, err
		}
	}
	if ps, err := p.close(5 * time.Minute); err != nil {
		return 0, fmt.Errorf("preload %s: %w (%s)", nativeTopic, err, ps)
	}
	return time.Since(began), nil
}

// nativeUpdates runs the updates on the source, one a transaction (synchronous_commit off
// in this session: the WAL is the same, the workload is only faster to make). It returns an
// LSN inside the last transaction: the last commit is the only one past it.
func nativeUpdates(ctx context.Context, conn *pgx.Conn, table string, updates []nativeUpdate) (string, error) {
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return "", err
	}
	var sb strings.Builder
	for i, u := range updates[:len(updates)-1] {
		sb.WriteString("BEGIN; ")
		sb.WriteString(nativeUpdateSQL(table, u))
		sb.WriteString("; COMMIT;\n")
		if (i+1)%500 == 0 || i == len(updates)-2 {
			if _, err := conn.Exec(ctx, sb.String()); err != nil { // no arguments: the simple protocol
				return "", err
			}
			sb.Reset()
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, nativeUpdateSQL(table, updates[len(updates)-1])); err != nil {
		return "", err
	}
	var lsn string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return "", err
	}
	return lsn, tx.Commit(ctx)
}

// printNative prints the native anchor's limits.
func printNative(n *NativeInfo) {
	if n == nil {
		return
	}
	fmt.Println()
	fmt.Printf("native anchor (%d rows, %d updates, one a source transaction, PostgreSQL %s; source verified: %v):\n",
		n.Rows, n.Updates, n.Postgres, n.SourceOK)
	for _, k := range []string{"native_apply", "eos_cdc_native"} {
		fmt.Fprintf(os.Stdout, "  %s limits: %s\n", k, n.Limits[k])
	}
}
