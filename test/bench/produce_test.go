package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary act as the bench's child process (b.child runs
// os.Executable with "child"), as bin/bench does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(runChild(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func brokers(t *testing.T) string {
	t.Helper()
	b := os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	if b == "" {
		t.Fatal("KAFKA_BOOTSTRAP_SERVERS is not set: this test needs a real broker (make test starts one)")
	}
	return b
}

// countTopic reads topic from the start and returns its records (the sum of the high
// watermarks) and its distinct keys.
func countTopic(t *testing.T, brokers, topic string, partitions int) (records int64, keys int) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "tt-count-" + topic,
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "go.logs.channel.enable": false})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tps []kafka.TopicPartition
	for p := range partitions {
		lo, hi, err := c.QueryWatermarkOffsets(topic, int32(p), 10_000)
		if err != nil {
			t.Fatal(err)
		}
		records += hi - lo
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var read int64
	deadline := time.Now().Add(60 * time.Second)
	for read < records && time.Now().Before(deadline) {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.IsTimeout() {
				continue
			}
			t.Fatal(err)
		}
		read++
		seen[string(m.Key)] = true
	}
	if read < records {
		t.Fatalf("read %d of the %d records on %s", read, records, topic)
	}
	return records, len(seen)
}

// With a local queue of 10 messages, producing thousands meets a full queue again and
// again: produce waits (serving the delivery reports) instead of failing, and every record
// reaches the topic exactly once. This is what failed the latency phase with "Local: Queue
// full" before.
func TestProducerWaitsOnFullQueue(t *testing.T) {
	brokers := brokers(t)
	ctx := context.Background()
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotence=%v", idempotent), func(t *testing.T) {
			topic := fmt.Sprintf("tt-bench-queue-full-%v-%d", idempotent, time.Now().UnixNano())
			const partitions, n = 3, 5000
			if err := createTopic(ctx, brokers, topic, partitions); err != nil {
				t.Fatal(err)
			}
			p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": idempotent,
				"linger.ms": 5, "queue.buffering.max.messages": 10}, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % partitions)},
					Key: []byte(strconv.Itoa(i)), Value: appendRecord(nil, int64(i), "normal")}
				if err := p.produce(ctx, m); err != nil {
					_, _ = p.close(time.Second)
					t.Fatalf("record %d: %v", i, err)
				}
			}
			st, err := p.close(time.Minute)
			if err != nil {
				t.Fatalf("close: %v (%s)", err, st)
			}
			t.Log(st)
			if st.QueueFull == 0 {
				t.Fatal("the queue of 10 was never full: the test did not test the wait")
			}
			if st.Delivered != n || len(st.DeliveryErrors) > 0 {
				t.Fatalf("%d delivered of %d, delivery errors %v", st.Delivered, n, st.DeliveryErrors)
			}
			records, keys := countTopic(t, brokers, topic, partitions)
			if records != n || keys != n {
				t.Fatalf("the topic holds %d records with %d distinct keys, want %d of each", records, keys, n)
			}
		})
	}
}

// An error that waiting does not cure fails at once (a record too large for the producer),
// or at close (a delivery to a partition that does not exist), instead of hanging or being
// retried forever.
func TestProducerFailsOnPermanentErrors(t *testing.T) {
	brokers := brokers(t)
	ctx := context.Background()
	topic := fmt.Sprintf("tt-bench-permanent-%d", time.Now().UnixNano())
	if err := createTopic(ctx, brokers, topic, 1); err != nil {
		t.Fatal(err)
	}
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "message.max.bytes": 2000, "message.timeout.ms": 20_000}, true)
	if err != nil {
		t.Fatal(err)
	}
	err = p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: make([]byte, 10_000)})
	var kerr kafka.Error
	if !errors.As(err, &kerr) || kerr.Code() != kafka.ErrMsgSizeTooLarge {
		t.Fatalf("a record too large: %v, want %v", err, kafka.ErrMsgSizeTooLarge)
	}
	if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	// Partition 5 of a topic of one: no delivery, and no waiting for one either.
	perr := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 5}, Value: []byte("nowhere")})
	began := time.Now()
	st, err := p.close(time.Minute)
	t.Logf("produce: %v; close after %s: %v (%s)", perr, time.Since(began).Round(time.Millisecond), err, st)
	if perr == nil && err == nil {
		t.Fatal("a record for a partition that does not exist was accepted and reported delivered")
	}
	if perr == nil && st.DeliveryErrors[kafka.ErrUnknownPartition.String()] != 1 {
		t.Fatalf("delivery errors %v, want one %v", st.DeliveryErrors, kafka.ErrUnknownPartition)
	}
	if st.Delivered != 1 || st.Resent != 0 {
		t.Fatalf("%s: want the one good record delivered and nothing sent again", st)
	}
}

