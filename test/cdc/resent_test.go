package cdc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCResentAfterDebeziumRestart: Debezium is SIGKILLed mid-stream (its offsets flushed
// only every 5 s, so that it sends part of the stream again when it starts with the same
// offsets), and then old change events are republished verbatim; the source keeps
// changing. Events sent again (the same LSNs and source.ts_ms at newer offsets) must stay
// silently skipped: no partition stops, and the replica ends equal to the source,
// row::text for row::text.
func TestCDCResentAfterDebeziumRestart(t *testing.T) {
	e := testbed.Require(t)
	srcURL, _ := testbed.SourceDatabase(t, e, "cdcresent")
	src := connect(t, srcURL)
	execAll(t, src, fmt.Sprintf(itemsDDL, "public.items"),
		`INSERT INTO public.items SELECT g, 0, 'first' FROM generate_series(1, 40) g`)
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	replicaTable := pgx.Identifier{replica, "items"}.Sanitize()
	execAll(t, db, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize(), fmt.Sprintf(itemsDDL, replicaTable))
	dbz := testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL, Tables: []string{"public.items"},
		TopicPrefix: testbed.Name(t, "rs"), Partitions: 2, Dir: t.TempDir(),
		Worker: map[string]string{"offset.flush.interval.ms": "5000"}}
	d := startDebezium(t, dbz)
	topic := d.Topic("public.items")
	waitTopics(t, e.Brokers, []string{topic})
	pipeline, httpAddr := testbed.Name(t, "p"), freeAddr(t)
	config := sinkConfig(t, e, pipeline, offsets, replica, httpAddr, []string{topic})
	cli(t, "migrate", "up", "-config", config)
	sink := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	equal := func(what string) {
		t.Helper()
		testbed.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			if got := stoppedReasons(t, httpAddr); len(got) != 0 {
				t.Fatalf("%s: partitions stopped: %v\n%s", what, got, sink.Output())
			}
			diff := diffRows(rowsText(t, src, "public.items"), rowsText(t, db, replicaTable))
			return len(diff) == 0, strings.Join(diff, "\n")
		})
	}
	step := 0
	changes := func(n int) {
		for range n {
			step++
			execAll(t, src, fmt.Sprintf(`UPDATE public.items SET v = v + 1, note = 'step %d' WHERE id %% 7 = %d`, step, step%7))
			if step%10 == 0 {
				execAll(t, src, fmt.Sprintf(`DELETE FROM public.items WHERE id = %d`, step/10),
					fmt.Sprintf(`INSERT INTO public.items VALUES (%d, 0, 'inserted')`, 100+step))
			}
		}
	}
	changes(30)
	equal("streamed")
	time.Sleep(6 * time.Second) // an offset flush
	changes(40)
	equal("streamed more")
	d.Kill() // its last offsets (up to 5 s of events) are lost: it sends them again
	changes(20)
	startDebezium(t, dbz)
	changes(30)
	equal("after the Debezium restart")
	resent := resentEvents(t, e.Brokers, topic, 2)
	t.Logf("Debezium sent %d change events again after its restart (the same source.lsn and source.ts_ms)", resent)

	// And old events republished verbatim: the first ones of each partition.
	msgs := earliest(t, e.Brokers, topic, 2, 30)
	testbed.Produce(t, e, topic, msgs)
	changes(10)
	caughtUp(t, e.DatabaseURL, e.Brokers, offsets, pipeline)
	equal("after republishing old events")
	if got := stoppedReasons(t, httpAddr); len(got) != 0 || sink.Contains("source_rewound") {
		t.Fatalf("partitions stopped: %v\n%s", got, sink.Output())
	}
	t.Logf("%d events sent again by Debezium and %d republished: no partition stopped, the replica equals the source (%d rows)",
		resent, len(msgs), len(rowsText(t, src, "public.items")))
	sink.StopClean(60 * time.Second)
}

// resentEvents reads topic from the start and counts the change events whose (partition,
// key, op, source.lsn, source.ts_ms) appeared before.
func resentEvents(t *testing.T, brokers, topic string, partitions int) int {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "resent-" + topic,
		"enable.auto.commit": false, "go.logs.channel.enable": false})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tps []kafka.TopicPartition
	for p := range partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	seen, again := map[string]bool{}, 0
	idle := time.Now()
	for time.Since(idle) < 3*time.Second {
		m, ok := c.Poll(200).(*kafka.Message)
		if !ok {
			continue
		}
		idle = time.Now()
		if m.Value == nil {
			continue
		}
		var v struct {
			Payload struct {
				Op     string `json:"op"`
				Source struct {
					LSN  int64 `json:"lsn"`
					TsMs int64 `json:"ts_ms"`
				} `json:"source"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(m.Value, &v); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprint(m.TopicPartition.Partition, string(m.Key), v.Payload.Op, v.Payload.Source.LSN, v.Payload.Source.TsMs)
		if seen[k] {
			again++
		}
		seen[k] = true
	}
	return again
}
