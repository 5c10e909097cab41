package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/console"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// Tokens of the tests' tokens file, and the operators they name.
const (
	aliceToken = "alice-token-0123456789"
	alice      = "Alice Operator"
	bobToken   = "bob-token-abcdefghijkl"
)

// bed is one test's pipeline on the real services: a one-partition topic holding 10 records,
// a migrated schema with a stored position of pipeline "pipe" (next offset 10, epoch 3, owner
// host-a, which has no heartbeat: gone) and a stopped partition of pipeline "stopped", dead
// letters (three of pipe on partitions 0 and 1, one whose value is not UTF-8, one of
// "other"), a payments table that replays write to, and a console serving them.
type bed struct {
	e       testbed.Env
	schema  string
	topic   string
	db      *pgxpool.Pool
	admin   *admin.Client
	srv     *httptest.Server
	dead    []int64 // ids: pipe's three, then other's
	logs    *syncBuffer
	tokens  string // the tokens file
	payload string // payments table
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newBed sets the bed up; adjust changes the console's Config before New (nil: mutations on,
// with the tokens file).
func newBed(t *testing.T, adjust func(*bed, *console.Config)) *bed {
	t.Helper()
	e := testbed.Require(t)
	b := &bed{e: e, schema: testbed.Schema(t, e), topic: testbed.Topic(t, e, 1), db: testbed.Pool(t, e), logs: &syncBuffer{}}
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, b.schema); err != nil {
		t.Fatal(err)
	}
	if n, err := app.Produce(ctx, app.ProduceOptions{Brokers: e.Brokers, Topic: b.topic, Events: 10, Seed: 3}); err != nil || n != 10 {
		t.Fatal(n, err)
	}
	offsetsTable := pgx.Identifier{b.schema, "offsets"}.Sanitize()
	b.exec(t, "INSERT INTO "+offsetsTable+" (pipeline, topic, partition, next_offset, epoch, owner) VALUES ('pipe', $1, 0, 10, 3, 'host-a')", b.topic)
	b.exec(t, "INSERT INTO "+offsetsTable+` (pipeline, topic, partition, next_offset, epoch, owner, stopped_reason, stopped_error, stopped_at, stopped_by)
		VALUES ('stopped', $1, 0, 10, 1, 'host-s', 'out_of_range', 'offset 3 is below the log start', now(), 'host-s')`, b.topic)
	dl := pgx.Identifier{b.schema, "dead_letters"}.Sanitize()
	for _, row := range []struct {
		pipeline  string
		partition int
		offset    int
		key       []byte
		value     []byte
	}{
		{"pipe", 0, 1, []byte("k1"), []byte(`{"amount": 1}`)},
		{"pipe", 0, 2, []byte("k2"), []byte{0xff, 0xfe, '<', '>'}},
		{"pipe", 1, 3, nil, []byte(`{"amount": 3}`)},
		{"other", 0, 4, []byte("k4"), []byte(`{"amount": 4}`)},
	} {
		var id int64
		if err := b.db.QueryRow(ctx, "INSERT INTO "+dl+` (pipeline, topic, partition, "offset", key, value, header_keys, header_values, "timestamp", error)
			VALUES ($1, $2, $3, $4, $5, $6, ARRAY['h'::bytea, '\xff'::bytea], ARRAY['v'::bytea, NULL], now(), 'bad record') RETURNING id`,
			row.pipeline, b.topic, row.partition, row.offset, row.key, row.value).Scan(&id); err != nil {
			t.Fatal(err)
		}
		b.dead = append(b.dead, id)
	}
	b.payload = b.schema + ".payments"
	b.exec(t, "CREATE TABLE "+pgx.Identifier{b.schema, "payments"}.Sanitize()+" (k text, amount integer NOT NULL)")
	pl, err := table.New(table.Config{Table: b.payload, Columns: map[string]table.Column{
		"k": {From: "key"}, "amount": {From: "value.amount", Required: true}}})
	if err != nil {
		t.Fatal(err)
	}
	b.tokens = filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(b.tokens, []byte("# operators\n"+aliceToken+" "+alice+"\n\n"+bobToken+"\tbob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := console.LoadTokens(b.tokens)
	if err != nil {
		t.Fatal(err)
	}
	b.admin = admin.New(b.db, b.schema, kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	cfg := console.Config{Admin: b.admin, Pipeline: "pipe", Plugin: pl, Mutations: true, Tokens: tokens,
		Logger: slog.New(slog.NewTextHandler(b.logs, nil))}
	if adjust != nil {
		adjust(b, &cfg)
	}
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = httptest.NewServer(h)
	t.Cleanup(b.srv.Close)
	return b
}

func (b *bed) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// response is a request's outcome.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode decodes the body into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorBody decodes an error response.
func (r response) errorBody(t *testing.T) console.ErrorBody {
	t.Helper()
	var e console.ErrorBody
	r.decode(t, &e)
	return e
}

// req sends a request. headers are name, value pairs; a POST gets the token of alice and the
// CSRF header unless headers set them ("" removes one).
func (b *bed) req(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rq, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Authorization", "Bearer "+aliceToken)
	if method == http.MethodPost {
		rq.Header.Set(console.CSRFHeader, "1")
	}
	if body != "" {
		rq.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			rq.Header.Del(headers[i])
		} else {
			rq.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// must sends a request that must answer status, and returns the response.
func (b *bed) must(t *testing.T, status int, method, path, body string, headers ...string) response {
	t.Helper()
	r := b.req(t, method, path, body, headers...)
	if r.status != status {
		t.Fatalf("%s %s %s: status %d, want %d: %s\nthe console's log:\n%s", method, path, body, r.status, status, r.body, b.logs.String())
	}
	return r
}
