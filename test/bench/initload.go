package main

// The initial load (issue 26): a table's snapshot, as Debezium's PostgreSQL connector writes
// it (op "r" reads, source.snapshot "first", "true", ..., "last", every read at the
// snapshot's LSN, source.sequence [null, lsn]), is preloaded into a topic before the sink
// starts, so that the connector's speed is not measured. The cdc plugin then applies it at
// its default settings (the plugin's 5000 records and 8 MiB a batch, cdc.DefaultBatchRecords
// and DefaultBatchBytes) into a fresh table, and
// eosink's plain insert (the table plugin, as the eos contender) applies the same rows, as
// plain JSON, from a topic of their own in the same run. The rows are narrow (id bigint, the
// key; account text; qty integer) and the values are JSON without schemas, compressed with
// lz4 on both topics, so that 10,000,000 of them stay well under 4 GB on the broker's disk.
//
// Two ratios: the cdc plugin's rate over the last tenth of the rows (by commit time) against
// its rate over the first (cdc_initial_load_last_vs_first: a load that slows as the table
// grows is quadratic somewhere), and its rate against the plain insert's
// (cdc_initial_load_vs_insert). The cdc table is verified at the end: its count and an md5
// of its rows against the rows produced.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

const (
	initialCDCTopic    = "bench-initial-cdc"
	initialInsertTopic = "bench-initial-insert"
	// initialLSN is the snapshot's LSN: every read of a Debezium snapshot carries the
	// position the slot was created at.
	initialLSN  = 0x1000000
	initialTxID = 777
)

// initialColumns are the narrow table's columns, the key first.
var initialColumns = []string{"id", "account", "qty"}

// initialRow is row i (0-based) of the snapshot: its key is i+1.
func initialRow(i int64) (id int64, account string, qty int64) {
	return i + 1, fmt.Sprintf("acct-%04d", (i*7919)%10000), (i * 31) % 1000
}

func appendInitialRow(buf []byte, i int64) []byte {
	id, account, qty := initialRow(i)
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"account":"`...)
	buf = append(buf, account...)
	buf = append(buf, `","qty":`...)
	buf = strconv.AppendInt(buf, qty, 10)
	return append(buf, '}')
}

// snapshotMark is source.snapshot of read i of n, as Debezium 3.x writes it for a snapshot
// of one table: first, true, ..., last.
func snapshotMark(i, n int64) string {
	switch {
	case i == n-1:
		return "last"
	case i == 0:
		return "first"
	}
	return "true"
}

// appendInitialRead writes read i of n: Debezium's envelope, JSON without schemas
// (the JsonConverter's schemas.enable=false).
func appendInitialRead(buf []byte, i, n int64) []byte {
	tsMs := cdcEpoch/1000 + i/100_000 // the snapshot reads about 100k rows a second
	buf = append(buf, `{"before":null,"after":`...)
	buf = appendInitialRow(buf, i)
	buf = append(buf, `,"source":{"version":"3.6.0.Final","connector":"postgresql","name":"bench","ts_ms":`...)
	buf = strconv.AppendInt(buf, tsMs, 10)
	buf = append(buf, `,"snapshot":"`...)
	buf = append(buf, snapshotMark(i, n)...)
	buf = append(buf, `","db":"shop","sequence":"[null,\"`...)
	buf = strconv.AppendInt(buf, initialLSN, 10)
	buf = append(buf, `\"]","ts_us":`...)
	buf = strconv.AppendInt(buf, tsMs*1000, 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, tsMs*1_000_000, 10)
	buf = append(buf, `,"schema":"public","table":"items","txId":`...)
	buf = strconv.AppendInt(buf, initialTxID, 10)
	buf = append(buf, `,"lsn":`...)
	buf = strconv.AppendInt(buf, initialLSN, 10)
	buf = append(buf, `,"xmin":null},"transaction":null,"op":"r","ts_ms":`...)
	buf = strconv.AppendInt(buf, tsMs+1, 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, (tsMs+1)*1000, 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, (tsMs+1)*1_000_000, 10)
	return append(buf, '}')
}

