package sink

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Spans, when Config.TracerProvider is set. Each commit attempt of a batch is one
// "eosink.batch" span with three children:
//
//	eosink.fetch   from the batch's first record being queued for the partition (it may
//	               queue while the previous batch commits; for the rest of a backlog, from
//	               when the batch before it was formed) to the batch being complete (full,
//	               MaxBatchWait after that first record, the partition paused, or a
//	               revoke); first attempt only
//	eosink.write   BEGIN, the offset update and the plugin's Write (its ctx carries this
//	               span, so a traced pgx connection nests its queries under it)
//	eosink.commit  COMMIT, and settling an unknown outcome
//
// The batch span carries messaging.destination.name (the topic), the partition, the first
// and last offset, the record count, the attempt, whether poison isolation ran, and the
// error of a failed attempt.
const tracerName = "github.com/eosink/eosink/sink"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// batchSpan is one commit attempt's spans.
type batchSpan struct {
	ctx   context.Context
	batch trace.Span
	child trace.Span
}

func (w *worker) startBatch(batch []Record, attempt int, isolate bool) *batchSpan {
	tracer := w.cfg.tracer
	ctx, span := tracer.Start(w.ctx, "eosink.batch", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(w.batchWaitStart(attempt)),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", w.topic),
			attribute.Int("messaging.destination.partition.id", int(w.partition)),
			attribute.Int64("eosink.first_offset", batch[0].Offset),
			attribute.Int64("eosink.last_offset", batch[len(batch)-1].Offset),
			attribute.Int("messaging.batch.message_count", len(batch)),
			attribute.Int("eosink.attempt", attempt),
			attribute.Bool("eosink.isolate", isolate),
			attribute.String("eosink.pipeline", w.cfg.pipeline),
		))
	b := &batchSpan{ctx: ctx, batch: span}
	if attempt == 1 && !w.waitStart.IsZero() {
		_, fetch := tracer.Start(ctx, "eosink.fetch", trace.WithTimestamp(w.waitStart))
		fetch.End(trace.WithTimestamp(w.formedAt))
	}
	return b
}

// phase ends the current child span and starts the next; it returns the context to use.
func (b *batchSpan) phase(tracer trace.Tracer, name string) context.Context {
	if b.child != nil {
		b.child.End()
	}
	var ctx context.Context
	ctx, b.child = tracer.Start(b.ctx, name)
	return ctx
}

// end ends the spans, with err's text as ErrorText writes it (redact: Config.RedactErrorValues).
func (b *batchSpan) end(err error, redact bool) {
	var text string
	if err != nil {
		text = ErrorText(err, redact)
	}
	if b.child != nil {
		if err != nil {
			b.child.SetStatus(codes.Error, text)
		}
		b.child.End()
	}
	if err != nil {
		b.batch.RecordError(errors.New(text))
		b.batch.SetStatus(codes.Error, text)
	}
	b.batch.End()
}

// batchWaitStart is when the batch started: when its first record was queued on the first
// attempt (eosink.fetch), now on a retry.
func (w *worker) batchWaitStart(attempt int) time.Time {
	if attempt == 1 && !w.waitStart.IsZero() {
		return w.waitStart
	}
	return time.Now()
}
