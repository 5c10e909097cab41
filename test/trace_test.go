package test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestBatchSpans: with a TracerProvider every committed batch is an eosink.batch span with
// fetch, write and commit children, and the spans' record counts add up to the records.
func TestBatchSpans(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 500, 61)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := p.config(t, nil)
	cfg.TracerProvider = tp
	r := startSink(t, cfg)
	p.WaitCaughtUp(t, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	batches := map[string]int{} // span id -> records
	total := 0
	for _, s := range spans {
		if s.Name() != "eosink.batch" {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "messaging.batch.message_count" {
				batches[s.SpanContext().SpanID().String()] = int(a.Value.AsInt64())
				total += int(a.Value.AsInt64())
			}
			if a.Key == "messaging.destination.name" && a.Value.AsString() != p.Topic {
				t.Errorf("batch span topic %q, want %q", a.Value.AsString(), p.Topic)
			}
		}
	}
	if len(batches) == 0 || total != 500 {
		t.Fatalf("%d batch spans covering %d records, want spans covering the 500 records", len(batches), total)
	}
	children := map[string]map[string]bool{}
	for _, s := range spans {
		parent := s.Parent().SpanID().String()
		if _, ok := batches[parent]; ok {
			if children[parent] == nil {
				children[parent] = map[string]bool{}
			}
			children[parent][s.Name()] = true
		}
	}
	for id := range batches {
		for _, want := range []string{"eosink.fetch", "eosink.write", "eosink.commit"} {
			if !children[id][want] {
				t.Fatalf("batch span %s has no %s child (children: %v)", id, want, children[id])
			}
		}
	}
}
