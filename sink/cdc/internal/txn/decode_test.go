package txn

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const endSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},` +
	`{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},` +
	`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},` +
	`{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},` +
	`"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],` +
	`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`

const endPayload = `{"status":"END","id":"756:39747704","event_count":3,"data_collections":[` +
	`{"data_collection":"public.accounts","event_count":2},{"data_collection":"public.lines","event_count":1}],"ts_ms":1796190673477}`

var wantEnd = Marker{Status: End, ID: ID{756, 39747704}, TsMs: 1796190673477, EventCount: 3,
	Collections: []Collection{{"public.accounts", 2}, {"public.lines", 1}}}

func TestDecodeMarkerForms(t *testing.T) {
	for name, data := range map[string]string{
		"with schemas":    `{"schema":` + endSchema + `,"payload":` + endPayload + `}`,
		"without schemas": endPayload,
	} {
		m, err := DecodeMarkerJSON([]byte(data))
		if err != nil || !reflect.DeepEqual(m, wantEnd) {
			t.Errorf("%s: %+v, %v; want %+v", name, m, err, wantEnd)
		}
	}
	// The Avro form, as sink/internal/schemaformat decodes it: longs as int64, the
	// optional fields' unions unwrapped.
	avro := map[string]any{"status": "END", "id": "756:39747704", "event_count": int64(3), "ts_ms": int64(1796190673477),
		"data_collections": []any{
			map[string]any{"data_collection": "public.accounts", "event_count": int64(2)},
			map[string]any{"data_collection": "public.lines", "event_count": int64(1)},
		}}
	if m, err := DecodeMarker(avro); err != nil || !reflect.DeepEqual(m, wantEnd) {
		t.Errorf("avro: %+v, %v", m, err)
	}
	b, err := DecodeMarker(map[string]any{"status": "BEGIN", "id": "756:39747240", "event_count": nil,
		"data_collections": nil, "ts_ms": int64(5)})
	if err != nil || !reflect.DeepEqual(b, Marker{Status: Begin, ID: ID{756, 39747240}, TsMs: 5}) {
		t.Errorf("avro BEGIN: %+v, %v", b, err)
	}
	e, err := DecodeMarkerJSON([]byte(`{"status":"END","id":"1:2","event_count":0,"data_collections":[],"ts_ms":1}`))
	if err != nil || e.EventCount != 0 || len(e.Collections) != 0 {
		t.Errorf("an empty transaction's END: %+v, %v", e, err)
	}
}

func TestDecodeMarkerHostile(t *testing.T) {
	long := strings.Repeat("9", MaxIDLen+1)
	for _, tc := range []struct{ data, field string }{
		{`[]`, "record"},
		{`"END"`, "record"},
		{`{"status":"end","id":"1:2","ts_ms":1}`, "status"},
		{`{"status":7,"id":"1:2","ts_ms":1}`, "status"},
		{`{"id":"1:2","ts_ms":1}`, "status"},
		{`{"status":"BEGIN","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":12,"ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"` + long + `","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"abc","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"1:-2","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"-1:2","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"1:99999999999999999999","ts_ms":1}`, "id"},
		{`{"status":"BEGIN","id":"1:2"}`, "ts_ms"},
		{`{"status":"BEGIN","id":"1:2","ts_ms":"now"}`, "ts_ms"},
		{`{"status":"BEGIN","id":"1:2","ts_ms":1.5}`, "ts_ms"},
		{`{"status":"BEGIN","id":"1:2","ts_ms":1,"event_count":3}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"data_collections":[]}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":-1,"data_collections":[]}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1e300,"data_collections":[]}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1099511627777,"data_collections":[]}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":"3","data_collections":[]}`, "event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1}`, "data_collections"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":{}}`, "data_collections"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":[7]}`, "data_collections[0]"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":[{"event_count":1}]}`, "data_collections[0].data_collection"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":[{"data_collection":"","event_count":1}]}`, "data_collections[0].data_collection"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":[{"data_collection":"a"}]}`, "data_collections[0].event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":0,"data_collections":[{"data_collection":"a","event_count":0}]}`, "data_collections[0].event_count"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":2,"data_collections":[{"data_collection":"a","event_count":1},{"data_collection":"a","event_count":1}]}`, "data_collections[1].data_collection"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":5,"data_collections":[{"data_collection":"a","event_count":2}]}`, "data_collections"},
		{`{"status":"END","id":"1:2","ts_ms":1,"event_count":1,"data_collections":[{"data_collection":"a","event_count":-1}]}`, "data_collections[0].event_count"},
		{`{"status":"BEGIN"`, "record"},
		{`{"status":"BEGIN","id":"1:2","ts_ms":1} {}`, "record"},
	} {
		_, err := DecodeMarkerJSON([]byte(tc.data))
		var de *DecodeError
		if !errors.Is(err, ErrMalformed) || !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%s: %v, want a *DecodeError of field %s", tc.data, err, tc.field)
		}
	}
}