// preloadInitial writes the n reads to initialCDCTopic and the same n rows as plain JSON
// to initialInsertTopic, partitioned by key (i % partitions), and returns the bytes of the
// values produced to each.
func preloadInitial(ctx context.Context, brokers string, partitions int, n int64) (cdcBytes, insertBytes int64, err error) {
	for _, t := range []string{initialCDCTopic, initialInsertTopic} {
		if err := createTopic(ctx, brokers, t, partitions); err != nil {
			return 0, 0, err
		}
	}
	// Every key is distinct and every read has the snapshot's position: a record whose
	// delivery failed may be sent again.
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true,
		"linger.ms": 50, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 64 << 10, "compression.type": "lz4"}, true)
	if err != nil {
		return 0, 0, err
	}
	cdcT, insT := initialCDCTopic, initialInsertTopic
	var buf []byte
	for i := range n {
		part := int32(i % int64(partitions))
		id, _, _ := initialRow(i)
		buf = appendInitialRead(buf[:0], i, n)
		cdcBytes += int64(len(buf))
		key := strconv.AppendInt([]byte(`{"id":`), id, 10)
		key = append(key, '}')
		if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &cdcT, Partition: part},
			Key: key, Value: append([]byte(nil), buf...)}); err != nil {
			_, _ = p.close(10 * time.Second)
			return 0, 0, fmt.Errorf("preload %s: %w", cdcT, err)
		}
		buf = appendInitialRow(buf[:0], i)
		insertBytes += int64(len(buf))
		if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &insT, Partition: part},
			Key: strconv.AppendInt(nil, id, 10), Value: append([]byte(nil), buf...)}); err != nil {
			_, _ = p.close(10 * time.Second)
			return 0, 0, fmt.Errorf("preload %s: %w", insT, err)
		}
	}
	st, err := p.close(10 * time.Minute)
	if err != nil {
		return 0, 0, fmt.Errorf("preload initial load: %w (%s)", err, st)
	}
	if st.QueueFull > 0 || st.Resent > 0 {
		fmt.Fprintf(os.Stderr, "bench: preload initial load: %s\n", st)
	}
	return cdcBytes, insertBytes, nil
}

// initialTable creates the narrow table; the cdc plugin's needs its key as primary key.
// The plain insert's has none, as the eos contender's.
func (b *bench) initialTable(ctx context.Context, name string, pk bool) error {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	key := ""
	if pk {
		key = " PRIMARY KEY"
	}
	t := pgx.Identifier{benchSchema, name}.Sanitize()
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+t+"; CREATE TABLE "+t+" (id bigint NOT NULL"+key+", account text NOT NULL, qty integer NOT NULL)")
	return err
}

// initialHashSQL hashes a narrow table as initialHash does the rows produced.
const initialHashSQL = `SELECT count(*), coalesce(md5(string_agg(concat_ws('|', id, account, qty), E'\n' ORDER BY id)), md5('')) FROM %s`

// initialHash is the count and md5 of the n rows, in id order, one per line.
func initialHash(n int64) (int64, string) {
	h := md5.New()
	var buf []byte
	for i := range n {
		id, account, qty := initialRow(i)
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, '\n')
		}
		buf = strconv.AppendInt(buf, id, 10)
		buf = append(buf, '|')
		buf = append(buf, account...)
		buf = append(buf, '|')
		buf = strconv.AppendInt(buf, qty, 10)
		h.Write(buf)
	}
	return n, hex.EncodeToString(h.Sum(nil))
}