// A phase that fails does not stop the run: the report is written all the same with the
// phase under failed (and the phases that needed it marked not run), the printed table has
// a FAILED line for each, the phases after it run, and finish returns an error, which makes
// bin/bench exit non-zero. The failures here are real: a child process that exits 1 (the
// bench's own child, this test binary, told an unknown mode), a preload the broker refuses,
// and a panic.
func TestReportWrittenWhenAPhaseFails(t *testing.T) {
	brokers, url := brokers(t), os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL (make test starts one)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	saved := benchSchema
	benchSchema = "tt_bench_report"
	defer func() { benchSchema = saved }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS tt_bench_report CASCADE; CREATE SCHEMA tt_bench_report"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS tt_bench_report CASCADE") })

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "bench.json")
	t.Setenv("BENCH_REPORT", report)
	t.Setenv("BENCH_PEER", "0")
	b := &bench{brokers: brokers, url: url, exe: exe, records: 200, partitions: 2, batch: 100}
	b.init()

	good := fmt.Sprintf("tt-bench-report-%d", time.Now().UnixNano())
	b.phase("preload_bad", func() error {
		_, err := preload(ctx, brokers, "no spaces allowed in a topic", 2, 10, "normal")
		return err
	})
	b.phase("needs_bad", func() error { t.Error("a phase that needs a failed one ran"); return nil }, "preload_bad")
	b.phase("latency_1_2", func() error {
		_, err := b.child(ctx, "latency_1_2", "a child that fails", "insert", "-mode", "no-such-mode")
		return err
	})
	b.phase("panics", func() error { panic("boom") })
	ranAfter := false
	b.phase("preload_good", func() error {
		ranAfter = true
		_, err := preload(ctx, brokers, good, 2, 200, "normal")
		return err
	})
	b.phase("copy", func() error {
		m, err := b.child(ctx, "copy", "raw COPY", "insert", "-mode", "copy")
		if err == nil {
			b.rep.Measurements["copy"] = m
		}
		return err
	}, "preload_good")

	stdout := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	printed := make(chan string)
	go func() { data, _ := io.ReadAll(r); printed <- string(data) }()
	ferr := b.finish()
	os.Stdout = stdout
	w.Close()
	out := <-printed
	t.Logf("finish: %v\n%s", ferr, out)

	if ferr == nil || !strings.Contains(ferr.Error(), "latency_1_2") {
		t.Fatalf("finish returned %v, want an error naming the failed phases", ferr)
	}
	if !ranAfter {
		t.Fatal("the phases after the failures did not run")
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"preload_bad": "no spaces allowed", // the topic's creation failed
		"needs_bad":   "not run: preload_bad failed",
		"latency_1_2": `unknown mode "no-such-mode"`, // the child's own error, from its stderr
		"panics":      "panic: boom",
	}
	for phase, text := range want {
		if !strings.Contains(rep.Failed[phase], text) {
			t.Errorf("failed[%s] = %q, want it to contain %q", phase, rep.Failed[phase], text)
		}
		if !bytes.Contains([]byte(out), []byte("FAILED   "+phase)) {
			t.Errorf("no FAILED line for %s in the printed table", phase)
		}
	}
	if len(rep.Failed) != len(want) {
		t.Errorf("failed: %v, want exactly %v", rep.Failed, want)
	}
	if m := rep.Measurements["copy"]; m == nil || m.Records != 200 {
		t.Fatalf("the copy measurement after the failures is missing from the report: %+v", m)
	}
}

