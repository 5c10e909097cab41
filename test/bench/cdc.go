package main

// The change-event benchmark (issue 10): eosink's cdc plugin (eos_cdc) and the Debezium JDBC
// sink connector in upsert/delete mode (peer_cdc) apply the SAME topic of Debezium change
// events to identical tables, and both results are checked against the final state computed
// from the events that were produced.
//
// The topic is produced here, synthetically: what Debezium's PostgreSQL connector writes
// with the JsonConverter (schemas on) for a table with REPLICA IDENTITY FULL, one change per
// source transaction. Keys are {"id":…} structs; values are the full envelope (before, after,
// source with lsn, sequence, txId and ts_ms, op, ts_ms/us/ns); a delete is followed by a
// tombstone, as with Debezium's default tombstones.on.delete=true. The last record of every
// partition is the insert of a fresh key (a sentinel): once all sentinels are in a table,
// every partition has been applied up to its end.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

// cdcRow is one source row's state.
type cdcRow struct {
	account string
	cents   int64 // amount, numeric(14,2)
	qty     int32
	note    *string
	updated int64 // timestamptz, microseconds since the epoch (ZonedTimestamp on the wire)
	booked  int64 // timestamp, microseconds since the epoch (MicroTimestamp on the wire)
}

// cdcData is what was produced: the record count and the expected final state.
type cdcData struct {
	records    int64            // on the topic, tombstones included
	ops        map[string]int64 // c, u, d, tombstone
	final      map[int64]*cdcRow
	sentinels  []int64
	valueBytes int64
	// transactions and markers: the source transactions and BEGIN/END markers of a stream
	// with transaction metadata (eos_cdc_tx's).
	transactions, markers int64
}

const cdcRowSchema = `{"type":"int64","optional":false,"field":"id"},` +
	`{"type":"string","optional":false,"field":"account"},` +
	`{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"14"},"field":"amount"},` +
	`{"type":"int32","optional":false,"field":"qty"},` +
	`{"type":"string","optional":true,"field":"note"},` +
	`{"type":"string","optional":false,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"updated_at"},` +
	`{"type":"int64","optional":false,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"booked_at"}`

// cdcValueSchema is the value schema Debezium 3.x's PostgreSQL connector writes for
// public.accounts (topic prefix "bench") with the JsonConverter, schemas on.
const cdcValueSchema = `{"type":"struct","fields":[` +
	`{"type":"struct","fields":[` + cdcRowSchema + `],"optional":true,"name":"bench.public.accounts.Value","field":"before"},` +
	`{"type":"struct","fields":[` + cdcRowSchema + `],"optional":true,"name":"bench.public.accounts.Value","field":"after"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},` +
	`{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"},` +
	`{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},` +
	`{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"}],` +
	`"optional":false,"name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},` +
	`{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},` +
	`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},{"type":"int64","optional":true,"field":"ts_us"},` +
	`{"type":"int64","optional":true,"field":"ts_ns"}],"optional":false,"name":"bench.public.accounts.Envelope","version":2}`

const cdcKeySchema = `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"bench.public.accounts.Key"}`

// cdcSchema holds the cdc contenders' tables and the expected state (a test sets its own).
var cdcSchema = "bench"

// cdcEpoch is the source clock's start: 2026-11-30T07:00:00Z in microseconds.
var cdcEpoch = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC).UnixMicro()

// decimalBytes is v as Kafka Connect's Decimal carries it: the unscaled value's shortest
// big-endian two's complement (Java's BigInteger.toByteArray).
func decimalBytes(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	i := 0
	for i < 7 && ((b[i] == 0 && b[i+1]&0x80 == 0) || (b[i] == 0xff && b[i+1]&0x80 != 0)) {
		i++
	}
	return b[i:]
}

func microText(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000")
}

func appendCDCRow(buf []byte, id int64, r *cdcRow) []byte {
	if r == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"account":"`...)
	buf = append(buf, r.account...)
	buf = append(buf, `","amount":"`...)
	buf = base64.StdEncoding.AppendEncode(buf, decimalBytes(r.cents))
	buf = append(buf, `","qty":`...)
	buf = strconv.AppendInt(buf, int64(r.qty), 10)
	buf = append(buf, `,"note":`...)
	if r.note == nil {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendQuote(buf, *r.note)
	}
	buf = append(buf, `,"updated_at":"`...)
	buf = time.UnixMicro(r.updated).UTC().AppendFormat(buf, "2006-01-02T15:04:05.999999Z07:00")
	buf = append(buf, `","booked_at":`...)
	buf = strconv.AppendInt(buf, r.booked, 10)
	return append(buf, '}')
}

