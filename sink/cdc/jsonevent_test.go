package cdc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var fastEventSeeds = []string{
	schemalessRead,
	`{"before":{"id":1,"v":"a"},"after":{"id":1,"v":"b","n":1.50,"z":[1,{"x":null}]},"source":{"schema":"public","table":"t","lsn":100,` +
		`"sequence":"[\"90\",\"100\"]","ts_ms":5,"db":"d","extra":{"deep":[true,false,"\u00e9"]}},"op":"u","ts_ms":6}`,
	`{"op":"d","before":{"id":2},"after":null,"source":{"schema":"s","table":"t","lsn":7},"transaction":{"id":"1:2","total_order":3,"data_collection_order":1}}`,
	`{"op":"c","op":"u","after":{"id":1},"after":{"id":2},"source":{"schema":"a","table":"b","lsn":1},"source":{"schema":"s","table":"t","lsn":2}}`,
	`{"op":"c","after":{},"source":{"schema":"s","table":"t","lsn":2,"lsn":3}}`,
	` {"op" : "c" , "after" : { "id" : -0 } , "source" : { "schema" : "s" , "table" : "t" , "lsn" : 2 } } `,
	`{"op":"c","after":"x","source":{"schema":"s","table":"t","lsn":2}}`,
	`{"op":1,"after":{"id":1},"source":{"schema":"s","table":"t","lsn":2}}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t"}}`,
	`{"op":"c","after":{"id":1},"source":[],"x":1}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"x":"\x"}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"x":"` + "\x01" + `"}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2,"v":"\u12"}}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2,"v":01}}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2}} x`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"ts":[1,]}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"ts":{"a" 1}}`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"ts":nul}`,
	`{}`, `[]`, `null`, `{"op":"c"`, `{"op":"c",`,
	`{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t","lsn":2},"deep":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	// An event with members named schema and payload besides: not the JsonConverter's envelope.
	`{"op":"c","schema":{"type":"struct"},"payload":{"op":"c"},"source":{"schema":"public","table":"t","lsn":7},"after":{"id":1}}`,
	`{"payload":1,"schema":2}`,
}

func TestFastEventMatchesMaps(t *testing.T) {
	for _, s := range fastEventSeeds {
		checkFastEvent(t, []byte(s))
	}
	// With schemas: the second record of a schema is split (lastSchema) and read in one pass.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(jsonEvent)); err != nil {
		t.Fatal(err)
	}
	all, err := decodeJSONValueAll(compact.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	payload, s, ok := lastValueSchema.split(compact.Bytes())
	if !ok {
		t.Fatal("the compact event's schema is not remembered after its first parse")
	}
	fast, ok := fastEvent(payload, s)
	if !ok {
		t.Fatal("fastEvent gave up on the JsonConverter's own compact event")
	}
	if d := eventDiff(fast, all); d != "" {
		t.Fatal(d)
	}
	n := 0
	for _, s := range fastEventSeeds[:6] {
		if _, ok := fastEvent([]byte(s), nil); ok {
			n++
		}
	}
	if n != 6 {
		t.Errorf("fastEvent took %d of the 6 well-formed seeds", n)
	}
}

// FuzzFastKey: where decodeJSONKey's one pass decodes a key, the general path decodes it to
// the same image and schema.
func FuzzFastKey(f *testing.F) {
	for _, s := range []string{`{"id":1}`, `{"id":-7,"region":"eu"}`, `null`, ` {"id" : 1.5e3 } `, `{"id":1,"id":2}`, `{}`, `[1]`, `{"id":1}x`,
		`{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"k.Key"},"payload":{"id":42}}`,
		`{"id":"\u00e9\ud800"}`, `{"a":{"b":[1,{"c":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, fs, ferr := decodeJSONKey(data)
		all, as, aerr := decodeJSONKeyAll(data)
		if (ferr == nil) != (aerr == nil) || (ferr != nil && ferr.Error() != aerr.Error()) {
			t.Fatalf("%q: errors %v and %v", data, ferr, aerr)
		}
		if !reflect.DeepEqual(fast, all) || fs != as {
			t.Fatalf("%q: one pass %v (schema %p), maps %v (schema %p)", data, fast, fs, all, as)
		}
	})
}

func FuzzFastEvent(f *testing.F) {
	for _, s := range fastEventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFastEvent)
}

// checkFastEvent: where fastEvent decodes data (a payload without schemas), the general
// path decodes it too, to the same event but for the source fields the plugin never reads.
func checkFastEvent(t *testing.T, data []byte) {
	if bytes.HasPrefix(data, []byte(schemaOpen)) {
		return // decodeJSONValue never gives fastEvent such a record whole
	}
	fast, ok := fastEvent(data, nil)
	all, err := decodeJSONValueAll(data)
	switch {
	case ok && err != nil:
		t.Fatalf("%q: fastEvent decodes it, the general path fails: %v", data, err)
	case ok:
		if d := eventDiff(fast, all); d != "" {
			t.Fatalf("%q: %s", data, d)
		}
	}
}

// eventDiff compares two events, their source maps on the fields the plugin reads only.
func eventDiff(fast, all *event) string {
	a, b := *fast, *all
	a.src, b.src = readSource(a.source()), readSource(b.source())
	if !reflect.DeepEqual(a, b) {
		return "one pass " + strings.ReplaceAll(sprintEvent(&a), "\n", " ") + "\nmaps " + strings.ReplaceAll(sprintEvent(&b), "\n", " ")
	}
	return ""
}

func readSource(src map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range src {
		if sourceField(k) >= 0 {
			out[k] = v
		}
	}
	return out
}

func sprintEvent(e *event) string {
	b, _ := json.Marshal(map[string]any{"op": e.op, "db": e.db, "schema": e.schema, "table": e.table, "commit": e.commit,
		"lsn": e.lsn, "ts": e.ts, "src": e.src, "tx": e.txBlock, "before": len(e.before), "after": len(e.after)})
	return string(b)
}

// TestSequencePair: what sequencePair reads, json.Unmarshal reads the same; what it does
// not, falls to json.Unmarshal.
func TestSequencePair(t *testing.T) {
	for _, seq := range []string{`["90","100"]`, `[null,"100"]`, `["0","0"]`, `[null,null]`, `["90", "100"]`, `["9a","1"]`, `[""," 1"]`,
		`["1","2","3"]`, `["1","2"`, `"1"`, `["1",2]`, `[null,"1"]x`, ``, `[`, `["`, `[null,""]`, `["\u0031","2"]`} {
		got, ok := sequencePair(seq)
		var want []*string
		werr := json.Unmarshal([]byte(seq), &want)
		if !ok {
			continue
		}
		if werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: sequencePair %v, json.Unmarshal %v (%v)", seq, got, want, werr)
		}
	}
	if _, ok := sequencePair(`["90","100"]`); !ok {
		t.Error("sequencePair does not read Debezium's own form")
	}
	if _, ok := sequencePair(`[null,"100"]`); !ok {
		t.Error("sequencePair does not read a first null")
	}
}
