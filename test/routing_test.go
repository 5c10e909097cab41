package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/cli"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/cdc"
	"github.com/eosink/eosink/sink/sinkhttp"
	"github.com/eosink/eosink/sink/table"
)

// Many topics into many tables: one pipeline subscribed to a pattern, each topic routed to its
// table by the table plugin.

// routed is one test's pattern pipeline: topics named <prefix>.<name>, tables <schema>.<name>.
type routed struct {
	e             testbed.Env
	prefix        string // topics are prefix + "." + name
	schema        string // the tables
	offsetsSchema string
	group         string
	produced      map[string]int // records produced per topic name
	protocol      string         // "" (eager), cooperative-sticky, or consumer (KIP-848)
}

func newRouted(t *testing.T) *routed {
	e := testbed.Require(t)
	r := &routed{e: e, prefix: testbed.Name(t, "rt"), schema: testbed.Schema(t, e), offsetsSchema: testbed.Schema(t, e),
		group: testbed.Name(t, "g"), produced: map[string]int{}}
	if err := sink.Migrate(context.Background(), e.DatabaseURL, r.offsetsSchema); err != nil {
		t.Fatalf("migrate offsets: %v", err)
	}
	if _, err := testbed.Pool(t, e).Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{r.schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *routed) topic(name string) string { return r.prefix + "." + name }

// pattern subscribes to every topic of the test: ^<prefix>\..*
func (r *routed) pattern() string { return "^" + r.prefix + `\..*` }

// createTopic creates <prefix>.<name> and waits until the broker's metadata has it; it is
// deleted when the test ends.
func (r *routed) createTopic(t *testing.T, name string, partitions int) {
	t.Helper()
	topic := r.topic(name)
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}},
		kafka.SetAdminOperationTimeout(20*time.Second))
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create topic %s: %v %v", topic, err, res)
	}
	testbed.Eventually(t, 30*time.Second, "topic "+topic+" in the metadata", func() (bool, string) {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err != nil {
			return false, err.Error()
		}
		tm, ok := md.Topics[topic]
		return ok && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == partitions, "not yet"
	})
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.e.Brokers})
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = a.DeleteTopics(ctx, []string{topic})
	})
}

// createTable creates <schema>.<name> for the columns of routeColumns.
func (r *routed) createTable(t *testing.T, name string) {
	t.Helper()
	_, err := testbed.Pool(t, r.e).Exec(context.Background(), "CREATE TABLE "+pgx.Identifier{r.schema, name}.Sanitize()+
		" (k text NOT NULL, id bigint NOT NULL, body jsonb NOT NULL, src_topic text NOT NULL, src_partition int NOT NULL, src_offset bigint NOT NULL)")
	if err != nil {
		t.Fatal(err)
	}
}

var routeColumns = map[string]table.Column{
	"k": {From: "key"}, "id": {From: "value.id", Required: true}, "body": {From: "value"},
	"src_topic": {From: "topic"}, "src_partition": {From: "partition"}, "src_offset": {From: "offset"},
}

// produce writes n more records to <prefix>.<name>, ids following the ones produced before.
func (r *routed) produce(t *testing.T, name string, n int) {
	t.Helper()
	msgs := make([]testbed.Msg, n)
	for i := range msgs {
		id := r.produced[name] + i
		msgs[i] = testbed.Msg{Partition: -1, Key: []byte(fmt.Sprintf("k-%d", id)),
			Value: []byte(fmt.Sprintf(`{"id": %d, "from": %q}`, id, name))}
	}
	testbed.Produce(t, r.e, r.topic(name), msgs)
	r.produced[name] += n
}

func (r *routed) count(t *testing.T, name string) int {
	t.Helper()
	var n int
	if err := testbed.Pool(t, r.e).QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{r.schema, name}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// config is the pipeline: a pattern subscription with a fast metadata refresh (so that new
// topics are seen within a second), the table plugin p.
func (r *routed) config(t *testing.T, p sink.Plugin, logs io.Writer) sink.Config {
	props := kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000}
	switch r.protocol {
	case "cooperative-sticky":
		props["partition.assignment.strategy"] = "cooperative-sticky"
	case "consumer":
		props = kafka.ConfigMap{"group.protocol": "consumer", "topic.metadata.refresh.interval.ms": 1000}
	}
	return sink.Config{
		Brokers: r.e.Brokers, GroupID: r.group, Topics: []string{r.pattern()},
		DatabaseURL: r.e.DatabaseURL, Schema: r.offsetsSchema, Plugin: p,
		Kafka: props, MaxBatchRecords: 40,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), nil)),
	}
}

