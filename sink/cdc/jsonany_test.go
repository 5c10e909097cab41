package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// referenceDecode is what decodeNumbers did before decodeAny: encoding/json's Decoder with
// UseNumber, and nothing but white space after the value.
func referenceDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

var decodeAnySeeds = []string{
	`{"before":null,"after":{"id":7,"mts":1796081150152718,"zts":"2026-11-30T12:34:56.123456Z","vs":{"scale":2,"value":"/4U="}},"op":"c"}`,
	`{"a":1,"a":2}`, `[]`, `{}`, ` [1, -0, 0.5, -1.25e+10, 3E-2, 1e5] `, `"x"`, `true`, `false`, `null`,
	`"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"\ud800\ud800"`,
	"\"\xff\xfe\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", `"\u12"`, `"\x"`, "\"\x01\"",
	`01`, `-`, `1.`, `1e`, `.5`, `+1`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `[1 2]`, `nul`, `tru`,
	`{"a":1}}`, `{"a":1} x`, `1 2`, ``, ` `, `[[[[]]]]`, `{"a":[{"b":{"c":[null,true,"d"]}}]}`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
}

func TestDecodeAnyMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeAnySeeds {
		checkDecodeAny(t, []byte(s))
	}
}

func FuzzDecodeAny(f *testing.F) {
	for _, s := range decodeAnySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecodeAny)
}

func checkDecodeAny(t *testing.T, data []byte) {
	want, werr := referenceDecode(data)
	got, gerr := decodeNumbers(data)
	switch {
	case werr != nil && gerr == nil:
		t.Fatalf("%q: encoding/json fails (%v), decodeAny gives %#v", data, werr, got)
	case werr == nil && gerr != nil:
		t.Fatalf("%q: encoding/json gives %#v, decodeAny fails: %v", data, want, gerr)
	case werr == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("%q: decodeAny gives %#v, encoding/json %#v", data, got, want)
	}
}
