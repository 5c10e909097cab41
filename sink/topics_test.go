package sink

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestSubscriptionSplitsNamesAndPatterns(t *testing.T) {
	sub, err := newSubscription([]string{"orders", `^cdc\.public\..*`, "^eu-(a|b)$"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.names) != 1 || len(sub.patterns) != 2 {
		t.Fatalf("names %v, %d patterns", sub.names, len(sub.patterns))
	}
	for topic, want := range map[string]string{
		"cdc.public.items": `^cdc\.public\..*`, "cdc.publicx": "", "eu-a": "^eu-(a|b)$", "eu-ab": "", "orders": "", "xcdc.public.a": "",
	} {
		if got := sub.pattern(topic); got != want {
			t.Errorf("%s: matched by %q, want %q", topic, got, want)
		}
	}
	// librdkafka's topic.blacklist hides topics from patterns.
	sub.ignore(`^cdc\.public\.tmp_, \.bak$,(`)
	for topic, want := range map[string]string{"cdc.public.tmp_1": "", "cdc.public.x.bak": "", "cdc.public.y": `^cdc\.public\..*`} {
		if got := sub.pattern(topic); got != want {
			t.Errorf("with a blacklist, %s: matched by %q, want %q", topic, got, want)
		}
	}
	if _, err := newSubscription([]string{"^(x"}); err == nil {
		t.Error("an invalid pattern compiled")
	}
}

// routerPlugin routes the topics in routes; it records Open calls.
type routerPlugin struct {
	routes map[string]bool
	err    error // returned for other topics; nil: a *NoRouteError
	opened []string
}

func (p *routerPlugin) CheckTopic(topic string) error {
	if p.routes[topic] {
		return nil
	}
	if p.err != nil {
		return p.err
	}
	return &NoRouteError{Topic: topic, Reason: "not in routes"}
}
func (p *routerPlugin) Open(_ context.Context, part Partition) error {
	p.opened = append(p.opened, part.Topic)
	return nil
}
func (p *routerPlugin) Write(context.Context, pgx.Tx, Batch) error { return nil }
func (p *routerPlugin) Close(context.Context, Partition) error     { return nil }

func TestCheckRoute(t *testing.T) {
	p := &routerPlugin{routes: map[string]bool{"a": true}}
	if err := checkRoute(p, "a", ""); err != nil {
		t.Fatal(err)
	}
	err := checkRoute(p, "b", "^b.*")
	var nr *NoRouteError
	if !errors.As(err, &nr) || nr.Topic != "b" || nr.Pattern != "^b.*" || !errors.Is(err, ErrNoRoute) {
		t.Fatalf("got %v, want a *NoRouteError naming the pattern", err)
	}
	if want := `eosink: no route for topic "b" (matched by the subscription "^b.*"): not in routes`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	// Any other error becomes a *NoRouteError.
	p.err = errors.New("no table for it")
	if err := checkRoute(p, "c", ""); !errors.As(err, &nr) || nr.Reason != "no table for it" {
		t.Fatalf("got %v", err)
	}
	// A plugin that does not route by topic takes every topic.
	if err := checkRoute(handlerPlugin(nil), "anything", "^.*"); err != nil {
		t.Fatal(err)
	}
	perr := &PartitionError{Topic: "b", Partition: 3, Err: &NoRouteError{Topic: "b"}}
	if r := StopReason(perr); r != StopNoRoute || !strings.Contains(stopRemedy(r), "Add a route") {
		t.Fatalf("reason %q, remedy %q", r, stopRemedy(r))
	}
}

// A routed plugin's listed topics are checked by New; a pattern is not.
func TestNewChecksListedTopicsRoutes(t *testing.T) {
	cfg := validConfig()
	cfg.Handler = nil
	cfg.Plugin = &routerPlugin{routes: map[string]bool{"a": true}}
	cfg.Topics = []string{"a", "^b.*"}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Topics = []string{"a", "b"}
	_, err := New(cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Topics[1]" || ce.Reason != `no route for topic "b": not in routes` {
		t.Fatalf("got %v", err)
	}
}

// A partition of a topic without a route stops before Open: a *PartitionError wrapping the
// *NoRouteError, and the plugin never sees it.
func TestWorkerStopsUnroutedTopicBeforeOpen(t *testing.T) {
	p := &routerPlugin{routes: map[string]bool{"a": true}}
	cfg := &workerConfig{plugin: p, log: slog.New(slog.DiscardHandler), total: new(atomic.Int64), stops: testStops(), rechecks: newRechecks()}
	w := newWorker(cfg, "b", 2, 1, 0)
	w.run()
	failed := cfg.stops.errors()
	if len(failed) != 1 || !errors.Is(failed[0], ErrNoRoute) || StopReason(failed[0]) != StopNoRoute {
		t.Fatalf("failed with %v", failed)
	}
	var pe *PartitionError
	if !errors.As(failed[0], &pe) || pe.Topic != "b" || pe.Partition != 2 {
		t.Fatalf("not a *PartitionError of b[2]: %v", failed[0])
	}
	if len(p.opened) != 0 || !w.dead.Load() {
		t.Fatalf("opened %v, dead %v", p.opened, w.dead.Load())
	}
}