// verify checks a table against what was produced to its topic, exactly once: one row per
// record (no duplicate partition and offset), every id once with its own key and body,
// each partition's rows exactly the offsets below its stored next offset, which is the end
// of the partition's log.
func (r *routed) verify(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	db := testbed.Pool(t, r.e)
	topic := r.topic(name)
	want := r.produced[name]
	var rows, distinctOffsets, distinctIDs, minID, maxID, wrong int
	err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (src_partition, src_offset)), count(DISTINCT id), coalesce(min(id), -1), coalesce(max(id), -1),
		count(*) FILTER (WHERE k <> 'k-' || id OR body <> jsonb_build_object('id', id, 'from', $1::text) OR src_topic <> $2)
		FROM `+pgx.Identifier{r.schema, name}.Sanitize(), name, topic).Scan(&rows, &distinctOffsets, &distinctIDs, &minID, &maxID, &wrong)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: produced %d, rows %d, distinct offsets %d, distinct ids %d (%d..%d), rows not matching their record %d",
		name, want, rows, distinctOffsets, distinctIDs, minID, maxID, wrong)
	if rows != want || distinctOffsets != want || distinctIDs != want || minID != 0 || maxID != want-1 || wrong != 0 {
		t.Fatalf("%s is not exactly the %d records produced", name, want)
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": r.e.Brokers, "group.id": r.group + "-verify"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, pm := range md.Topics[topic].Partitions {
		_, high, err := c.QueryWatermarkOffsets(topic, pm.ID, 10000)
		if err != nil {
			t.Fatal(err)
		}
		var next int64
		var n, maxOffset int64
		err = db.QueryRow(ctx, `SELECT (SELECT next_offset FROM `+pgx.Identifier{r.offsetsSchema, "offsets"}.Sanitize()+
			` WHERE pipeline = $1 AND topic = $2 AND partition = $3), count(*), coalesce(max(src_offset), -1) FROM `+
			pgx.Identifier{r.schema, name}.Sanitize()+` WHERE src_partition = $3`, r.group, topic, pm.ID).Scan(&next, &n, &maxOffset)
		if err != nil {
			t.Fatalf("%s[%d]: %v", topic, pm.ID, err)
		}
		if next != high || n != high || maxOffset != high-1 {
			t.Fatalf("%s[%d]: stored next offset %d, %d rows up to offset %d; the log ends at %d", topic, pm.ID, next, n, maxOffset, high)
		}
	}
}

// TestPatternRoutesTopicsToTables: a pipeline subscribed to ^<prefix>\..* consumes two
// existing topics into two tables; a third topic created while it runs is picked up and
// routed to its own table; after a restart more records of all three follow. Each table then
// holds exactly its topic's records, once, and the stored positions are the logs' ends. With
// the eager and cooperative-sticky assignors and the consumer protocol (KIP-848).
func TestPatternRoutesTopicsToTables(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"eager", "cooperative-sticky", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			testPatternRoutes(t, protocol)
		})
	}
}

func testPatternRoutes(t *testing.T, protocol string) {
	r := newRouted(t)
	if protocol != "eager" {
		r.protocol = protocol
	}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		r.createTable(t, name)
	}
	r.createTopic(t, "alpha", 2)
	r.createTopic(t, "beta", 1)
	r.produce(t, "alpha", 150)
	r.produce(t, "beta", 90)
	plugin := func() sink.Plugin {
		p, err := table.New(table.Config{Columns: routeColumns,
			Routes: []table.Route{{Topic: "^" + r.prefix + `\.(alpha|beta|gamma)$`, Table: r.schema + ".${1}"}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var logs syncBuffer
	run := startSink(t, r.config(t, plugin(), &logs))
	testbed.Eventually(t, 60*time.Second, "alpha and beta applied", func() (bool, string) {
		a, b := r.count(t, "alpha"), r.count(t, "beta")
		return a == 150 && b == 90, fmt.Sprintf("alpha %d, beta %d", a, b)
	})

	// A new topic matching the pattern, created while the sink runs.
	r.createTopic(t, "gamma", 2)
	r.produce(t, "gamma", 60)
	start := time.Now()
	testbed.Eventually(t, 60*time.Second, "the new topic gamma picked up and applied", func() (bool, string) {
		if errs := run.s.PartitionErrors(); len(errs) > 0 {
			t.Fatalf("partition stopped: %v", errs)
		}
		n := r.count(t, "gamma")
		return n == 60, fmt.Sprintf("gamma %d", n)
	})
	t.Logf("gamma's 60 records applied %s after they were produced", time.Since(start).Round(time.Millisecond))
	r.produce(t, "alpha", 50)
	r.produce(t, "gamma", 40)
	testbed.Eventually(t, 60*time.Second, "the second round applied", func() (bool, string) {
		a, g := r.count(t, "alpha"), r.count(t, "gamma")
		return a == 200 && g == 100, fmt.Sprintf("alpha %d, gamma %d", a, g)
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"topics matching the pattern", r.topic("alpha"), r.topic("beta")} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the start log does not list the matching topics (%q)", want)
		}
	}

	// Restart: positions come from the database, for the topic found at runtime too.
	r.produce(t, "alpha", 30)
	r.produce(t, "beta", 30)
	r.produce(t, "gamma", 30)
	run = startSink(t, r.config(t, plugin(), io.Discard))
	testbed.Eventually(t, 60*time.Second, "the third round applied", func() (bool, string) {
		a, b, g := r.count(t, "alpha"), r.count(t, "beta"), r.count(t, "gamma")
		return a == 230 && b == 120 && g == 130, fmt.Sprintf("alpha %d, beta %d, gamma %d", a, b, g)
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if errs := run.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partitions stopped: %v", errs)
	}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		r.verify(t, name)
	}
}

// TestPatternUnroutedTopicFailsAtStart: a topic that the pattern matches when the sink
// starts and that no route takes makes Run fail before it consumes, naming the topic; nothing
// is written, no position is stored.
func TestPatternUnroutedTopicFailsAtStart(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	r.createTable(t, "alpha")
	r.createTopic(t, "alpha", 1)
	r.createTopic(t, "stray", 1)
	r.produce(t, "alpha", 20)
	r.produce(t, "stray", 20)
	p, err := table.New(table.Config{Columns: routeColumns, Routes: []table.Route{{Topic: r.topic("alpha"), Table: r.schema + ".alpha"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.New(r.config(t, p, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = s.Run(ctx)
	t.Logf("Run: %v", err)
	var nr *sink.NoRouteError
	if !errors.Is(err, sink.ErrNoRoute) || !errors.As(err, &nr) || nr.Topic != r.topic("stray") || nr.Pattern != r.pattern() {
		t.Fatalf("Run returned %v, want a *sink.NoRouteError for %s matched by %s", err, r.topic("stray"), r.pattern())
	}
	if !strings.Contains(err.Error(), `no route for topic "`+r.topic("stray")+`"`) || !strings.Contains(err.Error(), "matches none of the sink's routes") {
		t.Fatalf("the error does not say what is wrong: %v", err)
	}
	if n := r.count(t, "alpha"); n != 0 {
		t.Fatalf("%d rows written to alpha", n)
	}
	var rows int
	if err := testbed.Pool(t, r.e).QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{r.offsetsSchema, "offsets"}.Sanitize()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("%d offset rows stored", rows)
	}
}

// TestPatternUnroutedTopicAtRuntime: a topic created while the sink runs that matches the
// pattern but no route stops its partition loudly (a *sink.NoRouteError, the gauge with
// reason no_route, a failing /healthz, the offsets row's stopped_reason) with its position
// left at the start, while the routed topic goes on. A restart with a route for it applies
// every one of its records: nothing was skipped.
func TestPatternUnroutedTopicAtRuntime(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	r.createTable(t, "alpha")
	r.createTable(t, "stray")
	r.createTopic(t, "alpha", 1)
	r.produce(t, "alpha", 40)
	only := func(routes ...string) sink.Plugin {
		var rs []table.Route
		for _, name := range routes {
			rs = append(rs, table.Route{Topic: r.topic(name), Table: r.schema + "." + name})
		}
		p, err := table.New(table.Config{Columns: routeColumns, Routes: rs})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var logs syncBuffer
	cfg := r.config(t, only("alpha"), &logs)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.UnhealthyOnStoppedPartition = true
	run := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "alpha applied", func() (bool, string) {
		n := r.count(t, "alpha")
		return n == 40, fmt.Sprint(n)
	})

	r.createTopic(t, "stray", 1)
	r.produce(t, "stray", 25)
	waitPartitionError(t, run, sink.ErrNoRoute)
	var nr *sink.NoRouteError
	for _, e := range run.s.PartitionErrors() {
		errors.As(e, &nr)
	}
	if nr == nil || nr.Topic != r.topic("stray") || nr.Pattern != r.pattern() {
		t.Fatalf("partition errors %v, want a *sink.NoRouteError for %s matched by %s", run.s.PartitionErrors(), r.topic("stray"), r.pattern())
	}
	testbed.Eventually(t, 15*time.Second, "eosink_partition_stopped{reason=no_route}", func() (bool, string) {
		g := stoppedGauges(t, reg)
		return slices.Equal(g, []string{"0/no_route"}), fmt.Sprint(g)
	})
	srv := httptest.NewServer(sinkhttp.Handler(run.s, nil))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("/healthz: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != 503 || !strings.Contains(string(body), "no_route") || !strings.Contains(string(body), r.topic("stray")) {
		t.Fatalf("/healthz: %d %s, want 503 naming the topic and no_route", resp.StatusCode, body)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "reason=no_route") {
			line = l
		}
	}
	if !strings.Contains(line, "remedy=") || !strings.Contains(line, "topic="+r.topic("stray")) {
		t.Fatalf("no ERROR line with the topic and a remedy: %q", line)
	}

	// The other partitions go on.
	r.produce(t, "alpha", 30)
	testbed.Eventually(t, 60*time.Second, "alpha goes on", func() (bool, string) {
		n := r.count(t, "alpha")
		return n == 70, fmt.Sprint(n)
	})
	testbed.Eventually(t, 15*time.Second, "the offsets row of stray to say no_route", func() (bool, string) {
		var reason *string
		var next int64
		err := testbed.Pool(t, r.e).QueryRow(context.Background(), `SELECT next_offset, stopped_reason FROM `+
			pgx.Identifier{r.offsetsSchema, "offsets"}.Sanitize()+` WHERE pipeline = $1 AND topic = $2 AND partition = 0`,
			r.group, r.topic("stray")).Scan(&next, &reason)
		if err != nil {
			return false, err.Error()
		}
		if next != 0 {
			t.Fatalf("stray's stored position moved to %d without a route", next)
		}
		return reason != nil && *reason == sink.StopNoRoute, fmt.Sprint(reason)
	})
	if n := r.count(t, "stray"); n != 0 {
		t.Fatalf("%d rows of stray written without a route", n)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// The operator adds the route and restarts: every record of stray is applied, once.
	run = startSink(t, r.config(t, only("alpha", "stray"), io.Discard))
	testbed.Eventually(t, 60*time.Second, "stray applied from its start", func() (bool, string) {
		n := r.count(t, "stray")
		return n == 25, fmt.Sprint(n)
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if errs := run.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partitions stopped: %v", errs)
	}
	r.verify(t, "alpha")
	r.verify(t, "stray")
}

// eosink runs the eosink command in this process on the test's services.
func (r *routed) eosink(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append(args, "-database-url", r.e.DatabaseURL, "-brokers", r.e.Brokers, "-schema", r.offsetsSchema)
	var out, errOut strings.Builder
	if code := cli.Run(context.Background(), args, &out, &errOut); code != 0 {
		return out.String(), fmt.Errorf("eosink %v: exit %d: %s", args, code, errOut.String())
	}
	return out.String(), nil
}

// TestPatternTopicDeleted: a topic of a pattern subscription deleted while the sink runs is
// revoked; the other topics go on, and `eosink lag` and `eosink offsets list` still answer,
// showing the deleted topic's rows with the broker's error instead of failing.
func TestPatternTopicDeleted(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	r.createTable(t, "alpha")
	r.createTable(t, "beta")
	r.createTopic(t, "alpha", 1)
	r.createTopic(t, "beta", 1)
	r.produce(t, "alpha", 20)
	r.produce(t, "beta", 20)
	p, err := table.New(table.Config{Columns: routeColumns,
		Routes: []table.Route{{Topic: "^" + r.prefix + `\.(.*)`, Table: r.schema + ".${1}"}}})
	if err != nil {
		t.Fatal(err)
	}
	run := startSink(t, r.config(t, p, io.Discard))
	testbed.Eventually(t, 60*time.Second, "alpha and beta applied", func() (bool, string) {
		a, b := r.count(t, "alpha"), r.count(t, "beta")
		return a == 20 && b == 20, fmt.Sprintf("alpha %d, beta %d", a, b)
	})
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := a.DeleteTopics(ctx, []string{r.topic("beta")}); err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("delete beta: %v %v", err, res)
	}
	r.produce(t, "alpha", 20)
	testbed.Eventually(t, 60*time.Second, "alpha goes on", func() (bool, string) {
		n := r.count(t, "alpha")
		return n == 40, fmt.Sprint(n)
	})
	if errs := run.s.PartitionErrors(); len(errs) > 0 {
		t.Fatalf("partitions stopped: %v", errs)
	}
	for _, cmd := range [][]string{{"lag", "-pipeline", r.group}, {"offsets", "list", "-pipeline", r.group}} {
		testbed.Eventually(t, 30*time.Second, "eosink "+cmd[0]+" to answer with alpha at lag 0", func() (bool, string) {
			out, err := r.eosink(t, cmd...)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(out, r.topic("alpha")) && strings.Contains(out, r.topic("beta")), out
		})
		out, _ := r.eosink(t, cmd...)
		t.Logf("eosink %s:\n%s", strings.Join(cmd, " "), out)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	r.verify(t, "alpha")
}

// TestPatternPipelineFile: `eosink run -config` with kafka.topics: ["^<prefix>\\..*"] and a
// routes list reads both matching topics into their tables; the same file with a topic that
// no route takes exits 1 at start, naming it, having written nothing.
func TestPatternPipelineFile(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	r.createTable(t, "alpha")
	r.createTable(t, "beta")
	r.createTopic(t, "alpha", 2)
	r.createTopic(t, "beta", 1)
	r.produce(t, "alpha", 50)
	r.produce(t, "beta", 30)
	file := func(routes string) string {
		path := filepath.Join(t.TempDir(), "pipeline.yaml")
		text := fmt.Sprintf(`kafka:
  brokers: %s
  group: %s
  topics: ["^%s\\..*"]
  properties: {topic.metadata.refresh.interval.ms: 1000}
