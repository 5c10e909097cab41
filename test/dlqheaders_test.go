package test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
	"unicode/utf8"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/internal/migrator"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/migrations"
	"github.com/eosink/eosink/sink"
)

// headerPlugin records each record's headers in <schema>.seen; until fixed, a record whose
// value is "poison" is refused with an error that quotes its first header key raw (not
// UTF-8) and holds a NUL.
type headerPlugin struct {
	table string
	fixed atomic.Bool
}

func (*headerPlugin) Open(context.Context, sink.Partition) error  { return nil }
func (*headerPlugin) Close(context.Context, sink.Partition) error { return nil }
func (hp *headerPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	for i := range b.Records {
		r := &b.Records[i]
		if string(r.Value) == "poison" && !hp.fixed.Load() {
			return sink.Poison(r, fmt.Errorf("refused header %s, a NUL \x00 here", r.Headers[0].Key))
		}
		keys, vals := [][]byte{}, [][]byte{}
		for _, h := range r.Headers {
			keys, vals = append(keys, []byte(h.Key)), append(vals, h.Value)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+hp.table+" (k, header_keys, header_values) VALUES ($1, $2, $3)", string(r.Key), keys, vals); err != nil {
			return err
		}
	}
	return nil
}

func newHeaderPlugin(t *testing.T, p *pipeline) *headerPlugin {
	hp := &headerPlugin{table: pgx.Identifier{p.Schema, "seen"}.Sanitize()}
	if _, err := testbed.Pool(t, p.Env).Exec(context.Background(), "CREATE TABLE "+hp.table+" (k text NOT NULL, header_keys bytea[] NOT NULL, header_values bytea[] NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return hp
}

// seenHeaders returns the headers the plugin recorded for key k.
func (hp *headerPlugin) seenHeaders(t *testing.T, db sink.DB, k string) []sink.Header {
	t.Helper()
	var keys, vals [][]byte
	if err := db.QueryRow(context.Background(), "SELECT header_keys, header_values FROM "+hp.table+" WHERE k = $1", k).Scan(&keys, &vals); err != nil {
		t.Fatalf("record %s as applied: %v", k, err)
	}
	var hs []sink.Header
	for i := range keys {
		hs = append(hs, sink.Header{Key: string(keys[i]), Value: vals[i]})
	}
	return hs
}

func sameHeaders(a, b []sink.Header) bool {
	return slices.EqualFunc(a, b, func(x, y sink.Header) bool { return x.Key == y.Key && string(x.Value) == string(y.Value) })
}

// checkDeadLetterText checks that a dead letter's error is valid UTF-8 without NUL, with the
// bad bytes visibly escaped.
func checkDeadLetterText(t *testing.T, d admin.DeadLetter) {
	t.Helper()
	if !utf8.ValidString(d.Error) || strings.ContainsRune(d.Error, 0) || !strings.Contains(d.Error, `\xff`) || !strings.Contains(d.Error, `\x00`) {
		t.Errorf("dead letter error %q: want valid UTF-8 with the bad bytes escaped as \\xff and \\x00", d.Error)
	}
}

// TestDeadLetterNonUTF8HeaderKey: under the dead-letter policy, a poison record whose header
// key is not UTF-8 (and whose error quotes it and holds a NUL) is dead-lettered once instead
// of stopping the partition; `dlq show` returns its headers byte for byte, and a replay gives
// the plugin identical headers.
func TestDeadLetterNonUTF8HeaderKey(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	hp := newHeaderPlugin(t, p)
	bad := []kafka.Header{{Key: "\xff\xfe-key", Value: []byte("v1")}, {Key: "plain", Value: []byte{0, 1, 0xff}}, {Key: "caf\xe9", Value: []byte("latin-1")}}
	msgs := []testbed.Msg{
		{Key: []byte("g0"), Value: []byte("good"), Headers: []kafka.Header{{Key: "\xc3\x28", Value: []byte("x")}}},
		{Key: []byte("bad"), Value: []byte("poison"), Headers: bad},
		{Key: []byte("g2"), Value: []byte("good")},
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	r := startSink(t, pluginConfig(t, p, hp, sink.DeadLetter))
	testbed.Eventually(t, 60*time.Second, "the partition to reach its log end", func() (bool, string) {
		n, _ := p.storedOrZero(t, 0)
		return n == 3, fmt.Sprintf("%d/3 %v", n, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	want := []sink.Header{}
	for _, h := range bad {
		want = append(want, sink.Header{Key: h.Key, Value: h.Value})
	}
	c := p.admin(db)
	f := admin.DeadLetterFilter{Pipeline: p.Group}
	list, err := c.DeadLetters(ctx, f)
	if err != nil || len(list) != 1 || list[0].Offset != 1 || list[0].Failures != 1 {
		t.Fatalf("dead letters %+v (%v): want the poison record at offset 1, once", list, err)
	}
	checkDeadLetterText(t, list[0])
	d, err := c.ShowDeadLetter(ctx, list[0].ID)
	if err != nil || !sameHeaders(d.Record.Headers, want) {
		t.Fatalf("dead letter headers %q (%v), want %q", d.Record.Headers, err, want)
	}
	// eosink dlq show: keys that are not UTF-8 in base64, the output valid UTF-8.
	for _, asJSON := range []bool{false, true} {
		args := []string{"dlq", "show", "-database-url", p.Env.DatabaseURL, "-schema", p.OffsetsSchema, "-id", fmt.Sprint(d.ID)}
		if asJSON {
			args = append(args, "-json")
		}
		out, _ := run(t, nil, false, eosinkBin, args...)
		prefix := "base64:" // -json: key_base64 holds every key in base64, without a prefix
		if asJSON {
			prefix = `"key_base64": "`
		}
		if !utf8.ValidString(out) || !strings.Contains(out, prefix+base64.StdEncoding.EncodeToString([]byte("\xff\xfe-key"))) ||
			!strings.Contains(out, prefix+base64.StdEncoding.EncodeToString([]byte("caf\xe9"))) || !strings.Contains(out, "plain") {
			t.Errorf("eosink %s: want the header keys, those not UTF-8 in base64:\n%s", strings.Join(args, " "), out)
		}
	}
	if got := hp.seenHeaders(t, db, "g0"); got[0].Key != "\xc3\x28" {
		t.Fatalf("good record's header key %q", got[0].Key)
	}
	hp.fixed.Store(true)
	res, err := c.Replay(ctx, f, hp, nil)
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if got := hp.seenHeaders(t, db, "bad"); !sameHeaders(got, want) {
		t.Fatalf("replayed headers %q, want %q", got, want)
	}
}

// TestDeadLetterHeaderKeyWithNUL: a header key holding a NUL (which librdkafka's C strings
// cannot carry, but the Kafka protocol can) is stored and replayed whole, not cut. The record
// goes through the engine's write step (engine.WriteBatch) directly.
func TestDeadLetterHeaderKeyWithNUL(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	if err := sink.Migrate(ctx, p.Env.DatabaseURL, p.OffsetsSchema); err != nil {
		t.Fatal(err)
	}
	hp := newHeaderPlugin(t, p)
	hs := []sink.Header{{Key: "\xff", Value: []byte{}}, {Key: "a\x00b", Value: []byte("nul in the key")}, {Key: "\x00", Value: nil}}
	rec := sink.Record{Topic: p.Topic, Offset: 7, Key: []byte("bad"), Value: []byte("poison"), Headers: hs, Timestamp: time.UnixMilli(1700000000000)}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err := engine.WriteBatch(ctx, tx, hp, sink.Batch{Topic: p.Topic, Records: []sink.Record{rec}},
			engine.WriteOptions{Isolate: true, Schema: p.OffsetsSchema, Pipeline: p.Group})
		if err == nil && len(res.DeadLettered) != 1 {
			err = errors.New("not dead-lettered")
		}
		return err
	})
	if err != nil {
		t.Fatalf("dead-letter a record with a NUL in a header key: %v", err)
	}
	c := p.admin(db)
	f := admin.DeadLetterFilter{Pipeline: p.Group}
	list, err := c.DeadLetters(ctx, f)
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters %+v (%v)", list, err)
	}
	checkDeadLetterText(t, list[0])
	d, err := c.ShowDeadLetter(ctx, list[0].ID)
	if err != nil || !sameHeaders(d.Record.Headers, hs) {
		t.Fatalf("dead letter headers %q (%v), want %q", d.Record.Headers, err, hs)
	}
	hp.fixed.Store(true)
	if res, err := c.Replay(ctx, f, hp, nil); err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if got := hp.seenHeaders(t, db, "bad"); !sameHeaders(got, hs) {
		t.Fatalf("replayed headers %q, want %q", got, hs)
	}
}

// TestDeadLetterHeaderKeysMigration: migration 5 turns header_keys from text[] into bytea[]
// keeping existing keys and their order; its down migration turns them back, and refuses (with
// nothing changed) while a key is not UTF-8.
func TestDeadLetterHeaderKeysMigration(t *testing.T) {
	t.Parallel()
	e := testbed.Require(t)
	ctx := context.Background()
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	upTo3 := fstest.MapFS{}
	for _, name := range []string{"0001_offsets", "0002_offsets_audit", "0003_dead_letters"} {
		for _, dir := range []string{".up.sql", ".down.sql"} {
			b, err := fs.ReadFile(migrations.FS, name+dir)
			if err != nil {
				t.Fatal(err)
			}
			upTo3[name+dir] = &fstest.MapFile{Data: b}
		}
	}
	m, err := migrator.Open(ctx, e.DatabaseURL, migrator.Set{FS: upTo3, Schema: schema, Table: migrations.Table})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	dl := pgx.Identifier{schema, "dead_letters"}.Sanitize()
	if _, err := db.Exec(ctx, "INSERT INTO "+dl+` (pipeline, topic, partition, "offset", header_keys, header_values, error) VALUES ('p', 't', 0, 1, '{b,café,a}', '{x,y,z}', 'e')`); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	if err := db.QueryRow(ctx, "SELECT header_keys FROM "+dl).Scan(&keys); err != nil || fmt.Sprintf("%q", keys) != `["b" "café" "a"]` {
		t.Fatalf("header keys after migration 5: %q (%v), want [b café a] as bytes", keys, err)
	}
	down, err := fs.ReadFile(migrations.FS, "0005_dead_letter_header_bytes.down.sql")
	if err != nil {
		t.Fatal(err)
	}
	runDown := func() error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, string(down))
			return err
		})
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+dl+` (pipeline, topic, partition, "offset", header_keys, error) VALUES ('p', 't', 0, 2, ARRAY['\xff'::bytea], 'e')`); err != nil {
		t.Fatal(err)
	}
	if err := runDown(); err == nil || !strings.Contains(err.Error(), "22021") {
		t.Fatalf("down migration with a key that is not UTF-8: %v, want SQLSTATE 22021", err)
	}
	if _, err := db.Exec(ctx, "DELETE FROM "+dl+` WHERE "offset" = 2`); err != nil {
		t.Fatal(err)
	}
	if err := runDown(); err != nil {
		t.Fatalf("down migration: %v", err)
	}
	var text []string
	if err := db.QueryRow(ctx, "SELECT header_keys::text[] AS after_down FROM "+dl).Scan(&text); err != nil || fmt.Sprint(text) != "[b café a]" {
		t.Fatalf("header keys after the down migration: %q (%v)", text, err)
	}
}
