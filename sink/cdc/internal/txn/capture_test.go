//go:build txncapture

package txn

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/jackc/pgx/v5"
)

// TestCaptureFixtures rewrites testdata/debezium/ from the real connector: Debezium with
// provide.transaction.metadata=true and the JsonConverter with schemas, one snapshot row,
// then a source transaction over two tables (three changes) and an empty one. Run it on a
// test bed (make services, source its env) with -tags txncapture.
func TestCaptureFixtures(t *testing.T) {
	e := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srcURL, _ := testbed.SourceDatabase(t, e, "txn")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if _, err := src.Exec(ctx, `CREATE TABLE public.accounts (id int PRIMARY KEY, balance numeric(12,2) NOT NULL);
CREATE TABLE public.lines (order_id int, n int, qty int, PRIMARY KEY (order_id, n));
INSERT INTO public.accounts VALUES (1, 100), (2, 100)`); err != nil {
		t.Fatal(err)
	}
	prefix := testbed.Name(t, "txn")
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.accounts", "public.lines"}, TopicPrefix: prefix, Partitions: 2,
		Connector: map[string]string{"provide.transaction.metadata": "true",
			// The transaction topic keeps commit order only in one partition.
			"topic.creation.groups":                 "txn",
			"topic.creation.txn.include":            strings.ReplaceAll(prefix, ".", `\.`) + `\.transaction`,
			"topic.creation.txn.partitions":         "1",
			"topic.creation.txn.replication.factor": "1"}})
	tx, err := src.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE public.accounts SET balance = balance - 10 WHERE id = 1`,
		`UPDATE public.accounts SET balance = balance + 10 WHERE id = 2`,
		`INSERT INTO public.lines VALUES (7, 1, 3)`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Exec(ctx, `DELETE FROM public.lines WHERE order_id = 7`); err != nil {
		t.Fatal(err)
	}
	topics := []string{prefix + ".transaction", d.Topic("public.accounts"), d.Topic("public.lines")}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": "capture-" + prefix,
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "topic.metadata.refresh.interval.ms": 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SubscribeTopics(topics, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	deadline := time.Now().Add(2 * time.Minute)
	var markers, changes int
	for time.Now().Before(deadline) && (markers < 4 || changes < 7) {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			continue
		}
		topic := *m.TopicPartition.Topic
		name := "change"
		if strings.HasSuffix(topic, ".transaction") {
			name = "marker"
			markers++
		} else {
			changes++
		}
		short := strings.TrimPrefix(topic, prefix+".")
		got = append(got, fmt.Sprintf("%s %s %d %d", name, short, m.TopicPartition.Partition, m.TopicPartition.Offset))
		file := fmt.Sprintf("%s-%s-p%d-o%d.json", name, short, m.TopicPartition.Partition, m.TopicPartition.Offset)
		if err := os.WriteFile(filepath.Join("testdata", "debezium", file), m.Value, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "debezium", strings.TrimSuffix(file, ".json")+".key"), m.Key, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(got)
	t.Logf("captured %d markers, %d changes:\n%s", markers, changes, strings.Join(got, "\n"))
}

// TestCaptureRestart rewrites testdata/debezium-restart/ from the real connector killed
// (SIGKILL, offsets not flushed) after two source transactions and started again on the
// same slot and offsets, followed by a third: what a connector restart re-sends.
func TestCaptureRestart(t *testing.T) {
	e := testbed.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srcURL, _ := testbed.SourceDatabase(t, e, "txr")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if _, err := src.Exec(ctx, `CREATE TABLE public.accounts (id int PRIMARY KEY, balance numeric(12,2) NOT NULL);
