package main

// eos_cdc_tx (issue 25, item 4): the change stream of eos_cdc (the same keys, ops and rows,
// in the same order over the same partitions), grouped into source transactions of
// cdcPerTx changes each with Debezium's transaction metadata (provide.transaction.
// metadata=true), applied by the cdc plugin in consistency: transaction.
//
// The shapes are those of the real connector (Debezium 3.6.1, the fixtures in
// sink/cdc/internal/txn/testdata/debezium): every change carries a transaction block
// {"id":"<xid>:<its own LSN>","total_order":k,"data_collection_order":k} (one data
// collection, public.accounts) and source.sequence ["<the commit LSN of the transaction
// before>","<its LSN>"] (null first, for the first transaction streamed); the BEGIN's id is
// "<xid>:<the first change's LSN>" and the END's "<xid>:<the commit LSN>", with event_count
// and data_collections, on a topic of one partition. A delete's tombstone follows it in its
// partition and belongs to no transaction, as with the connector's tombstones.on.delete.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// cdcPerTx is the changes in one source transaction of eos_cdc_tx's stream (the last may
// have fewer).
const cdcPerTx = 5

// cdcStream names a change stream: its data topic and, with perTx > 0, its transaction
// topic and the changes per transaction.
type cdcStream struct {
	topic, txTopic string
	perTx          int
}

// cdcItem is one record of the data topic waiting for its transaction to be written.
type cdcItem struct {
	op            string
	id, seq       int64
	before, after *cdcRow
	tombstone     bool
}

// cdcOut writes a stream's records: at once without transaction metadata, a transaction at a
// time with it.
type cdcOut struct {
	produce    func(*kafka.Message) error
	st         cdcStream
	partitions int
	d          *cdcData
	buf        []byte
	items      []cdcItem // the open transaction's records
	changes    int       // change events among items
	txn        int64     // transactions written
	lastCommit int64     // the commit LSN of the last transaction written
}

func newCDCOut(ctx context.Context, p *producer, st cdcStream, partitions int, d *cdcData) *cdcOut {
	return &cdcOut{produce: func(m *kafka.Message) error { return p.produce(ctx, m) }, st: st, partitions: partitions, d: d}
}

// send produces one data record; the record and its bytes are counted when it is queued.
func (o *cdcOut) send(id int64, value []byte) error {
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &o.st.topic, Partition: int32(id % int64(o.partitions))},
		Key: cdcKey(id), Value: value}
	return o.produce(m)
}

func (o *cdcOut) change(op string, id int64, before, after *cdcRow, seq int64) error {
	o.d.records++
	if o.st.perTx == 0 {
		o.buf = appendCDCValue(o.buf[:0], op, id, before, after, oneTxPerChange(seq))
		o.d.valueBytes += int64(len(o.buf))
		return o.send(id, append([]byte(nil), o.buf...))
	}
	if o.changes == o.st.perTx { // the transaction before is full: written with its last tombstone
		if err := o.flush(); err != nil {
			return err
		}
	}
	o.items = append(o.items, cdcItem{op: op, id: id, seq: seq, before: before, after: after})
	o.changes++
	return nil
}

func (o *cdcOut) tombstone(id int64) error {
	o.d.records++
	if o.st.perTx == 0 {
		return o.send(id, nil)
	}
	o.items = append(o.items, cdcItem{id: id, tombstone: true})
	return nil
}

// LSNs of transaction k (1-based): its changes at txLSN(k) + j*0x68, its commit after the
// last of them and before the next transaction's first.
func (o *cdcOut) txLSN(k int64) int64 { return 0x2000000 + k*int64(o.st.perTx+1)*0x68 }

// flush writes the open transaction: its BEGIN, its records in order, its END.
func (o *cdcOut) flush() error {
	if o.st.perTx == 0 || len(o.items) == 0 {
		return nil
	}
	o.txn++
	k := o.txn
	xid := 1000 + k
	first := o.txLSN(k)
	commit := first + int64(o.changes)*0x68 - 0x38
	var last int64 // the last change's seq (a tombstone has none)
	for _, it := range o.items {
		last = max(last, it.seq)
	}
	tsMs := cdcEpoch/1000 + last/10 // the source's commit time, in every change of it
	if err := o.marker(xid, first, tsMs, 0); err != nil {
		return err
	}
	order := int64(0)
	for _, it := range o.items {
		if it.tombstone {
			if err := o.send(it.id, nil); err != nil {
				return err
			}
			continue
		}
		src := cdcSource{tsMs: tsMs, lsn: first + order*0x68, prev: o.lastCommit, prevNull: k == 1, txID: xid, block: true, order: order + 1}
		order++
		o.buf = appendCDCValue(o.buf[:0], it.op, it.id, it.before, it.after, src)
		o.d.valueBytes += int64(len(o.buf))
		if err := o.send(it.id, append([]byte(nil), o.buf...)); err != nil {
			return err
		}
	}
	if err := o.marker(xid, commit, tsMs, o.changes); err != nil {
		return err
	}
	o.d.transactions++
	o.lastCommit = commit
	o.items, o.changes = o.items[:0], 0
	return nil
}

const cdcMarkerSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},` +
	`{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},` +
	`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},` +
	`{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},` +
	`"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],` +
	`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`

const cdcMarkerKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],` +
	`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`

// marker writes a BEGIN (events 0) or an END of events changes of public.accounts.
func (o *cdcOut) marker(xid, lsn, tsMs int64, events int) error {
	id := strconv.FormatInt(xid, 10) + ":" + strconv.FormatInt(lsn, 10)
	v := []byte(`{"schema":` + cdcMarkerSchema + `,"payload":{"status":"`)
	if events == 0 {
		v = append(v, `BEGIN","id":"`+id+`","event_count":null,"data_collections":null,"ts_ms":`...)
	} else {
		n := strconv.Itoa(events)
		v = append(v, `END","id":"`+id+`","event_count":`+n+`,"data_collections":[{"data_collection":"public.accounts","event_count":`+n+`}],"ts_ms":`...)
	}
	v = strconv.AppendInt(v, tsMs, 10)
	v = append(v, "}}"...)
	o.d.markers++
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &o.st.txTopic, Partition: 0},
		Key: []byte(`{"schema":` + cdcMarkerKeySchema + `,"payload":{"id":"` + id + `"}}`), Value: v}
	return o.produce(m)
}

// CDCTxInfo describes eos_cdc_tx's stream.
type CDCTxInfo struct {
	Topic                 string  `json:"topic"`
	TransactionTopic      string  `json:"transaction_topic"`
	Records               int64   `json:"records"` // on the data topic, tombstones included
	ChangeEvents          int64   `json:"change_events"`
	Transactions          int64   `json:"transactions"`
	ChangesPerTransaction int     `json:"changes_per_transaction"`
	Markers               int64   `json:"markers"`
	AvgValueBytes         float64 `json:"avg_value_bytes"`
}

// cdcTxStream preloads eos_cdc_tx's stream (phase preload_cdc_tx) and checks that it holds
// the changes of d: the same records and final state. It returns nil when BENCH_CDC_TX=0 or
// the preload failed.
func (b *bench) cdcTxStream(ctx context.Context, d *cdcData, n int64) *cdcData {
	if envInt("BENCH_CDC_TX", 1) != 1 {
		return nil
	}
	st := cdcStream{topic: "bench-cdc-tx", txTopic: "bench-cdc-tx.transaction", perTx: cdcPerTx}
	var dTx *cdcData
	b.phase("preload_cdc_tx", func() error {
		b.logf("preloading the same change records in source transactions of %d changes (topics %s and %s)", st.perTx, st.topic, st.txTopic)
		t, took, err := preloadCDC(ctx, b.brokers, st, b.partitions, n)
		if err != nil {
			return err
		}
		rows, md5 := t.expectedHash()
		wantRows, wantMD5 := d.expectedHash()
		if t.records != d.records || rows != wantRows || md5 != wantMD5 || !maps.Equal(t.ops, d.ops) {
			return fmt.Errorf("the transaction stream is not eos_cdc's: %d records %v, final %d rows md5 %s; eos_cdc's: %d records %v, %d rows md5 %s",
				t.records, t.ops, rows, md5, d.records, d.ops, wantRows, wantMD5)
		}
		info := &CDCTxInfo{Topic: st.topic, TransactionTopic: st.txTopic, Records: t.records, ChangeEvents: t.records - t.ops["tombstone"],
			Transactions: t.transactions, ChangesPerTransaction: st.perTx, Markers: t.markers, AvgValueBytes: float64(t.valueBytes) / float64(t.records)}
		if b.rep.CDC != nil {
			b.rep.CDC.Tx = info
		}
		b.logf("preloaded %d records (%d change events in %d transactions) and %d markers in %s, %.0f bytes a value; the same final state",
			t.records, info.ChangeEvents, t.transactions, t.markers, took.Round(time.Millisecond), info.AvgValueBytes)
		dTx = t
		return nil
	})
	return dTx
}

// runCDCTx runs eos_cdc_tx and verifies its table against d's final state. Its rate counts
// what eos_cdc's counts, the data topic's records (change events and their tombstones; the
// markers are not counted): the sink counts the change events it commits (tombstones are
// in no transaction), and the child scales them by the stream's records per change event.
func (b *bench) runCDCTx(ctx context.Context, d, dTx *cdcData, runs map[string][]*Measurement) error {
	info := b.rep.CDC.Tx
	args := []string{"-mode", "eos", "-topic", info.Topic, "-format", "cdc", "-txtopic", info.TransactionTopic,
		"-records", strconv.FormatInt(info.ChangeEvents, 10), "-count", strconv.FormatInt(dTx.records, 10)}
	if p := os.Getenv("BENCH_PROFILE_CDC_TX"); p != "" {
		args = append(args, "-cpuprofile", p)
	}
	m, err := b.child(ctx, "eos_cdc_tx", fmt.Sprintf("eosink's cdc plugin in consistency: transaction on the same changes in "+
		"source transactions of %d (transaction metadata, a one-partition transaction topic): each source transaction whole, "+
		"in commit order, group commits of up to the batch", info.ChangesPerTransaction), "cdc", args...)
	if err != nil {
		return err
	}
	if m.Verification, err = b.verifyCDC(ctx, d, fmt.Sprintf("t%d_eos_cdc_tx", seq)); err != nil {
		return err
	}
	b.logf("eos_cdc_tx: %s", m.Verification)
	runs["eos_cdc_tx"] = append(runs["eos_cdc_tx"], m)
	return nil
}

