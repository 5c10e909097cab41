package cli

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
)

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback: it decodes each
// ExportTraceServiceRequest (protobuf, gzip or not) and keeps its spans with their resource
// attributes, and the header the test names.
type otlpReceiver struct {
	srv    *httptest.Server
	header string

	mu       sync.Mutex
	requests int
	headers  []string
	spans    []receivedSpan
	bad      []string // requests that were not OTLP/HTTP protobuf
}

type receivedSpan struct {
	name     string
	resource map[string]string
	attrs    map[string]string
	traceID  string
	parentID string
	spanID   string
	status   tracepb.Status_StatusCode
}

func newOTLPReceiver(t *testing.T, header string) *otlpReceiver {
	r := &otlpReceiver{header: header}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.bad = append(r.bad, fmt.Sprintf("%s %s %s: %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err))
		http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
		return
	}
	r.headers = append(r.headers, req.Header.Get(r.header))
	for _, rs := range msg.ResourceSpans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{name: s.Name, resource: res, attrs: attrMap(s.Attributes),
					traceID: fmt.Sprintf("%x", s.TraceId), spanID: fmt.Sprintf("%x", s.SpanId), parentID: fmt.Sprintf("%x", s.ParentSpanId),
					status: s.GetStatus().GetCode()})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.Key] = v.GetStringValue()
		default:
			if iv, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
				m[kv.Key] = fmt.Sprint(iv.IntValue)
			} else if bv, ok := v.GetValue().(*commonpb.AnyValue_BoolValue); ok {
				m[kv.Key] = fmt.Sprint(bv.BoolValue)
			}
		}
	}
	return m
}

func (r *otlpReceiver) snapshot() (requests int, headers []string, spans []receivedSpan, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.headers...), append([]receivedSpan(nil), r.spans...), append([]string(nil), r.bad...)
}

// runTraced produces events records to a new topic and runs `eosink run` on a file with the
// given tracing section until every record is in the table, then cancels it; it returns
// the pipeline's name, the topic, the logs, and how long the exit took.
func runTraced(t *testing.T, e testbed.Env, events int, tracing string) (pipe, topic, logs string, exit time.Duration) {
	t.Helper()
	ctx := context.Background()
	topic = testbed.Topic(t, e, 2)
	schema := testbed.Schema(t, e)
	group := testbed.Name(t, "g")
	pipe = group + "-pipe"
	if n, err := app.Produce(ctx, app.ProduceOptions{Brokers: e.Brokers, Topic: topic, Events: events, Seed: 5}); err != nil || n != events {
		t.Fatalf("produce: %d %v", n, err)
	}
	file := writeFile(t, fmt.Sprintf(`
pipeline: %[1]s
kafka:
  brokers: %[2]s
  group: %[3]s
  topics: [%[4]s]
  properties: {session.timeout.ms: 6000, heartbeat.interval.ms: 1000}
database:
  url: ${DATABASE_URL}
  schema: %[5]s
  auto_migrate: true
batch: {max_records: 10, max_wait: 20ms}
timeouts: {shutdown: 20s}
sink: {type: clitest}
log: {format: json, level: info, progress: 0}
%[6]s`, pipe, e.Brokers, group, topic, schema, tracing))
	t.Setenv("DATABASE_URL", e.DatabaseURL)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- Run(runCtx, []string{"run", "-config", file}, &out, &errb) }()
	pool := testbed.Pool(t, e)
	rows := pgx.Identifier{schema, "cli_rows"}.Sanitize()
	testbed.Eventually(t, 90*time.Second, "every record in the table", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("run exited early with %d: %s", code, errb.String())
		default:
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+rows).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n >= events, fmt.Sprintf("%d of %d rows", n, events)
	})
	cancel()
	start := time.Now()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run after cancel: exit %d: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not stop within 60s: %s", errb.String())
	}
	return pipe, topic, errb.String(), time.Since(start)
}

