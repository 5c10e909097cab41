package cdc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// Change events whose decimals ask for text of any size: a scale of -2^63 (which made
// strings.Repeat panic and killed the process), 3e8 (a 300 MB string), or an unscaled
// value past 64 KiB. Each is refused with an error that names the field, before its text
// is built, with and without schemas.
func TestHostileDecimals(t *testing.T) {
	big := base64.StdEncoding.EncodeToString(make([]byte, 65537))
	decimal := func(scale string) string {
		return `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"` + scale + `"},"field":"amount"}`
	}
	const varScale = `{"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}],"field":"amount"}`
	withSchema := func(field, amount string) string {
		return `{"schema":{"type":"struct","fields":[{"type":"struct","optional":true,"field":"after","fields":[` + field + `]},
{"type":"struct","field":"source","fields":[{"type":"string","field":"schema"},{"type":"string","field":"table"},{"type":"int64","field":"lsn"}]},
{"type":"string","field":"op"}]},"payload":{"after":{"amount":` + amount + `},"source":{"schema":"public","table":"t","lsn":1},"op":"c"}}`
	}
	plain := func(amount string) string {
		return `{"after":{"amount":` + amount + `},"source":{"schema":"public","table":"t","lsn":1},"op":"c"}`
	}
	for _, c := range []struct{ name, event, want string }{
		{"no schema, scale -2^63", plain(`{"scale":-9223372036854775808,"value":"AQ=="}`), "scale -9223372036854775808"},
		{"no schema, scale 3e8", plain(`{"scale":300000000,"value":"AQ=="}`), "scale 300000000"},
		{"no schema, scale -3e8", plain(`{"scale":-300000000,"value":"AQ=="}`), "scale -300000000"},
		{"no schema, 64 KiB + 1", plain(`{"scale":2,"value":"` + big + `"}`), "65537 bytes"},
		{"Decimal, scale -2^63", withSchema(decimal("-9223372036854775808"), `"AQ=="`), "scale -9223372036854775808"},
		{"Decimal, scale 3e8", withSchema(decimal("300000000"), `"AQ=="`), "scale 300000000"},
		{"Decimal, 64 KiB + 1", withSchema(decimal("2"), `"`+big+`"`), "65537 bytes"},
		{"VariableScaleDecimal, scale -2^31", withSchema(varScale, `{"scale":-2147483648,"value":"AQ=="}`), "scale -2147483648"},
		{"VariableScaleDecimal, scale 3e8", withSchema(varScale, `{"scale":300000000,"value":"AQ=="}`), "scale 300000000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, err := decodeJSONValue([]byte(c.event))
			if err != nil {
				t.Fatal(err)
			}
			tg := &target{name: `"replica"."t"`, cols: []string{"amount"}, types: []string{"numeric"}, colIdx: map[string]int{"amount": 0}}
			var a, b runtime.MemStats
			runtime.ReadMemStats(&a)
			_, _, err = tg.row(ev.after, false)
			runtime.ReadMemStats(&b)
			if !errors.Is(err, schemaformat.ErrMalformed) || !strings.Contains(err.Error(), `field "amount"`) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming the field and %q", err, c.want)
			}
			if alloc := b.TotalAlloc - a.TotalAlloc; alloc > 1<<20 {
				t.Errorf("allocated %d bytes before refusing", alloc)
			}
			t.Log(err)
		})
	}
	// At the bounds, values convert.
	for scale, want := range map[int]int{16383: 16385, -131072: 131073} {
		ev, err := decodeJSONValue([]byte(plain(fmt.Sprintf(`{"scale":%d,"value":"AQ=="}`, scale))))
		if err != nil {
			t.Fatal(err)
		}
		got, err := convert(ev.after["amount"].value(), "numeric")
		if s, _ := got.(string); err != nil || len(s) != want {
			t.Errorf("scale %d: %d characters, %v; want %d", scale, len(s), err, want)
		}
	}
}