// cdcSource is what one change event says of its source: its LSN, the commit LSN before
// it (source.sequence[0]; prevNull writes null, as for the first transaction a connector
// streams), its transaction and, for a stream with transaction metadata, its transaction
// block.
type cdcSource struct {
	tsMs, lsn, prev, txID int64
	prevNull              bool
	block                 bool  // the transaction block: id "<txID>:<lsn>", total_order
	order                 int64 // total_order and data_collection_order (one table)
}

// oneTxPerChange is the source of change seq when every change is a transaction of its own
// and the stream has no transaction metadata (eos_cdc's topic): LSNs and commits increase.
func oneTxPerChange(seq int64) cdcSource {
	lsn := 0x2000000 + seq*0x68
	return cdcSource{tsMs: cdcEpoch/1000 + seq/10, lsn: lsn, prev: lsn - 0x30, txID: 1000 + seq}
}

// appendCDCValue writes one change event: the JsonConverter envelope around Debezium's.
func appendCDCValue(buf []byte, op string, id int64, before, after *cdcRow, src cdcSource) []byte {
	tsMs := src.tsMs
	buf = append(buf, `{"schema":`+cdcValueSchema+`,"payload":{"before":`...)
	buf = appendCDCRow(buf, id, before)
	buf = append(buf, `,"after":`...)
	buf = appendCDCRow(buf, id, after)
	buf = append(buf, `,"source":{"version":"3.6.0.Final","connector":"postgresql","name":"bench","ts_ms":`...)
	buf = strconv.AppendInt(buf, tsMs, 10)
	buf = append(buf, `,"snapshot":"false","db":"shop","sequence":"[`...)
	if src.prevNull {
		buf = append(buf, `null`...)
	} else {
		buf = append(buf, `\"`...)
		buf = strconv.AppendInt(buf, src.prev, 10)
		buf = append(buf, `\"`...)
	}
	buf = append(buf, `,\"`...)
	buf = strconv.AppendInt(buf, src.lsn, 10)
	buf = append(buf, `\"]","ts_us":`...)
	buf = strconv.AppendInt(buf, tsMs*1000, 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, tsMs*1_000_000, 10)
	buf = append(buf, `,"schema":"public","table":"accounts","txId":`...)
	buf = strconv.AppendInt(buf, src.txID, 10)
	buf = append(buf, `,"lsn":`...)
	buf = strconv.AppendInt(buf, src.lsn, 10)
	if src.block {
		buf = append(buf, `,"xmin":null},"transaction":{"id":"`...)
		buf = strconv.AppendInt(buf, src.txID, 10)
		buf = append(buf, ':')
		buf = strconv.AppendInt(buf, src.lsn, 10)
		buf = append(buf, `","total_order":`...)
		buf = strconv.AppendInt(buf, src.order, 10)
		buf = append(buf, `,"data_collection_order":`...)
		buf = strconv.AppendInt(buf, src.order, 10)
		buf = append(buf, `},"op":"`...)
	} else {
		buf = append(buf, `,"xmin":null},"transaction":null,"op":"`...)
	}
	buf = append(buf, op...)
	buf = append(buf, `","ts_ms":`...)
	buf = strconv.AppendInt(buf, tsMs+3, 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, (tsMs+3)*1000, 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, (tsMs+3)*1_000_000, 10)
	return append(buf, "}}"...)
}

func cdcKey(id int64) []byte {
	return append(strconv.AppendInt([]byte(`{"schema":`+cdcKeySchema+`,"payload":{"id":`), id, 10), "}}"...)
}

