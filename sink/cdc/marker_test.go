package cdc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/eosink/eosink/sink/cdc/internal/txn"
)

// TestDecodeMarkerJSON: decodeMarkerJSON gives what txn.DecodeMarkerJSON gives, marker or
// error, for the connector's markers (the fixtures, each twice: the second time its schema
// is the last seen), the payload alone, and malformed records.
func TestDecodeMarkerJSON(t *testing.T) {
	files, err := filepath.Glob("internal/txn/testdata/debezium/marker-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	var cases []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, string(data), string(data))
	}
	cases = append(cases,
		`{"status":"BEGIN","id":"571:33","event_count":null,"data_collections":null,"ts_ms":1}`,
		`{"status":"END","id":"571:33","event_count":2,"data_collections":[{"data_collection":"public.a","event_count":2}],"ts_ms":1}`,
		`{"schema":{"type":"struct","fields":[]},"payload":{"status":"BEGIN","id":"1:2","ts_ms":1}}`,
		`{"schema":{"type":"struct","fields":[]},"payload":{"status":"BEGIN","id":"1:2","ts_ms":1},"x":1}`,
		`{"schema":7,"payload":{"status":"BEGIN","id":"1:2","ts_ms":1}}`,
		`{"status":"END","id":"1:2","ts_ms":1,"event_count":5,"data_collections":[{"data_collection":"a","event_count":2}]}`,
		`{"status":"SOMETIMES","id":"1:2","ts_ms":1}`,
		`{"status":"BEGIN"`,
		`{"status":"BEGIN","id":"1:2","ts_ms":1} {}`,
		`null`, `[]`, `"x"`,
	)
	for _, c := range cases {
		want, wantErr := txn.DecodeMarkerJSON([]byte(c))
		got, err := decodeMarkerJSON([]byte(c))
		if fmt.Sprintf("%+v %v", got, err) != fmt.Sprintf("%+v %v", want, wantErr) {
			t.Errorf("%.200s:\n got %+v %v\nwant %+v %v", c, got, err, want, wantErr)
		}
	}
}