database: {url: "%s", schema: %s}
sink:
  type: table
  columns: {k: key, id: {from: value.id, required: true}, body: value, src_topic: topic, src_partition: partition, src_offset: offset}
  routes:
%s`, r.e.Brokers, r.group, r.prefix, r.e.DatabaseURL, r.offsetsSchema, routes)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// alpha only: beta matches and has no route.
	var out, errOut strings.Builder
	code := cli.Run(context.Background(), []string{"run", "-config", file(fmt.Sprintf("    - {topic: %s.alpha, table: %s.alpha}\n", r.prefix, r.schema))}, &out, &errOut)
	t.Logf("exit %d: %s", code, lastLines(errOut.String(), 2))
	if code != 1 || !strings.Contains(errOut.String(), `no route for topic "`+r.topic("beta")+`"`) {
		t.Fatalf("exit %d, want 1 naming %s", code, r.topic("beta"))
	}
	if n := r.count(t, "alpha"); n != 0 {
		t.Fatalf("%d rows written", n)
	}

	// Both, by the pattern's group.
	routes := fmt.Sprintf("    - {topic: '^%s\\.(alpha|beta)$', table: \"%s.$${1}\"}\n", r.prefix, r.schema)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var runErr syncBuffer
	go func() { done <- cli.Run(ctx, []string{"run", "-config", file(routes)}, io.Discard, &runErr) }()
	testbed.Eventually(t, 60*time.Second, "alpha and beta applied by eosink run", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("eosink run exited %d: %s", code, lastLines(runErr.String(), 5))
		default:
		}
		a, b := r.count(t, "alpha"), r.count(t, "beta")
		return a == 50 && b == 30, fmt.Sprintf("alpha %d, beta %d", a, b)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("eosink run exited %d after cancellation: %s", code, lastLines(runErr.String(), 5))
	}
	r.verify(t, "alpha")
	r.verify(t, "beta")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// changeEvent is a Debezium change event (JsonConverter without schemas) of source table
// public.<table>: key {"id": id}, after {"id": id, "v": v}, at source LSN lsn.
func changeEvent(table string, id, v, lsn int) testbed.Msg {
	return testbed.Msg{Partition: -1, Key: []byte(fmt.Sprintf(`{"id": %d}`, id)),
		Value: []byte(fmt.Sprintf(`{"before": null, "after": {"id": %d, "v": "%s-%d"}, "op": "c",
			"source": {"db": "src", "schema": "public", "table": %q, "lsn": %d}}`, id, table, v, table, lsn))}
}

// TestCDCOverPattern: the cdc plugin under a pattern subscription ^<prefix>\.public\..*:
// it routes by each event's source table (table: <schema>.${source.table}), so every
// topic has a route; two topics are replicated, and a third created while the sink runs is
// picked up and replicated too.
func TestCDCOverPattern(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	ctx := context.Background()
	db := testbed.Pool(t, r.e)
	for _, name := range []string{"accounts", "lines", "notes"} {
		if _, err := db.Exec(ctx, "CREATE TABLE "+pgx.Identifier{r.schema, name}.Sanitize()+" (id int PRIMARY KEY, v text NOT NULL)"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := cdc.New(cdc.Config{Table: r.schema + ".${source.table}", PositionsSchema: r.offsetsSchema})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigratePlugin(ctx, r.e.DatabaseURL, p, nil); err != nil {
		t.Fatal(err)
	}
	lsn := 0
	write := func(table string, ids, version int) {
		msgs := make([]testbed.Msg, ids)
		for i := range msgs {
			lsn += 10
			msgs[i] = changeEvent(table, i, version, lsn)
		}
		testbed.Produce(t, r.e, r.topic("public."+table), msgs)
	}
	// replica returns how many rows of table have version v (and how many rows in all).
	replica := func(table string, v int) (int, int) {
		var at, all int
		if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE v = $1::text || '-' || $2::int), count(*) FROM `+
			pgx.Identifier{r.schema, table}.Sanitize(), table, v).Scan(&at, &all); err != nil {
			t.Fatal(err)
		}
		return at, all
	}
	r.createTopic(t, "public.accounts", 2)
	r.createTopic(t, "public.lines", 1)
	write("accounts", 40, 1)
	write("lines", 25, 1)
	cfg := r.config(t, p, io.Discard)
	cfg.Topics = []string{"^" + r.prefix + `\.public\..*`}
	run := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "accounts and lines replicated", func() (bool, string) {
		a, _ := replica("accounts", 1)
		l, _ := replica("lines", 1)
		return a == 40 && l == 25, fmt.Sprintf("accounts %d, lines %d", a, l)
	})
	r.createTopic(t, "public.notes", 1)
	write("notes", 15, 1)
	write("accounts", 40, 2) // every account updated
	testbed.Eventually(t, 60*time.Second, "notes (a topic created while running) replicated, accounts updated", func() (bool, string) {
		if errs := run.s.PartitionErrors(); len(errs) > 0 {
			t.Fatalf("partition stopped: %v", errs)
		}
		n, _ := replica("notes", 1)
		a, _ := replica("accounts", 2)
		return n == 15 && a == 40, fmt.Sprintf("notes %d, accounts at version 2 %d", n, a)
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string][2]int{"accounts": {2, 40}, "lines": {1, 25}, "notes": {1, 15}} {
		at, all := replica(table, want[0])
		t.Logf("%s: %d rows, %d at version %d", table, all, at, want[0])
		if at != want[1] || all != want[1] {
			t.Fatalf("%s: %d rows, %d at version %d; want %d", table, all, at, want[0], want[1])
		}
	}
}

// TestPatternMatchingNothingYet: a pattern that matches no topic at start is no error (it
// is logged); the sink runs and reads the first matching topic once it is created.
func TestPatternMatchingNothingYet(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	r.createTable(t, "first")
	p, err := table.New(table.Config{Columns: routeColumns, Table: r.schema + ".first"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	run := startSink(t, r.config(t, p, &logs))
	testbed.Eventually(t, 30*time.Second, "the sink consuming, with no topic yet", func() (bool, string) {
		return run.s.Ready(), "not ready"
	})
	if !strings.Contains(logs.String(), "no topic matches the pattern yet") {
		t.Fatal("no warning that the pattern matches nothing")
	}
	r.createTopic(t, "first", 1)
	r.produce(t, "first", 35)
	testbed.Eventually(t, 60*time.Second, "the first matching topic applied", func() (bool, string) {
		n := r.count(t, "first")
		return n == 35, fmt.Sprint(n)
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	r.verify(t, "first")
}