// eos_vs_limit is (kafka_consume + copy) / eos in CPU seconds per million records, and is
// left out when one of them was not measured.
func TestEOSVsLimit(t *testing.T) {
	t.Setenv("BENCH_PEER", "0")
	b := &bench{}
	b.init()
	b.rep.Measurements["kafka_consume"] = &Measurement{RecordsPerSecond: 1, CPUSecondsPerM: 3.6}
	b.rep.Measurements["copy"] = &Measurement{RecordsPerSecond: 1, CPUSecondsPerM: 2.4}
	b.rep.Measurements["eos"] = &Measurement{RecordsPerSecond: 1, CPUSecondsPerM: 12}
	b.summarize()
	if got := b.rep.Ratios["eos_vs_limit"]; got < 0.4999 || got > 0.5001 {
		t.Fatalf("eos_vs_limit = %v, want 0.5", got)
	}
	delete(b.rep.Measurements, "copy")
	b.rep.Ratios = map[string]float64{}
	b.rep.Targets = nil
	b.summarize()
	if v, ok := b.rep.Ratios["eos_vs_limit"]; ok {
		t.Fatalf("eos_vs_limit = %v without a copy measurement", v)
	}
	for _, tg := range b.rep.Targets {
		if strings.HasPrefix(tg.Goal, "eosink / raw COPY") && (tg.Met || tg.Actual != "not measured") {
			t.Fatalf("target without copy: %+v", tg)
		}
	}
}

// A delivery that failed with a retriable error (here a timeout, injected as its delivery
// report) is produced again and reaches the topic when the producer may send again; the
// same failure fails a producer that may not (the change events, whose order matters), and
// a permanent one fails both.
func TestProducerSendsAgainOnlyWhatMayBe(t *testing.T) {
	brokers := brokers(t)
	ctx := context.Background()
	for _, tc := range []struct {
		resend bool
		code   kafka.ErrorCode
		ok     bool
	}{
		{true, kafka.ErrMsgTimedOut, true},
		{false, kafka.ErrMsgTimedOut, false},
		{true, kafka.ErrMsgSizeTooLarge, false},
	} {
		t.Run(fmt.Sprintf("resend=%v,%v", tc.resend, tc.code), func(t *testing.T) {
			topic := fmt.Sprintf("tt-bench-resend-%d", time.Now().UnixNano())
			if err := createTopic(ctx, brokers, topic, 1); err != nil {
				t.Fatal(err)
			}
			p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers}, tc.resend)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte("first")}); err != nil {
				t.Fatal(err)
			}
			// The report of a second record that was accepted and then failed.
			p.accepted.Add(1)
			p.report(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0,
				Error: kafka.NewError(tc.code, "injected", false)}, Value: []byte("second")})
			st, err := p.close(time.Minute)
			t.Logf("close: %v (%s)", err, st)
			records, _ := countTopic(t, brokers, topic, 1)
			if tc.ok {
				if err != nil || st.Resent != 1 || st.Delivered != 2 || records != 2 {
					t.Fatalf("want the failed record sent again and both on the topic; %d on the topic", records)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.code.String()) || st.Resent != 0 || records != 1 {
				t.Fatalf("want the failure returned and nothing sent again; %d on the topic", records)
			}
		})
	}
}

// A contender that stops applying fails its run after BENCH_STALL_SECONDS instead of
// hanging the bench; one that finishes is measured.
func TestWatchFailsOnAStall(t *testing.T) {
	t.Setenv("BENCH_STALL_SECONDS", "1")
	done := make(chan error)
	began := time.Now()
	_, err := watch(context.Background(), 100, 0, done, func() int64 { return 42 }, nil)
	if err == nil || !strings.Contains(err.Error(), "stalled") || !strings.Contains(err.Error(), "at 42 of 100") {
		t.Fatalf("watch on a stalled count: %v", err)
	}
	if d := time.Since(began); d < time.Second || d > 5*time.Second {
		t.Fatalf("gave up after %s, want about 1 s", d)
	}
	var n int64
	res, err := watch(context.Background(), 100, 0, done, func() int64 { n += 10; return n }, nil)
	if err != nil || res.Records != 90 {
		t.Fatalf("a run that finishes: %+v, %v", res, err)
	}
}
