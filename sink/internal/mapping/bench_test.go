package mapping

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
)

// benchValue is a typical ~150-byte event.
const benchValue = `{"id":"8f14e45f-ceea-467f-a0e6-2b5a3c9d1e7a","user":{"id":12345,"name":"Alice Example"},` +
	`"amount":129.95,"currency":"EUR","tags":["new","promo"],"ok":true}`

func benchMapping() *Mapping {
	return &Mapping{Columns: []Column{
		{Name: "id", From: MustParseSource("value.id"), Required: true},
		{Name: "user_id", From: MustParseSource("value.user.id")},
		{Name: "user_name", From: MustParseSource("value.user.name")},
		{Name: "amount", From: MustParseSource("value.amount")},
		{Name: "tags", From: MustParseSource("value.tags")},
	}}
}

func benchRecord() *sink.Record {
	return &sink.Record{Topic: "events", Partition: 1, Offset: 123456, Key: []byte("k-1"),
		Value: []byte(benchValue), Timestamp: time.UnixMilli(1700000000123)}
}

// BenchmarkRow maps one record with the package's scanner (impl=scanner) and, for
// comparison, does the same work with encoding/json (impl=encoding-json): decode into a map
// with numbers kept as literals, pick the fields, re-encode the array. Compare the two with
//
//	go test -run '^$' -bench 'BenchmarkRow$' -count 6 ./internal/mapping/ > row.txt
//	benchstat -col /impl row.txt
func BenchmarkRow(b *testing.B) {
	b.Run("impl=scanner", func(b *testing.B) {
		m, r := benchMapping(), benchRecord()
		var row []any
		b.SetBytes(int64(len(r.Value)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if row, err = m.Row(r, row); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=encoding-json", func(b *testing.B) {
		r := benchRecord()
		var row []any
		b.SetBytes(int64(len(r.Value)))
		b.ReportAllocs()
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(r.Value))
			d.UseNumber()
			var v map[string]any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
			user, _ := v["user"].(map[string]any)
			tags, err := json.Marshal(v["tags"])
			if err != nil {
				b.Fatal(err)
			}
			row = append(row[:0], v["id"].(string), user["id"].(json.Number).String(), user["name"].(string),
				v["amount"].(json.Number).String(), string(tags))
		}
	})
}

func BenchmarkAppendCopyRow(b *testing.B) {
	row, err := benchMapping().Row(benchRecord(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	bytea := make([]bool, len(row))
	buf, _ = AppendCopyRow(buf[:0], row, bytea)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = AppendCopyRow(buf[:0], row, bytea); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRowAndCopy is the per-record work of a COPY-based sink: Row, then
// AppendCopyRow into a batch buffer that is flushed every 1000 rows.
func BenchmarkRowAndCopy(b *testing.B) {
	m, r := benchMapping(), benchRecord()
	var row []any
	var buf []byte
	bytea := make([]bool, len(m.Columns))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var err error
		if row, err = m.Row(r, row); err != nil {
			b.Fatal(err)
		}
		if buf, err = AppendCopyRow(buf, row, bytea); err != nil {
			b.Fatal(err)
		}
		if n++; n == 1000 {
			buf, n = buf[:0], 0
		}
	}
}