// cdcTxPlugin is eos_cdc_tx's plugin, built as a pipeline config builds it (so that it knows
// the pipeline's name, which keys its watermark): consistency: transaction on a.txTopic.
// BENCH_CDC_TX_MAX_HELD_EVENTS and BENCH_CDC_TX_MAX_HELD_MB set max_held_events and
// max_held_bytes (defaults: the plugin's).
func cdcTxPlugin(a childArgs) (sink.Plugin, error) {
	raw := map[string]any{"type": "cdc", "table": a.schema + "." + a.table, "positions_schema": a.offsets,
		"exclude": []any{"loaded_at"}, "consistency": "transaction", "transaction_topic": a.txTopic}
	if v := envInt("BENCH_CDC_TX_MAX_HELD_EVENTS", 0); v > 0 {
		raw["max_held_events"] = v
	}
	if v := envInt("BENCH_CDC_TX_MAX_HELD_MB", 0); v > 0 {
		raw["max_held_bytes"] = int64(v) << 20
	}
	return plugin.Build(plugin.Config{Path: "sink", Pipeline: a.group, Schema: a.offsets, Raw: raw})
}

// setTimes is where eos_cdc_tx's set loop spent its time: the sequence's Add (decoding and
// assembling, on the loop's one goroutine) and Apply (the writes, inside each commit's
// transaction), and, from the sink's metrics, its commits (BEGIN to the end of COMMIT,
// Apply included).
type setTimes struct {
	add, apply  atomic.Int64 // nanoseconds
	adds, units atomic.Int64
	applies     atomic.Int64
	commitReg   *prometheus.Registry
}

// timedSequencer is the cdc plugin with its Sequence timed (bench-side: the plugin and the
// sink are unchanged).
type timedSequencer struct {
	sink.Sequencer
	t *setTimes
}

func (s timedSequencer) Migrations() []sink.Migrations {
	return s.Sequencer.(sink.Migrator).Migrations()
}
func (s timedSequencer) Prepare(ctx context.Context, db sink.DB) error {
	return s.Sequencer.(sink.Preparer).Prepare(ctx, db)
}

func (s timedSequencer) NewSequence(ctx context.Context, db sink.DB) (sink.Sequence, error) {
	q, err := s.Sequencer.NewSequence(ctx, db)
	if err != nil {
		return nil, err
	}
	return timedSequence{q, s.t}, nil
}

type timedSequence struct {
	sink.Sequence
	t *setTimes
}

func (q timedSequence) Add(ctx context.Context, r *sink.Record) error {
	t0 := time.Now()
	err := q.Sequence.Add(ctx, r)
	q.t.add.Add(int64(time.Since(t0)))
	q.t.adds.Add(1)
	return err
}

func (q timedSequence) Apply(ctx context.Context, tx pgx.Tx, units []sink.Unit) error {
	t0 := time.Now()
	err := q.Sequence.Apply(ctx, tx, units)
	q.t.apply.Add(int64(time.Since(t0)))
	q.t.applies.Add(1)
	q.t.units.Add(int64(len(units)))
	return err
}

// timeSet wraps eos_cdc_tx's plugin and sets cfg's metrics registry; the function it
// returns reads the times, in seconds and counts.
func timeSet(cfg *sink.Config) func() map[string]float64 {
	sq, ok := cfg.Plugin.(sink.Sequencer)
	if !ok {
		return nil
	}
	t := &setTimes{commitReg: prometheus.NewRegistry()}
	cfg.Plugin = timedSequencer{sq, t}
	cfg.Registerer = t.commitReg
	return func() map[string]float64 {
		out := map[string]float64{"add_seconds": float64(t.add.Load()) / 1e9, "adds": float64(t.adds.Load()),
			"apply_seconds": float64(t.apply.Load()) / 1e9, "applies": float64(t.applies.Load()), "units": float64(t.units.Load())}
		mfs, err := t.commitReg.Gather()
		if err != nil {
			return out
		}
		for _, mf := range mfs {
			if h := mf.GetMetric(); len(h) == 1 && h[0].GetHistogram() != nil {
				switch mf.GetName() {
				case "eosink_commit_seconds":
					out["commit_seconds"], out["commits"] = h[0].GetHistogram().GetSampleSum(), float64(h[0].GetHistogram().GetSampleCount())
				case "eosink_batch_records":
					out["committed_records"] = h[0].GetHistogram().GetSampleSum()
				}
			}
		}
		return out
	}
}
