package main

import (
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestLatencyBreakdownSplitsTheOldestRecordsWait(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(name string, from, to int) sdktrace.ReadOnlySpan {
		return tracetest.SpanStub{Name: name, StartTime: at(from), EndTime: at(to)}.Snapshot()
	}
	l := &latencies{}
	// Records produced at 0 and 5 ms; the batch starts forming at 30, is complete at 130, the
	// plugin's Write runs from 140 to 170, COMMIT from 170 to 190.
	bt := &batchTimes{ts: []time.Time{at(5), at(0)}, written: at(140), returned: at(170)}
	l.addParts(bt, []sdktrace.ReadOnlySpan{span("eosink.fetch", 30, 130), span("eosink.write", 130, 170), span("eosink.commit", 170, 190)})
	got := l.breakdown()
	want := map[string]float64{"fetch_queue": 30, "batch_forming": 100, "pool_begin_offset": 10, "write_copy": 30, "commit": 20}
	total := 0.0
	for name, ms := range want {
		if s := got[name]; s.P50 != ms || s.N != 1 {
			t.Errorf("%s: %+v, want %v ms", name, s, ms)
		}
		total += ms
	}
	if total != 190 { // the stages add up to the oldest record's latency
		t.Fatalf("stages add up to %v ms, want 190", total)
	}
	// A retry has no fetch span: it is left out rather than counted as zero.
	l.addParts(bt, []sdktrace.ReadOnlySpan{span("eosink.write", 0, 1), span("eosink.commit", 1, 2)})
	if n := l.breakdown()["commit"].N; n != 1 {
		t.Fatalf("%d batches after a retry, want 1", n)
	}
}

// TestMedianOf: the middle value, the mean of the middle two for an even count, 0 for none;
// the input is left as it was.
func TestMedianOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{9, 1, 5}, 5}, {[]float64{30, 10, 40, 20}, 25}} {
		in := slices.Clone(c.in)
		if got := medianOf(in); got != c.want || !slices.Equal(in, c.in) {
			t.Errorf("medianOf(%v) = %v (input now %v), want %v", c.in, got, in, c.want)
		}
	}
}
