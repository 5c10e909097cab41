package txn

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// TestDebeziumAvroFixtures decodes testdata/debezium-avro, written by Debezium 3.6.1 through
// Apicurio's Avro converter (capture_test.go's TestCaptureAvro), with the cdc plugin's own
// Avro decoder, sink/internal/schemaformat, against a stand-in registry serving the saved
// schemas: the markers and transaction blocks read as from the JsonConverter.
func TestDebeziumAvroFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "debezium-avro")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/schemas/ids/")
		b, err := os.ReadFile(filepath.Join(dir, "schema-"+id+".json"))
		if !ok || strings.ContainsAny(id, "./") || err != nil {
			http.Error(w, `{"error_code":40403,"message":"Schema not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	d, err := schemaformat.New(schemaformat.Config{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	value := func(name string) any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := d.Decode(schemaformat.Avro, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m.Value
	}
	b, err := DecodeMarker(value("marker-transaction-p0-o0.avro"))
	if err != nil || b.Status != Begin || b.ID.XID == 0 {
		t.Fatalf("BEGIN: %+v, %v", b, err)
	}
	e, err := DecodeMarker(value("marker-transaction-p0-o1.avro"))
	if err != nil || e.Status != End || e.ID.XID != b.ID.XID || e.EventCount != 3 ||
		!reflect.DeepEqual(e.Collections, []Collection{{"public.accounts", 2}, {"public.lines", 1}}) {
		t.Fatalf("END: %+v, %v", e, err)
	}
	a := New(Config{})
	if err := a.Marker(e, Position{"transaction", 0, 1}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"change-public.lines-p0-o0.avro", "change-public.accounts-p0-o0.avro", "change-public.accounts-p0-o1.avro"} {
		mt, err := DecodeChange(value(name))
		if err != nil || !mt.Txn || mt.ID.XID != e.ID.XID {
			t.Fatalf("%s: %+v, %v", name, mt, err)
		}
		topic := strings.Split(name, "-")[1]
		if err := a.Change(Change{At: Position{topic, 0, int64(max(i-1, 0))}, Meta: mt}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	tx, ok := a.Next()
	if !ok || len(tx.Changes) != 3 || tx.Commit != e.ID.LSN {
		t.Fatalf("not assembled: %+v, %v", tx, ok)
	}
	if got := describe(tx); !strings.HasSuffix(got, " [1 2 3] public.accounts/0@2,public.lines/0@1,transaction/0@2") {
		t.Errorf("assembled %s", got)
	}
}