// TestRunTracing runs `eosink run` against the real Kafka and PostgreSQL with a tracing
// section pointing at an OTLP/HTTP receiver of the test's own: the spans of every batch
// arrive (flushed at exit, before the first scheduled export) with the pipeline's
// attributes and the configured resource and header; sampling 0 sends none; an endpoint
// that refuses connections neither stops nor holds the pipeline.
func TestRunTracing(t *testing.T) {
	e := testbed.Require(t)
	const events = 60
	const token = "tr4ce-token-never-logged"
	t.Setenv("TRACE_TOKEN", token)

	rcv := newOTLPReceiver(t, "X-Eosink-Test")
	pipe, topic, logs, _ := runTraced(t, e, events, fmt.Sprintf(`tracing:
  endpoint: %s
  headers: {X-Eosink-Test: "${TRACE_TOKEN}"}
  sampling: 1
  service_name: orders-sink
  timeout: 5s
`, rcv.srv.URL))
	requests, headers, spans, bad := rcv.snapshot()
	if len(bad) > 0 || requests == 0 {
		t.Fatalf("%d requests, bad ones: %v", requests, bad)
	}
	for _, h := range headers {
		if h != token {
			t.Fatalf("a request's X-Eosink-Test was %q, want the value of ${TRACE_TOKEN}", h)
		}
	}
	records, batches := 0, map[string]receivedSpan{}
	children := map[string]map[string]bool{}
	for _, s := range spans {
		if s.resource["service.name"] != "orders-sink" || s.resource["eosink.pipeline"] != pipe {
			t.Fatalf("span %s with resource %v, want service.name orders-sink and eosink.pipeline %s", s.name, s.resource, pipe)
		}
		switch s.name {
		case "eosink.batch":
			if s.attrs["eosink.pipeline"] != pipe || s.attrs["messaging.destination.name"] != topic || s.attrs["messaging.system"] != "kafka" ||
				s.attrs["eosink.first_offset"] == "" || s.attrs["messaging.destination.partition.id"] == "" {
				t.Fatalf("eosink.batch with attributes %v, want the pipeline %s and the topic %s", s.attrs, pipe, topic)
			}
			if s.status == tracepb.Status_STATUS_CODE_ERROR {
				t.Fatalf("a batch failed: %v", s.attrs)
			}
			var n int
			fmt.Sscan(s.attrs["messaging.batch.message_count"], &n)
			records += n
			batches[s.spanID] = s
		case "eosink.fetch", "eosink.write", "eosink.commit":
			if children[s.parentID] == nil {
				children[s.parentID] = map[string]bool{}
			}
			children[s.parentID][s.name] = true
		}
	}
	if records != events {
		t.Fatalf("the batch spans count %d records in %d batches, want every one of %d (spans: %d)", records, len(batches), events, len(spans))
	}
	for id, b := range batches {
		if !children[id]["eosink.write"] || !children[id]["eosink.commit"] {
			t.Fatalf("batch %s (offsets from %s) has children %v, want eosink.write and eosink.commit", id, b.attrs["eosink.first_offset"], children[id])
		}
	}
	t.Logf("%d spans of %d batches in %d requests", len(spans), len(batches), requests)
	if strings.Contains(logs, token) || !strings.Contains(logs, `"msg":"tracing: exporting spans over OTLP/HTTP"`) {
		t.Fatalf("logs show the header's value, or not that tracing is on:\n%s", logs)
	}

	// Sampling 0: no span reaches the receiver.
	none := newOTLPReceiver(t, "X-Eosink-Test")
	runTraced(t, e, 20, "tracing: {endpoint: '"+none.srv.URL+"', sampling: 0}\n")
	if requests, _, spans, _ := none.snapshot(); len(spans) > 0 {
		t.Fatalf("sampling 0: %d spans in %d requests", len(spans), requests)
	}

	// An https receiver, trusted through tls.ca_file.
	secure := newOTLPReceiver(t, "X-Eosink-Test")
	secure.srv.Close()
	secure.srv = httptest.NewTLSServer(http.HandlerFunc(secure.serve))
	t.Cleanup(secure.srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pipe, _, _, _ = runTraced(t, e, 20, "tracing: {endpoint: '"+secure.srv.URL+"', tls: {ca_file: '"+ca+"'}}\n")
	if _, _, spans, bad := secure.snapshot(); len(spans) == 0 || len(bad) > 0 || spans[0].resource["eosink.pipeline"] != pipe {
		t.Fatalf("https with tls.ca_file: %d spans, bad requests %v", len(spans), bad)
	}

	// A receiver that refuses connections: every record is applied all the same, and the exit
	// waits for the flush at most tracingShutdownTimeout.
	closed := newOTLPReceiver(t, "X-Eosink-Test")
	gone := closed.srv.URL
	closed.srv.Close()
	_, _, logs, took := runTraced(t, e, 20, "tracing: {endpoint: '"+gone+"', headers: {X-Eosink-Test: '${TRACE_TOKEN}'}}\n")
	t.Logf("unreachable receiver: the exit took %s", took)
	if took > tracingShutdownTimeout+20*time.Second {
		t.Fatalf("the exit took %s with an unreachable receiver", took)
	}
	if !strings.Contains(logs, `"level":"WARN","msg":"tracing: `) || strings.Contains(logs, token) {
		t.Fatalf("with an unreachable receiver, the logs:\n%s\nwant a tracing warning and no header value", logs)
	}
}

// TestExportErrorsRateLimited: the first export error is logged, the next within a minute
// are counted, and the line after the minute says how many were left out; header values are
// redacted from the error's text.
func TestExportErrorsRateLimited(t *testing.T) {
	var logs syncBuffer
	h := &exportErrors{log: slog.New(slog.NewJSONHandler(&logs, nil)), endpoint: "http://x:4318/v1/traces",
		redact: func(s string) string { return strings.ReplaceAll(s, "s3cret-key", "xxxxx") }}
	for range 3 {
		h.Handle(errors.New("refused, header s3cret-key"))
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || strings.Contains(logs.String(), "s3cret-key") || !strings.Contains(logs.String(), `"errors_not_logged":0`) {
		t.Fatalf("after 3 errors within a minute, %d lines:\n%s\nwant 1, redacted", n, logs.String())
	}
	h.mu.Lock()
	h.last = h.last.Add(-exportErrorInterval)
	h.mu.Unlock()
	h.Handle(errors.New("refused"))
	if n := strings.Count(logs.String(), "\n"); n != 2 || !strings.Contains(logs.String(), `"errors_not_logged":2`) {
		t.Fatalf("after the minute, %d lines:\n%s\nwant 2, the second with errors_not_logged 2", n, logs.String())
	}
}