// preloadCDC produces n change records (events and tombstones) over the partitions, keyed
// by id (partition id % partitions, so every change of a key is in one partition, in order):
// 70% inserts of new keys, 25% updates and 5% deletes (each with its tombstone) of random
// live keys, then one sentinel insert per partition. It returns the expected final state.
// With st.perTx > 0 the same changes (the same keys, ops and rows) are grouped into source
// transactions with Debezium's transaction metadata (cdc_tx.go).
func preloadCDC(ctx context.Context, brokers string, st cdcStream, partitions int, n int64) (*cdcData, time.Duration, error) {
	topic := st.topic
	if err := createTopic(ctx, brokers, topic, partitions); err != nil {
		return nil, 0, err
	}
	if st.perTx > 0 {
		if err := createTopic(ctx, brokers, st.txTopic, 1); err != nil { // one partition: the ENDs' order is the commit order
			return nil, 0, err
		}
	}
	began := time.Now()
	// No resend: every change of a key must stay in order (the idempotent producer keeps it);
	// a change that failed to be delivered fails the preload.
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true,
		"linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 64 << 10, "compression.type": "none"}, false)
	if err != nil {
		return nil, 0, err
	}
	closed := false
	defer func() {
		if !closed {
			_, _ = p.close(10 * time.Second)
		}
	}()
	d := &cdcData{ops: map[string]int64{}, final: map[int64]*cdcRow{}}
	out := newCDCOut(ctx, p, st, partitions, d)
	rng := rand.New(rand.NewPCG(10, 2026))
	var live []int64
	pos := map[int64]int{}
	var nextID, seq int64 = 1, 0
	newRow := func() *cdcRow {
		r := &cdcRow{account: fmt.Sprintf("acct-%04d", rng.IntN(10000)), cents: rng.Int64N(20_000_000) - 1_000_000,
			qty: rng.Int32N(1000), updated: cdcEpoch + seq*1000 + rng.Int64N(1000), booked: cdcEpoch - rng.Int64N(86_400_000_000)}
		if rng.IntN(5) != 0 {
			s := "payment received, thank you #" + strconv.Itoa(rng.IntN(100000))
			r.note = &s
		}
		return r
	}
	emit := func(op string, id int64, before, after *cdcRow) error {
		seq++
		d.ops[op]++
		return out.change(op, id, before, after, seq)
	}
	insert := func(id int64) error {
		r := newRow()
		d.final[id] = r
		pos[id] = len(live)
		live = append(live, id)
		return emit("c", id, nil, r)
	}
	body := n - int64(partitions)
	for d.records < body {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		op := rng.IntN(100)
		switch {
		case op < 70 || len(live) == 0:
			if err := insert(nextID); err != nil {
				return nil, 0, err
			}
			nextID++
		case op < 95 || d.records+2 > body:
			id := live[rng.IntN(len(live))]
			old := d.final[id]
			r := newRow()
			r.account = old.account // an account keeps its name; the rest changes
			d.final[id] = r
			if err := emit("u", id, old, r); err != nil {
				return nil, 0, err
			}
		default:
			i := rng.IntN(len(live))
			id := live[i]
			old := d.final[id]
			last := live[len(live)-1]
			live[i], pos[last] = last, i
			live = live[:len(live)-1]
			delete(pos, id)
			delete(d.final, id)
			if err := emit("d", id, old, nil); err != nil {
				return nil, 0, err
			}
			d.ops["tombstone"]++
			if err := out.tombstone(id); err != nil {
				return nil, 0, err
			}
		}
	}
	// One sentinel per partition, the last record of each.
	nextID += (int64(partitions) - nextID%int64(partitions)) % int64(partitions)
	for i := range int64(partitions) {
		id := nextID + i
		d.sentinels = append(d.sentinels, id)
		if err := insert(id); err != nil {
			return nil, 0, err
		}
	}
	if err := out.flush(); err != nil {
		return nil, 0, err
	}
	closed = true
	if ps, err := p.close(5 * time.Minute); err != nil {
		return nil, 0, fmt.Errorf("preload %s: %w (%s)", topic, err, ps)
	}
	return d, time.Since(began), nil
}

// The replica table, created identically for both contenders. loaded_at is not in the
// events: it is filled by its default when a row is first inserted (the peer's timing reads
// it), and both sinks leave it alone on update (the cdc plugin is told to exclude it).
const cdcColumns = `id bigint PRIMARY KEY, account text NOT NULL, amount numeric(14,2) NOT NULL, qty integer NOT NULL,
  note text, updated_at timestamptz NOT NULL, booked_at timestamp NOT NULL`

func (b *bench) cdcTable(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t := pgx.Identifier{cdcSchema, name}.Sanitize()
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+t+"; CREATE TABLE "+t+" ("+cdcColumns+
		", loaded_at timestamptz NOT NULL DEFAULT clock_timestamp())")
	return err
}

