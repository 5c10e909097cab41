package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/cli"
	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sinkhttp"
)

// eosink runs the eosink command in this process against the pipeline's services.
func (p *pipeline) eosink(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append(args, "-database-url", p.Env.DatabaseURL, "-brokers", p.Env.Brokers, "-schema", p.OffsetsSchema)
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), args, &out, &errOut); code != 0 {
		return out.String(), fmt.Errorf("eosink %v: exit %d: %s", args, code, errOut.String())
	}
	return out.String(), nil
}

// statusJSON returns `eosink status -json` of the pipeline, decoded loosely.
func (p *pipeline) statusJSON(t *testing.T) map[string]any {
	t.Helper()
	out, err := p.eosink(t, "status", "-json", "-pipeline", p.Group)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("status -json: %v: %s", err, out)
	}
	return list[0]
}

// stoppedGauges returns the eosink_partition_stopped series with value 1, as
// "partition/reason".
func stoppedGauges(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "eosink_partition_stopped" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if m.GetGauge().GetValue() == 1 {
				out = append(out, labels["partition"]+"/"+labels["reason"])
			}
		}
	}
	return out
}

// TestLoudStops: a partition refused at claim (its stored offset past the log end) and a
// partition stopped by a handler error both show within seconds as
// eosink_partition_stopped{reason}, one ERROR line each with the remedy, and in
// `eosink status` with reason and remedy; status tells that the owner is alive, and gone
// once the sink stopped.
func TestLoudStops(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 100, 61)
	p.setStored(t, 1, 100000, 1)
	base := app.Handler(p.Schema)
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if b.Partition == 0 {
			return errors.New("the plugin refuses partition 0")
		}
		return base(ctx, tx, b)
	}
	cfg := p.config(t, h)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))
	cfg.InstanceID = testbed.Name(t, "i")
	r := startSink(t, cfg)
	start := time.Now()
	testbed.Eventually(t, 30*time.Second, "both partitions in eosink_partition_stopped", func() (bool, string) {
		g := stoppedGauges(t, reg)
		return len(g) == 2, fmt.Sprint(g)
	})
	t.Logf("gauges after %s: %v", time.Since(start).Round(time.Millisecond), stoppedGauges(t, reg))
	for _, want := range []string{"0/handler", "1/out_of_range"} {
		if !strings.Contains(fmt.Sprint(stoppedGauges(t, reg)), want) {
			t.Fatalf("no eosink_partition_stopped for %s: %v", want, stoppedGauges(t, reg))
		}
	}
	testbed.Eventually(t, 15*time.Second, "status to show both stops with remedies and the owner alive", func() (bool, string) {
		st := p.statusJSON(t)
		b, _ := json.Marshal(st)
		s := string(b)
		return strings.Contains(s, `"reason":"handler"`) && strings.Contains(s, `"reason":"out_of_range"`) &&
			strings.Contains(s, `"remedy":`) && strings.Contains(s, `"owners_alive":["`+cfg.InstanceID+`"]`), s
	})
	out, err := p.eosink(t, "status", "-pipeline", p.Group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("eosink status:\n%s", out)
	if !strings.Contains(out, "remedy: ") || !strings.Contains(out, cfg.InstanceID+" (alive)") {
		t.Fatalf("status text lacks the remedy or the live owner:\n%s", out)
	}
	for _, part := range []string{"partition=0", "partition=1"} {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=ERROR") && strings.Contains(line, `msg="partition stopped"`) && strings.Contains(line, part) {
				n++
				if !strings.Contains(line, "remedy=") {
					t.Fatalf("ERROR line without a remedy: %s", line)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d ERROR lines for %s, want 1", n, part)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 15*time.Second, "status to show the owner gone", func() (bool, string) {
		st := p.statusJSON(t)
		alive, _ := st["owners_alive"].([]any)
		return len(alive) == 0, fmt.Sprint(st["owners_alive"])
	})
}

// TestUnhealthyOnStoppedPartition: with the option, /healthz fails while a partition is
// stopped; without it, it stays ok.
func TestUnhealthyOnStoppedPartition(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 1)
			p.setStored(t, 0, 100000, 1)
			cfg := p.config(t, nil)
			cfg.UnhealthyOnStoppedPartition = on
			r := startSink(t, cfg)
			waitPartitionError(t, r, sink.ErrOffsetOutOfRange)
			srv := httptest.NewServer(sinkhttp.Handler(r.s, nil))
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := 200
			if on {
				want = 503
			}
			if resp.StatusCode != want {
				t.Fatalf("/healthz: %d %s, want %d", resp.StatusCode, body, want)
			}
			t.Logf("/healthz: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRecreatedTopicRecovery: the documented recovery of a recreated topic. The restarted
// sink stops the partition with ErrTopicRecreated; the operator runs
// `eosink offsets set -to earliest -accept-new-topic`; the next start consumes the new topic.
func TestRecreatedTopicRecovery(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 30, 62)
	r := startSink(t, p.config(t, nil))
	testbed.Eventually(t, 60*time.Second, "30 records applied", func() (bool, string) {
		n, _, _ := p.ledgerOffsets(t)
		return n == 30, fmt.Sprint(n)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	p.recreateTopic(t)
	p.Produce(t, 10, 63)

	r = startSink(t, p.config(t, nil))
	waitPartitionError(t, r, sink.ErrTopicRecreated)
	testbed.Eventually(t, 15*time.Second, "status to show topic_recreated", func() (bool, string) {
		b, _ := json.Marshal(p.statusJSON(t))
		return strings.Contains(string(b), `"reason":"topic_recreated"`), string(b)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	out, err := p.eosink(t, "offsets", "set", "-pipeline", p.Group, "-topic", p.Topic, "-partition", "0", "-to", "earliest",
		"-accept-new-topic", "-operator", "test", "-reason", "topic recreated")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("eosink offsets set:\n%s", out)
	r = startSink(t, p.config(t, nil))
	testbed.Eventually(t, 60*time.Second, "the new topic's 10 records applied", func() (bool, string) {
		if errs := r.s.PartitionErrors(); len(errs) > 0 {
			t.Fatalf("partition stopped: %v", errs)
		}
		n, _, _ := p.ledgerOffsets(t)
		return n == 40, fmt.Sprint(n)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var from, to *string
	err = connect(t, p).QueryRow(context.Background(), `SELECT from_topic_id, to_topic_id FROM `+
		pgx.Identifier{p.OffsetsSchema, "offsets_audit"}.Sanitize()+` WHERE pipeline = $1 AND operator <> ''`, p.Group).Scan(&from, &to)
	if err != nil || from == nil || to == nil || *from == *to {
		t.Fatalf("audit row: %v from %v to %v", err, from, to)
	}
	b, _ := json.Marshal(p.statusJSON(t))
	if strings.Contains(string(b), `"stopped":[{`) {
		t.Fatalf("status still shows a stop after the recovery: %s", b)
	}
}
