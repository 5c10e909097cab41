package plugin

import (
	"errors"
	"slices"
	"testing"

	"github.com/eosink/eosink/sink"
)

// opt decodes itself and lists its keys (KeyLister).
type opt struct{ From string }

func (*opt) ConfigKeys() []string { return []string{"from", "required"} }

func (o *opt) UnmarshalYAML(unmarshal func(any) error) error {
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		return err
	}
	o.From, _ = m["from"].(string)
	return nil
}

type base struct {
	Table string `yaml:"table"`
}

// TestDecodeNamesEveryUnknownKey: Decode reports each unknown key at its full path, in a
// struct, an inline struct, a list, a map and a KeyLister, with the keys taken and the key
// meant; it fills the value from the other keys.
func TestDecodeNamesEveryUnknownKey(t *testing.T) {
	var v struct {
		base   `yaml:",inline"`
		Routes []struct {
			Topic string `yaml:"topic"`
		} `yaml:"routes"`
		Params map[string]opt   `yaml:"params"`
		Free   map[string]any   `yaml:"free"`
		Ptr    *struct{ N int } `yaml:"ptr"`
	}
	err := Config{Path: "sink", Raw: map[string]any{
		"type": "x", "table": "t", "tabel": "u",
		"routes": []any{map[string]any{"topic": "a"}, map[string]any{"topik": "b"}},
		"params": map[string]any{"at": map[string]any{"from": "value.at", "cast": "json"}, "a.b": map[string]any{"requird": true}},
		"free":   map[string]any{"anything": map[string]any{"goes": 1}},
		"ptr":    map[string]any{"n": 1, "m": 2},
	}}.Decode(&v)
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *sink.ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%T %v, want a *sink.ConfigError", e, e)
		}
		got = append(got, ce.Field+": "+ce.Reason)
	}
	want := []string{
		"sink.params[a.b].requird: unknown key (sink.params[a.b] has from, required); did you mean required?",
		"sink.params.at.cast: unknown key (sink.params.at has from, required)",
		"sink.ptr.m: unknown key (sink.ptr has n); did you mean n?",
		"sink.routes[1].topik: unknown key (sink.routes[1] has topic); did you mean topic?",
		"sink.tabel: unknown key (sink has type, table, routes, params, free, ptr); did you mean table?",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Decode errors:\n%q\nwant:\n%q", got, want)
	}
	if v.Table != "t" || len(v.Routes) != 2 || v.Routes[0].Topic != "a" || v.Params["at"].From != "value.at" || v.Ptr == nil || v.Ptr.N != 1 {
		t.Fatalf("the known keys were not decoded: %+v", v)
	}
}