CREATE TABLE public.lines (order_id int, n int, qty int, PRIMARY KEY (order_id, n))`); err != nil {
		t.Fatal(err)
	}
	prefix := testbed.Name(t, "txr")
	opts := testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.accounts", "public.lines"}, TopicPrefix: prefix, Partitions: 2,
		Dir: t.TempDir(), SnapshotMode: "no_data",
		Worker: map[string]string{"offset.flush.interval.ms": "600000"},
		Connector: map[string]string{"provide.transaction.metadata": "true",
			"topic.creation.groups":                 "txn",
			"topic.creation.txn.include":            strings.ReplaceAll(prefix, ".", `\.`) + `\.transaction`,
			"topic.creation.txn.partitions":         "1",
			"topic.creation.txn.replication.factor": "1"}}
	d := testbed.RunDebezium(t, opts)
	exec := func(qs ...string) {
		t.Helper()
		tx, err := src.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if _, err := tx.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO public.accounts VALUES (1, 100), (2, 100)`, `INSERT INTO public.lines VALUES (7, 1, 3)`)
	exec(`UPDATE public.accounts SET balance = balance - 10 WHERE id = 1`, `UPDATE public.accounts SET balance = balance + 10 WHERE id = 2`)
	topics := []string{prefix + ".transaction", d.Topic("public.accounts"), d.Topic("public.lines")}
	dir := filepath.Join("testdata", "debezium-restart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	read := func(wantMarkers int) {
		t.Helper()
		c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": testbed.Name(t, "cap"),
			"auto.offset.reset": "earliest", "enable.auto.commit": false, "topic.metadata.refresh.interval.ms": 1000})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SubscribeTopics(topics, nil); err != nil {
			t.Fatal(err)
		}
		var got []string
		markers, idle := 0, 0
		for markers < wantMarkers || idle < 5 {
			m, err := c.ReadMessage(time.Second)
			if err != nil {
				if idle++; idle > 60 {
					t.Fatalf("%d markers of %d after a minute", markers, wantMarkers)
				}
				continue
			}
			idle = 0
			topic := *m.TopicPartition.Topic
			name := "change"
			if strings.HasSuffix(topic, ".transaction") {
				name = "marker"
				markers++
			}
			short := strings.TrimPrefix(topic, prefix+".")
			got = append(got, fmt.Sprintf("%s %s %d %d", name, short, m.TopicPartition.Partition, m.TopicPartition.Offset))
			file := fmt.Sprintf("%s-%s-p%d-o%d.json", name, short, m.TopicPartition.Partition, m.TopicPartition.Offset)
			if err := os.WriteFile(filepath.Join(dir, file), m.Value, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sort.Strings(got)
		t.Logf("read %d markers:\n%s", markers, strings.Join(got, "\n"))
	}
	read(4)
	d.Kill()
	d2 := testbed.RunDebezium(t, opts)
	exec(`UPDATE public.lines SET qty = 4 WHERE order_id = 7`, `UPDATE public.accounts SET balance = 0 WHERE id = 1`)
	read(6)
	_ = d2
}

// TestCaptureAvro rewrites testdata/debezium-avro/ from the real connector writing Avro
// (Apicurio's converter, Confluent wire format) through the test bed's registry: one
// source transaction over two tables, each record's value as it is in Kafka (.avro) and
// every schema it names as the registry serves it (schema-<id>.json), for a test that
// decodes them through sink/internal/schemaformat without a registry.
func TestCaptureAvro(t *testing.T) {
	e := testbed.Require(t)
	reg := os.Getenv("EOSINK_REGISTRY_URL")
	if reg == "" {
		t.Fatal("EOSINK_REGISTRY_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srcURL, _ := testbed.SourceDatabase(t, e, "txa")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if _, err := src.Exec(ctx, `CREATE TABLE public.accounts (id int PRIMARY KEY, balance numeric(12,2) NOT NULL);
CREATE TABLE public.lines (order_id int, n int, qty int, PRIMARY KEY (order_id, n))`); err != nil {
		t.Fatal(err)
	}
	prefix := testbed.Name(t, "txa")
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.accounts", "public.lines"}, TopicPrefix: prefix, SnapshotMode: "no_data",
		Converter: testbed.Avro, RegistryURL: reg,
		Connector: map[string]string{"provide.transaction.metadata": "true"}})
	tx, err := src.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`INSERT INTO public.accounts VALUES (1, 100), (2, 100)`, `INSERT INTO public.lines VALUES (7, 1, 3)`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	topics := []string{prefix + ".transaction", d.Topic("public.accounts"), d.Topic("public.lines")}
	dir := filepath.Join("testdata", "debezium-avro")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": testbed.Name(t, "cap"),
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "topic.metadata.refresh.interval.ms": 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SubscribeTopics(topics, nil); err != nil {
		t.Fatal(err)
	}
	ids, files := map[uint32]bool{}, map[string]bool{}
	n := 0
	for deadline := time.Now().Add(2 * time.Minute); n < 5 && time.Now().Before(deadline); {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			continue
		}
		short := strings.TrimPrefix(*m.TopicPartition.Topic, prefix+".")
		kind := "change"
		if short == "transaction" {
			kind = "marker"
		}
		file := fmt.Sprintf("%s-%s-p%d-o%d.avro", kind, short, m.TopicPartition.Partition, m.TopicPartition.Offset)
		if !files[file] {
			files[file] = true
			n++
		}
		if err := os.WriteFile(filepath.Join(dir, file), m.Value, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(m.Value) > 5 {
			ids[uint32(m.Value[1])<<24|uint32(m.Value[2])<<16|uint32(m.Value[3])<<8|uint32(m.Value[4])] = true
		}
	}
	if n < 5 {
		t.Fatalf("%d records of 5", n)
	}
	for id := range ids {
		resp, err := http.Get(fmt.Sprintf("%s/schemas/ids/%d", reg, id))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("schema %d: %d %v", id, resp.StatusCode, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("schema-%d.json", id)), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("captured %d records, schemas %v", n, ids)
}
