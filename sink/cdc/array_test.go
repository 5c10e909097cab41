package cdc

import (
	"errors"
	"fmt"
	"testing"
)

// Arrays of JSON with and without schemas become PostgreSQL array literals, every text
// element quoted, nulls NULL, elements converted as their type's columns are.
func TestArrayLiteral(t *testing.T) {
	withSchema := `{"schema":{"type":"struct","fields":[{"type":"struct","field":"after","fields":[
 {"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},
 {"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"ns"},
 {"type":"array","items":{"type":"int64","name":"io.debezium.time.MicroTimestamp","optional":true},"optional":true,"field":"ts"},
 {"type":"array","items":{"type":"bytes","optional":true},"optional":true,"field":"bs"},
 {"type":"array","items":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}},"field":"ds"}]}]},
"payload":{"after":%s,"source":{"schema":"public","table":"t","lsn":5},"op":"c"}}`
	plain := `{"after":%s,"source":{"schema":"public","table":"t","lsn":5},"op":"c"}`
	after := `{"tags":["a,b","q\"uote",null,"back\\slash","ünï","","NULL","{br}"," sp "],"ns":[1,null,-3],
"ts":[1796081150152718],"bs":["AAH+/w=="],"ds":["AMg="]}`
	want := map[string][2]string{
		"tags": {"text[]", `{"a,b","q\"uote",NULL,"back\\slash","ünï","","NULL","{br}"," sp "}`},
		"ns":   {"integer[]", `{"1",NULL,"-3"}`},
		"ts":   {"timestamp without time zone[]", `{"2026-11-30T23:25:50.152718Z"}`},
		"bs":   {"bytea[]", `{"\\x0001feff"}`},
		"ds":   {"numeric(12,2)[]", `{"2.00"}`},
	}
	for _, form := range []string{withSchema, plain} {
		ev, err := decodeJSONValue([]byte(fmt.Sprintf(form, after)))
		if err != nil {
			t.Fatal(err)
		}
		for f, w := range want {
			v := ev.after[f].value()
			v.t.decimals = DecimalPrecise
			got, err := convert(v, w[0])
			if err != nil || got != w[1] {
				t.Errorf("%s as %s (schema %v): %v, %v; want %s", f, w[0], v.t.typed, got, err, w[1])
			}
		}
	}
	ev, err := decodeJSONValue([]byte(fmt.Sprintf(plain, `{"m":[[1,2],[3,4]]}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert(ev.after["m"].value(), "integer[]"); !errors.Is(err, errMultiDim) {
		t.Errorf("a nested array: %v, want errMultiDim", err)
	}
	if got, err := convert(ev.after["m"].value(), "jsonb"); err != nil || got != "[[1,2],[3,4]]" {
		t.Errorf("an array into jsonb: %v, %v", got, err)
	}
}