// InitialLoadInfo describes the initial load's topics and the cdc table's verification.
type InitialLoadInfo struct {
	Rows               int64   `json:"rows"`
	Partitions         int     `json:"partitions"`
	Format             string  `json:"format"`
	AvgCDCValueBytes   float64 `json:"avg_cdc_value_bytes"`
	AvgPlainValueBytes float64 `json:"avg_plain_value_bytes"`
	// LogBytes: each topic's size on the broker's disk (compressed), when it could be read.
	LogBytes map[string]int64 `json:"log_bytes,omitempty"`
	// Tenths: the cdc plugin's rate over each tenth of the rows, by commit time.
	Tenths       []float64     `json:"cdc_tenths_records_per_second"`
	InsertTenths []float64     `json:"insert_tenths_records_per_second,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
}

// tenthRates turns the marks of a child (-tenths) into the rate of each stretch between them.
func tenthRates(marks []tenthMark) []float64 {
	var out []float64
	for i := 1; i < len(marks); i++ {
		if d := marks[i].Seconds - marks[i-1].Seconds; d > 0 {
			out = append(out, float64(marks[i].Records-marks[i-1].Records)/d)
		}
	}
	return out
}

// initialLoad runs the phase: preload, the plain insert, the cdc plugin, the verification.
func (b *bench) initialLoad(ctx context.Context) error {
	n := int64(envInt("BENCH_INITIAL_LOAD_ROWS", 10_000_000))
	b.logf("initial load: preloading %d snapshot reads (topic %s) and the same rows as plain JSON (topic %s), lz4", n, initialCDCTopic, initialInsertTopic)
	began := time.Now()
	cdcBytes, insBytes, err := preloadInitial(ctx, b.brokers, b.partitions, n)
	if err != nil {
		return err
	}
	info := &InitialLoadInfo{Rows: n, Partitions: b.partitions, Format: "JSON without schemas, lz4",
		AvgCDCValueBytes: float64(cdcBytes) / float64(n), AvgPlainValueBytes: float64(insBytes) / float64(n)}
	b.rep.InitialLoad = info
	info.LogBytes = topicLogBytes(initialCDCTopic, initialInsertTopic)
	b.logf("initial load: preloaded in %s, %.0f and %.0f bytes a value; on the broker's disk %v", time.Since(began).Round(time.Second),
		info.AvgCDCValueBytes, info.AvgPlainValueBytes, info.LogBytes)
	count := strconv.FormatInt(n, 10)
	// The defaults: -batch 0 leaves MaxBatchRecords to the plugin (the table plugin: the
	// sink's 500; the cdc plugin: its own 5000).
	pool := strconv.Itoa(envInt("BENCH_INITIAL_POOL", 0)) // both contenders' pool_max_conns (experiments; 0: pgx's default)
	ins, err := b.child(ctx, "initial_load_insert", "eosink's plain insert (table plugin, no key) of the snapshot's rows as plain JSON, the sink's defaults",
		"initial", "-mode", "eos", "-topic", initialInsertTopic, "-format", "initial", "-records", count, "-batch", "0", "-tenths", "-pool", pool)
	if err != nil {
		return err
	}
	b.rep.Measurements["initial_load_insert"] = ins
	info.InsertTenths = tenthRates(ins.tenths)
	args := []string{"-mode", "eos", "-topic", initialCDCTopic, "-format", "initial-cdc", "-records", count, "-batch", "0", "-tenths", "-pool", pool}
	if p := os.Getenv("BENCH_PROFILE_INITIAL"); p != "" {
		args = append(args, "-cpuprofile", p)
	}
	m, err := b.child(ctx, "initial_load_cdc", "eosink's cdc plugin on the snapshot reads into a fresh table, the sink's and the plugin's defaults",
		"initial_cdc", args...)
	if err != nil {
		return err
	}
	b.rep.Measurements["initial_load_cdc"] = m
	info.Tenths = tenthRates(m.tenths)
	b.logf("initial load: cdc rate per tenth %s; insert %s", rates(info.Tenths), rates(info.InsertTenths))
	table := fmt.Sprintf("t%d_initial_load_cdc", seq)
	v, err := b.verifyInitial(ctx, table, n)
	if err != nil {
		return err
	}
	m.Verification, info.Verification = v, v
	b.logf("initial load: %s", v)
	if !v.OK {
		return fmt.Errorf("initial load: %s: %s", table, v)
	}
	return nil
}

func rates(rs []float64) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatFloat(r, 'f', 0, 64)
	}
	return "[" + s + "]"
}

// verifyInitial compares the table's count and md5 with the n rows produced.
func (b *bench) verifyInitial(ctx context.Context, table string, n int64) (*Verification, error) {
	conn, err := b.hashConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	v := &Verification{}
	v.ExpectedRows, v.ExpectedHash = initialHash(n)
	t := pgx.Identifier{benchSchema, table}.Sanitize()
	if err := conn.QueryRow(ctx, fmt.Sprintf(initialHashSQL, t)).Scan(&v.Rows, &v.Hash); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id < 1 OR id > $1), $1 - count(DISTINCT id) FILTER (WHERE id BETWEEN 1 AND $1) FROM `+t, n).
		Scan(&v.Extra, &v.Missing); err != nil {
		return nil, err
	}
	v.OK = v.Rows == v.ExpectedRows && v.Hash == v.ExpectedHash && v.Missing == 0 && v.Extra == 0
	return v, nil
}

// topicLogBytes is each topic's size in the broker's log directory, when the broker is the
// test bed's on this machine (EOSINK_SERVICES_DIR, else .services, then kafka/data); nil when
// it is not there. The broker may still be writing the last segment: the size is what its
// files hold.
func topicLogBytes(topics ...string) map[string]int64 {
	dir := filepath.Join(envStr("EOSINK_SERVICES_DIR", filepath.Join(repoRoot(), ".services")), "kafka", "data")
	out := map[string]int64{}
	for _, t := range topics {
		parts, _ := filepath.Glob(filepath.Join(dir, t+"-*"))
		for _, p := range parts {
			if _, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), t+"-")); err != nil {
				continue // not a partition: another topic's, or a deleted one's (<topic>-<n>.<id>-delete)
			}
			_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".log") { // the segments, not their indexes
					if fi, err := d.Info(); err == nil {
						out[t] += fi.Size()
					}
				}
				return nil
			})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// hashConn is a session for hashing a whole table in one query (work_mem 256MB, so that
// its sort stays in memory).
func (b *bench) hashConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SET work_mem = '256MB'"); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}