func TestDecodeChange(t *testing.T) {
	src := `"source":{"schema":"public","table":"lines","sequence":"[\"39747704\",\"39747704\"]","lsn":39747704}`
	m, err := DecodeChangeJSON([]byte(`{"op":"d",` + src + `,"transaction":{"id":"757:39747704","total_order":1,"data_collection_order":1}}`))
	want := Meta{Op: "d", Collection: "public.lines", Txn: true, ID: ID{757, 39747704}, TotalOrder: 1, CollectionOrder: 1, PrevCommit: 39747704}
	if err != nil || m != want {
		t.Errorf("%+v, %v; want %+v", m, err, want)
	}
	// The Avro form: int64 orders.
	m, err = DecodeChange(map[string]any{"op": "u", "source": map[string]any{"schema": "public", "table": "a", "sequence": `[null,"5"]`},
		"transaction": map[string]any{"id": "9:5", "total_order": int64(2), "data_collection_order": int64(1)}})
	if err != nil || m.TotalOrder != 2 || m.PrevCommit != 0 || !m.Txn {
		t.Errorf("avro: %+v, %v", m, err)
	}
	// A snapshot read has no transaction; a tombstone neither.
	if m, err := DecodeChangeJSON([]byte(`{"op":"r",` + src + `,"transaction":null}`)); err != nil || m.Txn || m.Op != "r" {
		t.Errorf("snapshot read: %+v, %v", m, err)
	}
	if m, err := DecodeChangeJSON(nil); err != nil || m != (Meta{}) {
		t.Errorf("tombstone: %+v, %v", m, err)
	}
	// A streamed change without a block: the connector's setting is named.
	for _, data := range []string{`{"op":"u",` + src + `}`, `{"op":"c",` + src + `,"transaction":null}`} {
		_, err := DecodeChangeJSON([]byte(data))
		if !errors.Is(err, ErrNoMetadata) || !strings.Contains(err.Error(), "provide.transaction.metadata=true") {
			t.Errorf("%s: %v, want ErrNoMetadata naming provide.transaction.metadata", data, err)
		}
	}
	for _, tc := range []struct{ block, field string }{
		{`"x"`, "transaction"},
		{`{"total_order":1,"data_collection_order":1}`, "transaction.id"},
		{`{"id":"1:2:3","total_order":1,"data_collection_order":1}`, "transaction.id"},
		{`{"id":"1:2","data_collection_order":1}`, "transaction.total_order"},
		{`{"id":"1:2","total_order":0,"data_collection_order":1}`, "transaction.total_order"},
		{`{"id":"1:2","total_order":-4,"data_collection_order":1}`, "transaction.total_order"},
		{`{"id":"1:2","total_order":"1","data_collection_order":1}`, "transaction.total_order"},
		{`{"id":"1:2","total_order":92233720368547758070,"data_collection_order":1}`, "transaction.total_order"},
		{`{"id":"1:2","total_order":1,"data_collection_order":2}`, "transaction.data_collection_order"},
		{`{"id":"1:2","total_order":1,"data_collection_order":true}`, "transaction.data_collection_order"},
	} {
		_, err := DecodeChangeJSON([]byte(`{"op":"u",` + src + `,"transaction":` + tc.block + `}`))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%s: %v, want a *DecodeError of field %s", tc.block, err, tc.field)
		}
	}
	for _, tc := range []struct{ data, field string }{
		{`{"source":{}}`, "op"},
		{`{"op":"u"}`, "source"},
		{`{"op":"u","source":{"table":"a"}}`, "source.schema"},
		{`{"op":"u","source":{"schema":"p"}}`, "source.table"},
		{`{"op":"u","source":{"schema":"p","table":"a"},"transaction":{"id":"1:2","total_order":1,"data_collection_order":1}}`, "source.sequence"},
		{`{"op":"u","source":{"schema":"p","table":"a","sequence":"[1]"},"transaction":{"id":"1:2","total_order":1,"data_collection_order":1}}`, "source.sequence"},
		{`{"op":"u","source":{"schema":"p","table":"a","sequence":"[\"x\",\"1\"]"},"transaction":{"id":"1:2","total_order":1,"data_collection_order":1}}`, "source.sequence"},
	} {
		_, err := DecodeChangeJSON([]byte(tc.data))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%s: %v, want a *DecodeError of field %s", tc.data, err, tc.field)
		}
	}
}

// FuzzDecode: any bytes give a value or a typed error, never a panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(endPayload))
	f.Add([]byte(`{"schema":` + endSchema + `,"payload":` + endPayload + `}`))
	f.Add([]byte(`{"status":"BEGIN","id":"756:39747240","event_count":null,"data_collections":null,"ts_ms":1}`))
	f.Add([]byte(`{"op":"u","source":{"schema":"public","table":"a","sequence":"[null,\"5\"]"},"transaction":{"id":"9:5","total_order":2,"data_collection_order":1}}`))
	f.Add([]byte(`{"op":"r","source":{"schema":"public","table":"a"},"transaction":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMarkerJSON(data)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("marker: untyped error %v", err)
		}
		if err == nil && m.Status == End {
			var sum int64
			for _, c := range m.Collections {
				sum += c.EventCount
			}
			if sum != m.EventCount || m.EventCount > MaxEventCount {
				t.Fatalf("marker %+v: counts", m)
			}
		}
		mt, err := DecodeChangeJSON(data)
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoMetadata) {
			t.Fatalf("change: untyped error %v", err)
		}
		if err == nil && mt.Txn && (mt.TotalOrder < 1 || mt.CollectionOrder < 1 || mt.CollectionOrder > mt.TotalOrder) {
			t.Fatalf("change %+v: orders", mt)
		}
		// Whatever decodes goes through an assembler without a panic.
		a := New(Config{MaxEvents: 8, MaxBytes: 1 << 10})
		if err == nil && mt.Txn {
			_ = a.Change(Change{At: Position{"t", 0, 0}, Meta: mt, Size: int64(len(data))})
		}
		if m.Status != 0 {
			_ = a.Marker(m, Position{txTopic, 0, 0})
		}
		a.Next()
	})
}