// CDCInfo describes the change topic of the cdc contenders.
type CDCInfo struct {
	Topic         string           `json:"topic"`
	Source        string           `json:"source"`
	Records       int64            `json:"records"` // tombstones included
	Ops           map[string]int64 `json:"ops"`
	FinalRows     int64            `json:"final_rows"`
	FinalMD5      string           `json:"final_md5"`
	AvgValueBytes float64          `json:"avg_value_bytes"`
	// Tx is eos_cdc_tx's stream: the same changes in source transactions.
	Tx *CDCTxInfo `json:"tx,omitempty"`
	// Positions: eos_cdc's positions rows after its last run (cdc_positions_int: the
	// table's key is one bigint), the deleted keys' among them, and the table's size.
	Positions *PositionsSize `json:"positions,omitempty"`
}

// cdc runs eos_cdc and (with peer) peer_cdc on one topic of Debezium change events and
// verifies both tables against the final state computed from the produced events.
func (b *bench) cdc(ctx context.Context, peer bool) error {
	n := int64(envInt("BENCH_CDC_RECORDS", int(min(b.records, 500_000))))
	const topic = "bench-cdc"
	b.logf("preloading %d Debezium change records (70%% c, 25%% u, 5%% d with tombstones; topic %s)", n, topic)
	d, took, err := preloadCDC(ctx, b.brokers, cdcStream{topic: topic}, b.partitions, n)
	if err != nil {
		return err
	}
	info := &CDCInfo{Topic: topic, Source: "synthetic (test/bench/cdc.go): Debezium PostgreSQL connector's JsonConverter output, schemas on",
		Records: d.records, Ops: d.ops, AvgValueBytes: float64(d.valueBytes) / float64(d.records)}
	info.FinalRows, info.FinalMD5 = d.expectedHash()
	b.rep.CDC = info
	b.logf("preloaded %d records (%v) in %s, %.0f bytes a value; final state %d rows, md5 %s", d.records, d.ops,
		took.Round(time.Millisecond), info.AvgValueBytes, info.FinalRows, info.FinalMD5)
	if err := b.loadExpected(ctx, d); err != nil {
		return err
	}
	dTx := b.cdcTxStream(ctx, d, n) // eos_cdc_tx's; nil when BENCH_CDC_TX=0 or its preload failed

	// BENCH_CDC_REPEAT rounds (default 1), eos_cdc and peer_cdc interleaved; the run with the
	// median rate is kept, and every run's table must verify.
	ids := make([]string, len(d.sentinels))
	for i, id := range d.sentinels {
		ids[i] = strconv.FormatInt(id, 10)
	}
	runs := map[string][]*Measurement{}
	runEOS := func() error {
		// The cdc plugin's own batch defaults (cdc.DefaultBatchRecords and
		// DefaultBatchBytes) unless BENCH_CDC_BATCH sets the records: users run the defaults.
		args := []string{"-mode", "eos", "-topic", topic, "-format", "cdc", "-records", strconv.FormatInt(d.records, 10),
			"-batch", strconv.Itoa(envInt("BENCH_CDC_BATCH", 0)), "-pool", strconv.Itoa(envInt("BENCH_CDC_POOL", 0))}
		if p := os.Getenv("BENCH_PROFILE_CDC"); p != "" {
			args = append(args, "-cpuprofile", p)
		}
		m, err := b.child(ctx, "eos_cdc", "eosink's cdc plugin (JSON, schemas on) on the change topic: positions, deletes, upserts, offsets in one transaction per batch",
			"cdc", args...)
		if err != nil {
			return err
		}
		if m.Verification, err = b.verifyCDC(ctx, d, fmt.Sprintf("t%d_eos_cdc", seq)); err != nil {
			return err
		}
		b.logf("eos_cdc: %s", m.Verification)
		if ps, err := b.positionsSize(ctx, fmt.Sprintf("t%d_eos_cdc", seq)); err != nil {
			b.logf("eos_cdc: positions size: %v", err)
		} else {
			b.rep.CDC.Positions = ps
			b.logf("eos_cdc: positions: %d rows (%d of deleted keys), their share %d bytes with the index (%.0f a row; the table: %d rows of all runs, %d bytes), %.2f of the replica's %d bytes (%d rows)",
				ps.Rows, ps.Deleted, ps.Bytes, ps.BytesPerRow, ps.TableRows, ps.TableBytes, ps.PositionsVsT, ps.TargetBytes, ps.TargetRows)
		}
		runs["eos_cdc"] = append(runs["eos_cdc"], m)
		return nil
	}
	runPeer := func(round int) error {
		table := fmt.Sprintf("peer_cdc_%d", round+1)
		if err := b.cdcTable(ctx, table); err != nil {
			return err
		}
		done := fmt.Sprintf("SELECT count(*) >= %d FROM %s WHERE id IN (%s)", len(ids), pgx.Identifier{cdcSchema, table}.Sanitize(), strings.Join(ids, ","))
		pm, err := b.runPeer(ctx, "peer_cdc", "Debezium JDBC sink connector on Kafka Connect 4.1.1, standalone, 2 tasks, insert.mode=upsert, "+
			"delete.enabled=true, primary.key.mode=record_key, on the same change topic", topic, int64(len(ids)), d.records,
			"PEER_TABLE="+table, "PEER_SCHEMA="+cdcSchema, "PEER_CREATE_TABLE=0", "PEER_INSERT_MODE=upsert", "PEER_PK_MODE=record_key",
			"PEER_DELETE_ENABLED=true", "PEER_KEY_CONVERTER=json", "PEER_DONE_SQL="+done,
			// unnest (the fastest insert mode on the plain topic) fails here: the connector's
			// UnnestRecordWriter binds the MicroTimestamp's long as the timestamp's text
			// ("date/time field value out of range"). Without it the connector sends JDBC
			// batches of INSERT ... ON CONFLICT with reWriteBatchedInserts.
			"PEER_UNNEST="+envStr("BENCH_PEER_CDC_UNNEST", "false"),
			"PEER_REDUCTION="+envStr("BENCH_PEER_CDC_REDUCTION", "true"))
		if err != nil {
			return err
		}
		if pm.Verification, err = b.verifyCDC(ctx, d, table); err != nil {
			return err
		}
		b.logf("peer_cdc: %s", pm.Verification)
		runs["peer_cdc"] = append(runs["peer_cdc"], pm)
		return nil
	}
	// Odd rounds run the peer first, so that a load that rises or falls over the rounds
	// does not always favour the same contender.
	// Each run is a phase of its own (eos_cdc, peer_cdc): one that fails is recorded in the
	// report and the other contender still runs.
	for round := range max(1, envInt("BENCH_CDC_REPEAT", 1)) {
		eos := func() { // eos_cdc and eos_cdc_tx (odd rounds: eos_cdc_tx first)
			part := func() { b.phase("eos_cdc", runEOS) }
			tx := func() {
				if dTx != nil {
					b.phase("eos_cdc_tx", func() error { return b.runCDCTx(ctx, d, dTx, runs) })
				}
			}
			if round%2 == 1 {
				part, tx = tx, part
			}
			part()
			tx()
		}
		other := func() {
			if peer {
				b.phase("peer_cdc", func() error { return runPeer(round) })
			}
		}
		if round%2 == 1 {
			eos, other = other, eos
		}
		eos()
		other()
	}
	for name, ms := range runs {
		var bad []string
		for _, m := range ms {
			if !m.Verification.OK {
				bad = append(bad, m.Verification.String())
			}
		}
		m := median(ms)
		if len(bad) > 0 && m.Verification.OK { // a failed run must not hide behind the median
			m.Verification.OK = false
			m.Note = strings.TrimSpace(m.Note + " other runs: " + strings.Join(bad, "; "))
		}
		b.rep.Measurements[name] = m
	}
	return nil
}

// median returns the measurement with the median rate and notes every run's rate.
func median(ms []*Measurement) *Measurement {
	slices.SortFunc(ms, func(x, y *Measurement) int { return cmp.Compare(x.RecordsPerSecond, y.RecordsPerSecond) })
	m := ms[len(ms)/2]
	if len(ms) > 1 {
		rates := make([]string, len(ms))
		for i, x := range ms {
			rates[i] = fmt.Sprintf("%.0f", x.RecordsPerSecond)
		}
		m.Note = strings.TrimSpace(m.Note + " median of " + strconv.Itoa(len(ms)) + " runs: " + strings.Join(rates, ", ") + " records/s")
	}
	return m
}
