package cdc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

const itemsDDL = `CREATE TABLE %s (id int PRIMARY KEY, v int NOT NULL, note text NOT NULL)`

// rowsText returns table's rows as id → row::text.
func rowsText(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) map[int]string {
	t.Helper()
	rows, err := q.Query(context.Background(), fmt.Sprintf("SELECT id, r::text FROM %s r", table))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	var id int
	var s string
	if _, err := pgx.ForEachRow(rows, []any{&id, &s}, func() error { out[id] = s; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffRows lists the ids whose row::text differs between source and replica.
func diffRows(src, rep map[int]string) []string {
	var out []string
	for id, s := range src {
		if r, ok := rep[id]; !ok {
			out = append(out, fmt.Sprintf("%d: missing in the replica (source %s)", id, s))
		} else if r != s {
			out = append(out, fmt.Sprintf("%d: replica %s, source %s", id, r, s))
		}
	}
	for id, r := range rep {
		if _, ok := src[id]; !ok {
			out = append(out, fmt.Sprintf("%d: only in the replica (%s)", id, r))
		}
	}
	sort.Strings(out)
	return out
}

// startDebezium starts the connector (at most 5 minutes: the machine may be loaded); it is
// killed at the end.
func startDebezium(t *testing.T, o testbed.DebeziumOptions) *testbed.Debezium {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := testbed.StartDebezium(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		d.Kill()
		_ = d.Stop() // drops the slot and publication when the source is still there
		if t.Failed() {
			t.Logf("---- last lines of %s ----\n%s", d.Log, d.LogTail(40))
		}
	})
	return d
}

// sinkConfig writes the pipeline config of a cdc sink of topics into replica.
func sinkConfig(t *testing.T, e testbed.Env, pipeline, offsets, replica, httpAddr string, topics []string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
database:
  url: %s
  schema: %s
on_poison: dead-letter
http: %s
sink:
  type: cdc
  truncate: true
  table: "%s.$${source.table}"
`, pipeline, e.Brokers, testbed.Name(t, "g"), strings.Join(topics, ", "), e.DatabaseURL, offsets, httpAddr, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// stoppedReasons returns the partitions of eosink_partition_stopped as "partition/reason".
func stoppedReasons(t *testing.T, addr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "eosink_partition_stopped{") || !strings.HasSuffix(line, " 1") {
			continue
		}
		var part, reason string
		for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "eosink_partition_stopped{"), "} 1"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "partition":
				part = strings.Trim(v, `"`)
			case "reason":
				reason = strings.Trim(v, `"`)
			}
		}
		out = append(out, part+"/"+reason)
	}
	sort.Strings(out)
	return out
}
