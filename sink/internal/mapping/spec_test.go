package mapping

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlSpec decodes a Spec as the plugins' column and parameter types do.
type yamlSpec struct{ s Spec }

func (y *yamlSpec) UnmarshalYAML(unmarshal func(any) error) error {
	y.s = DecodeSpec(unmarshal, "a parameter")
	return nil
}

func str(s string) *string { return &s }

// TestDecodeSpec: both forms, every key, and each refusal kept as a problem of its key.
func TestDecodeSpec(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Spec
	}{
		{`value.at`, Spec{From: "value.at"}},
		{`{from: value.at, required: true, cast: rfc3339}`, Spec{From: "value.at", Required: true, Cast: "rfc3339"}},
		{`{from: value.region, default: eu}`, Spec{From: "value.region", Default: str("eu")}},
		{`{from: value.n, default: 0}`, Spec{From: "value.n", Default: str("0")}},
		{`{from: value.b, default: false}`, Spec{From: "value.b", Default: str("false")}},
		{`{from: 1}`, Spec{Problems: []Problem{{"from", "want a source expression"}}}},
		{`{from: key, required: yes please}`, Spec{From: "key", Problems: []Problem{{"required", "want true or false"}}}},
		{`{from: key, cast: [rfc3339]}`, Spec{From: "key", Problems: []Problem{{"cast", "want one of " + castSyntax}}}},
		{`{from: key, default: null}`, Spec{From: "key", Problems: []Problem{{"default", "null is no default (a missing value is NULL without one); leave it out"}}}},
		{`{from: key, default: {a: 1}}`, Spec{From: "key", Problems: []Problem{{"default", "want a scalar, the value in its text form"}}}},
		{`{from: key, cast: rfc3339, colour: red, castt: x}`, Spec{From: "key", Cast: "rfc3339", Problems: []Problem{
			{"castt", "unknown key (a parameter has from, expr, required, cast, default); did you mean cast?"},
			{"colour", "unknown key (a parameter has from, expr, required, cast, default)"}}}},
		{`[value.at]`, Spec{Problems: []Problem{{"", "a parameter is " + specSyntax}}}},
	} {
		var y yamlSpec
		if err := yaml.Unmarshal([]byte(c.in), &y); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !reflect.DeepEqual(y.s, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, y.s, c.want)
		}
	}
}

// TestSpecColumn: a spec gives the Column its options say, the same for a table's column
// and an sql parameter, or every problem at its own path.
func TestSpecColumn(t *testing.T) {
	col, errs := Spec{From: "value.at", Cast: "rfc3339", Default: str("2023-11-14T22:13:20Z")}.Column("at", "params.at")
	if len(errs) != 0 {
		t.Fatalf("valid spec: %v", errs)
	}
	if col.Name != "at" || col.From.String() != "value.at" || col.Cast != CastRFC3339 || col.Required || *col.Default != "2023-11-14T22:13:20Z" {
		t.Fatalf("column %+v", col)
	}
	for _, c := range []struct {
		spec Spec
		want []string
	}{
		{Spec{From: "valu.at"}, []string{"params.at.from: "}},
		{Spec{From: "value.at", Cast: "timestamptz"}, []string{`params.at.cast: unknown cast "timestamptz" (want epoch_s, epoch_ms, epoch_us, rfc3339, base64 or json)`}},
		{Spec{From: "value.at", Required: true, Default: str("x")}, []string{"params.at.default: a default and required: true exclude each other"}},
		{Spec{From: "value.at", Cast: "rfc3339", Default: str("yesterday")}, []string{`params.at.default: cast rfc3339: "yesterday" is not an RFC 3339 timestamp`}},
		{Spec{From: "value.at", Cast: "epoch_ms", Default: str("\x00")}, []string{`params.at.default: cast epoch_ms: "\x00" is not a number`}},
		{Spec{From: "value.at", Default: str("a\x00b")}, []string{"params.at.default: "}},
		// What DecodeSpec refused is reported once, at its key, and not checked again.
		{Spec{Problems: []Problem{{"from", "want a source expression"}, {"cast", "want one of x"}}, Cast: "bogus"},
			[]string{"params.at.from: want a source expression", "params.at.cast: want one of x"}},
		{Spec{Problems: []Problem{{"", "a parameter is ..."}}}, []string{"params.at: a parameter is ..."}},
		// Several problems: all of them.
		{Spec{From: "valu.at", Cast: "bogus"}, []string{"params.at.from: ", "params.at.cast: unknown cast"}},
	} {
		_, errs := c.spec.Column("at", "params.at")
		if len(errs) != len(c.want) {
			t.Errorf("%+v: %d problems %v, want %d", c.spec, len(errs), errs, len(c.want))
			continue
		}
		for i, e := range errs {
			if !strings.HasPrefix(e.Error(), c.want[i]) || e.Field+": "+e.Reason != e.Error() {
				t.Errorf("%+v: problem %d is %q (field %q), want it to start with %q", c.spec, i, e, e.Field, c.want[i])
			}
		}
	}
}
