package testbed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/sink"
)

// Pipeline is one test's isolated pipeline: its own topic, group, and schemas.
type Pipeline struct {
	Env           Env
	Topic, Group  string
	Schema        string // the example's tables
	OffsetsSchema string // eosink's offsets table
}

// NewPipeline creates the topic and schemas, and applies eosink's and the points example's
// migrations.
func NewPipeline(t testing.TB, partitions int) *Pipeline {
	t.Helper()
	return NewPipelineOn(t, Require(t), partitions)
}

// NewPipelineOn is NewPipeline on the services in e (a private Bed's, for example).
func NewPipelineOn(t testing.TB, e Env, partitions int) *Pipeline {
	t.Helper()
	p := &Pipeline{Env: e, Topic: Topic(t, e, partitions), Group: Name(t, "g"),
		Schema: Schema(t, e), OffsetsSchema: Schema(t, e)}
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, p.OffsetsSchema); err != nil {
		t.Fatalf("migrate offsets: %v", err)
	}
	if err := app.Migrate(ctx, e.DatabaseURL, p.Schema); err != nil {
		t.Fatalf("migrate example: %v", err)
	}
	return p
}

// Produce writes events of the points example.
func (p *Pipeline) Produce(t testing.TB, events int, seed uint64) {
	t.Helper()
	n, err := app.Produce(context.Background(), app.ProduceOptions{Brokers: p.Env.Brokers, Topic: p.Topic, Events: events, Accounts: 37, Seed: seed})
	if err != nil || n != events {
		t.Fatalf("produce: %d of %d: %v", n, events, err)
	}
}

// Verify compares the log with the database (examples/points/app.Verify).
func (p *Pipeline) Verify(t testing.TB) app.Report {
	t.Helper()
	rep, err := app.Verify(context.Background(), app.VerifyOptions{Brokers: p.Env.Brokers, Topic: p.Topic,
		DatabaseURL: p.Env.DatabaseURL, Schema: p.Schema, Pipeline: p.Group, OffsetsSchema: p.OffsetsSchema})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// WaitCaughtUp waits until every produced event is applied and the stored offsets reach the
// log end, then checks that nothing was applied twice.
func (p *Pipeline) WaitCaughtUp(t testing.TB, timeout time.Duration) app.Report {
	t.Helper()
	var rep app.Report
	Eventually(t, timeout, "the sink to catch up", func() (bool, string) {
		rep = p.Verify(t)
		return rep.Lag == 0 && rep.Applied == rep.Produced, fmt.Sprintf("%+v", rep)
	})
	if !rep.OK() {
		t.Fatalf("exactly-once violated: %+v", rep)
	}
	return rep
}

// ClassicTimeouts make a dead member of a classic-protocol group leave within seconds
// instead of the 45s default, so that a restarted sink is assigned quickly.
var ClassicTimeouts = []string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000"}

// Args are the points run flags for this pipeline, with ClassicTimeouts.
func (p *Pipeline) Args(extra ...string) []string {
	return p.RawArgs(append(append([]string{}, ClassicTimeouts...), extra...)...)
}

// RawArgs are the points run flags for this pipeline and nothing else.
func (p *Pipeline) RawArgs(extra ...string) []string {
	return append([]string{"run", "-brokers", p.Env.Brokers, "-database-url", p.Env.DatabaseURL, "-topic", p.Topic,
		"-group", p.Group, "-schema", p.Schema, "-offsets-schema", p.OffsetsSchema, "-migrate=false"}, extra...)
}
