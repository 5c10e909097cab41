package mapping

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eosink/eosink/sink"
)

var scanDocs = []string{
	// valid
	`0`, `-0`, `-1.5e+10`, `1E-2`, `123456789012345678901234567890`, `"x"`, `""`, `true`, `false`, `null`,
	` {} `, `[]`, "\t[ ]\r\n", `{"a":1}`, `{"a":[1,{"b":[]}],"c":{}}`, `[[[[[]]]]]`, `{"":""}`,
	`"\"\\\/\b\f\n\r\t\u0041\uD83D\uDE00\ud800"`, `{"a\u0000b":1}`, `"é"`, `[1,2,3]`, `{"a" : 1 , "b" : 2}`,
	// invalid
	``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{'a':1}`, `[1 2]`,
	`{"a":1 "b":2}`, `01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `--1`, `0x10`, `NaN`, `Infinity`, `tru`,
	`truex`, `nul`, `nulll`, `"abc`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\x00\"", `[1]]`,
	`{"a":1}}`, `[}`, `{]`, `"a" "b"`, `1 2`, `{"a":1}x`, "\xef\xbb\xbf{}", `[1,,2]`, `[,1]`, `{,}`,
	`"\`, `{"a":1,"a"`, "[\"\xff\"]", "{\"a\x01\":1}", `{"a`, `{"a\q":1}`, `[1`, `{"a":1`, `{"a"`,
}

// The scanner accepts exactly what encoding/json (plus a UTF-8 check) accepts.
func TestScanValidity(t *testing.T) {
	docs := append(scanDocs, deepJSON(maxDepth), deepJSON(maxDepth+1), strings.Repeat("[", 100000))
	for _, d := range docs {
		want := json.Valid([]byte(d)) && utf8.ValidString(d)
		_, err := Extract(&sink.Record{Value: []byte(d)}, MustParseSource("value"), JSON, JSON)
		if got := err == nil; got != want {
			t.Errorf("%.40q: valid %v (%v), encoding/json says %v", d, got, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%.40q: error %v is not ErrInvalidJSON", d, err)
		}
	}
}

// Paths find what encoding/json finds, in documents of every shape.
func TestScanPaths(t *testing.T) {
	docs := []string{
		doc, benchValue,
		`{"a":{"b":{"c":1}},"a":{"b":{"c":2}}}`,
		`{"a":[{"b":1},{"b":[10,20,{"c":"deep"}]}],"x":{"0":"zero","1":[true]}}`,
		`[{"a":1},[2,[3,{"a":"in"}]],"s"]`,
		`{"a":{}, "b":[], "c":{"d":null}, "e":"s", "f":{"g":{"h":{}}}}`,
		`{"k\u0065y":{"\u00e9":"accent"},"key":"second"}`,
	}
	paths := []string{"a", "b", "c", "e", "x", "key", "0", "1", "2", "00", "01", "a.b", "a.b.c", "a.0", "a.1",
		"a.1.b", "a.1.b.2", "a.1.b.2.c", "a.1.b.10", "x.0", "x.1.0", "1.1.1.a", "c.d", "c.d.e", "e.0",
		"f.g.h", "f.g.h.i", "key.é", "user.address.city", "items.1.qty", "tags.1", "id.x"}
	for _, d := range docs {
		r := &sink.Record{Value: []byte(d)}
		m := Mapping{}
		for _, p := range paths {
			m.Columns = append(m.Columns, Column{Name: p, From: MustParseSource("value." + p)})
		}
		row, err := m.Row(r, nil)
		if err != nil {
			t.Fatalf("%.40q: %v", d, err)
		}
		for i, p := range paths {
			want, err := stdLookup([]byte(d), strings.Split(m.Columns[i].From.arg, "\x00"))
			if err != nil {
				t.Fatal(err)
			}
			if !sameValue(row[i], anyOf(want)) {
				t.Errorf("%.40q: %s = %#v, encoding/json finds %#v", d, p, row[i], anyOf(want))
			}
		}
	}
}

// More than 64 path columns take several passes.
func TestScanManyColumns(t *testing.T) {
	var b strings.Builder
	m := Mapping{}
	b.WriteString("{")
	for i := range 150 {
		if i > 0 {
			b.WriteString(",")
		}
		name := "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		b.WriteString(`"` + name + `":` + `"v` + name + `"`)
		m.Columns = append(m.Columns, Column{Name: name, From: MustParseSource("value." + name), Required: true})
		if i%10 == 0 {
			m.Columns = append(m.Columns, Column{Name: "t" + name, From: MustParseSource("topic")})
		}
	}
	b.WriteString("}")
	row, err := m.Row(&sink.Record{Topic: "t", Value: []byte(b.String())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range m.Columns {
		want := "t"
		if c.From.Side() == "value" {
			want = "v" + c.Name
		}
		if row[i] != want {
			t.Fatalf("column %s = %#v, want %q", c.Name, row[i], want)
		}
	}
}

// special8 and control8 flag a word exactly when a byte of it is special.
func TestSWAR(t *testing.T) {
	naive := func(w string, special func(byte) bool) bool {
		for i := 0; i < len(w); i++ {
			if special(w[i]) {
				return true
			}
		}
		return false
	}
	isSpecial := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	isControl := func(c byte) bool { return c < 0x20 || c == '\\' }
	check := func(w string) {
		if got, want := special8(load8(w, 0)), naive(w, isSpecial); got != want {
			t.Fatalf("special8(%q) = %v", w, got)
		}
		if got, want := control8(load8(w, 0)), naive(w, isControl); got != want {
			t.Fatalf("control8(%q) = %v", w, got)
		}
	}
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 8; pos++ {
			for _, fill := range []byte{'a', 0x20, 0x21, 0x7f, 0x80, 0xff, 0x1f, 0} {
				w := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[pos] = byte(b)
				check(string(w))
			}
		}
	}
	// Pseudo-random words.
	x := uint64(0x9e3779b97f4a7c15)
	for range 1 << 16 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		for i := range w {
			w[i] = byte(x >> (8 * i))
		}
		check(string(w[:]))
	}
}

// A side whose path columns all sit in the first 64 columns is scanned once.
func TestScanWindows(t *testing.T) {
	m := Mapping{Columns: cols("k=key.id")}
	for i := range 70 {
		m.Columns = append(m.Columns, Column{Name: "t" + string(rune('A'+i)), From: MustParseSource("topic")})
	}
	m.Columns = append(m.Columns, Column{Name: "k2", From: MustParseSource("key.n")})
	row, err := m.Row(&sink.Record{Topic: "t", Key: []byte(`{"id":"x","n":2}`)}, nil)
	if err != nil || row[0] != "x" || row[1] != "t" || row[71] != "2" {
		t.Fatalf("Row = %q, %v", row, err)
	}
	m.Columns = m.Columns[:71]
	if row, err = m.Row(&sink.Record{Topic: "t", Key: []byte(`{"id":"x"}`)}, nil); err != nil || row[0] != "x" {
		t.Fatalf("Row = %q, %v", row, err)
	}
}
