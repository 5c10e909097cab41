package mapping

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eosink/eosink/sink"
)

// decodeCopyText decodes COPY ... FROM STDIN text-format data the way PostgreSQL does
// (tab delimiter, \N for NULL), returning each row's fields, nil for NULL. It is stricter
// than PostgreSQL where AppendCopyRow never goes: it rejects a raw carriage return, the
// end-of-data marker \., a backslash at the end of a line, and an unterminated last line.
// Like the server, it rejects fields that decode to invalid UTF-8 or NUL.
func decodeCopyText(data []byte) ([][]*string, error) {
	var rows [][]*string
	for len(data) > 0 {
		var row []*string
		var field []byte
		rawStart := 0 // start of the field's raw text
		i := 0
		endField := func(rawEnd int) error {
			if string(data[rawStart:rawEnd]) == `\N` {
				row = append(row, nil)
			} else {
				if bytes.IndexByte(field, 0) >= 0 || !utf8.Valid(field) {
					return fmt.Errorf("field %q is not valid UTF-8 text", field)
				}
				s := string(field)
				row = append(row, &s)
			}
			field = field[:0]
			rawStart = rawEnd + 1
			return nil
		}
	line:
		for {
			if i == len(data) {
				return nil, errors.New("unterminated line")
			}
			c := data[i]
			switch c {
			case '\n':
				if err := endField(i); err != nil {
					return nil, err
				}
				i++
				break line
			case '\t':
				if err := endField(i); err != nil {
					return nil, err
				}
				i++
			case '\r':
				return nil, errors.New("literal carriage return found in data")
			case '\\':
				i++
				if i == len(data) || data[i] == '\n' {
					return nil, errors.New("backslash at the end of a line")
				}
				c = data[i]
				i++
				switch {
				case c == '.':
					return nil, errors.New("end-of-data marker in data")
				case c >= '0' && c <= '7':
					v := int(c - '0')
					for n := 0; n < 2 && i < len(data) && data[i] >= '0' && data[i] <= '7'; n++ {
						v = v*8 + int(data[i]-'0')
						i++
					}
					field = append(field, byte(v))
				case c == 'x' && i < len(data) && isHexDigit(data[i]):
					v := hexVal(data[i])
					i++
					if i < len(data) && isHexDigit(data[i]) {
						v = v*16 + hexVal(data[i])
						i++
					}
					field = append(field, byte(v))
				case c == 'b':
					field = append(field, '\b')
				case c == 'f':
					field = append(field, '\f')
				case c == 'n':
					field = append(field, '\n')
				case c == 'r':
					field = append(field, '\r')
				case c == 't':
					field = append(field, '\t')
				case c == 'v':
					field = append(field, '\v')
				default:
					field = append(field, c)
				}
			default:
				field = append(field, c)
				i++
			}
		}
		if len(row) == 1 && row[0] != nil && *row[0] == "" && i == 1 {
			row = []*string{} // an empty line is a row without columns
		}
		rows = append(rows, row)
		data = data[i:]
	}
	return rows, nil
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

// decodeByteaHex decodes bytea's hex input form, as decoded from COPY text: \x and hex.
func decodeByteaHex(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, `\x`)
	if !ok {
		return nil, fmt.Errorf("bytea %q lacks \\x", s)
	}
	return hex.DecodeString(h)
}

func FuzzAppendCopyRow(f *testing.F) {
	f.Add("plain", []byte("bytes"), "x", uint8(0))
	f.Add("a\tb\nc\rd\\e", []byte{0, 0xff}, `\N`, uint8(2))
	f.Add(`\.`, []byte(nil), "\x00", uint8(5))
	f.Add("é😀\x7f\x01", []byte("\xff"), "", uint8(7))
	f.Add("\xed\xa0\x80", []byte(`\\x`), "\\", uint8(0x1a))
	f.Fuzz(func(t *testing.T, a string, b []byte, c string, mask uint8) {
		row := []any{a, b, c, nil}
		bytea := []bool{mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0}
		if mask&16 != 0 {
			row[2] = []byte(c)
		}
		if mask&32 != 0 {
			row[1] = nil
		}
		textOK := func(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
		wantOK := (bytea[0] || textOK(a)) && (bytea[1] || textOK(string(b)) || row[1] == nil) && (bytea[2] || textOK(c))

		prev := []byte("prev\n")
		buf, err := AppendCopyRow(prev, row, bytea)
		if !wantOK {
			if !errors.Is(err, ErrInvalidText) || string(buf) != "prev\n" {
				t.Fatalf("AppendCopyRow(%q) = %q, %v; want ErrInvalidText and the buffer unchanged", row, buf, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("AppendCopyRow(%q): %v", row, err)
		}
		buf, err = AppendCopyRow(buf, row, bytea) // a second row
		if err != nil {
			t.Fatal(err)
		}
		rows, err := decodeCopyText(buf)
		if err != nil {
			t.Fatalf("decode %q: %v", buf, err)
		}
		if len(rows) != 3 || len(rows[0]) != 1 || *rows[0][0] != "prev" {
			t.Fatalf("decoded %q into %d rows", buf, len(rows))
		}
		for _, got := range rows[1:] {
			if len(got) != len(row) {
				t.Fatalf("decoded %d fields, want %d, from %q", len(got), len(row), buf)
			}
			for i, v := range row {
				var want []byte
				switch v := v.(type) {
				case string:
					want = []byte(v)
				case []byte:
					want = v
				}
				if v == nil || (want == nil && i == 1) {
					if got[i] != nil {
						t.Fatalf("field %d = %q, want NULL", i, *got[i])
					}
					continue
				}
				if got[i] == nil {
					t.Fatalf("field %d is NULL, want %q", i, want)
				}
				field := []byte(*got[i])
				if bytea[i] {
					if field, err = decodeByteaHex(*got[i]); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(field, want) {
					t.Fatalf("field %d = %q, want %q (encoded %q)", i, field, want, buf)
				}
			}
		}
	})
}

// fuzzColumns are the columns FuzzRow reads; their paths suit seeds with "a" and "id".
var fuzzColumns = []string{"key", "value", "key.id", "value.a", "value.a.b", "value.a.0", "value.0",
	"header.h", "topic", "partition", "offset", "timestamp"}

func FuzzRow(f *testing.F) {
	f.Add([]byte(`{"id":1}`), []byte(`{"a":{"b":"x\u0041"}}`), []byte("hv"), "a", uint8(0), int64(0))
	f.Add([]byte(`k`), []byte(`{"a":[1,2,{"c":null}],"a":2}`), []byte(nil), "a.2.c", uint8(3), int64(1))
	f.Add([]byte(nil), []byte(nil), []byte("\xff"), "a\\.b", uint8(0x40), int64(-1))
	f.Add([]byte(`[`), []byte(`"str"`), []byte("\x00"), "#", uint8(4), int64(1700000000123))
	f.Add([]byte(`{"id":"\u0000"}`), []byte(`{"a":"\ud800\udc00","b":1e400}`), []byte(""), "@this", uint8(0x80), int64(253402300800000))
	f.Add([]byte(`{}`), []byte(`[{"a":1}]`), []byte("x"), "0.a", uint8(8), int64(0))
	f.Add([]byte(`1`), []byte(` {"a" : true } `), []byte("x"), "a..", uint8(0), int64(0))
	for i, d := range append(scanDocs, doc, benchValue, `{"a":[{"b":1},{"b":[10,20,{"c":"deep"}]}],"x":{"0":"zero"}}`) {
		f.Add([]byte(d), []byte(d), []byte(d), []string{"a", "a.1.b.2.c", "x.0", "0", "a.b", "user.name"}[i%6], uint8(0), int64(i))
	}
	f.Fuzz(func(t *testing.T, key, value, hval []byte, path string, flags uint8, tsMillis int64) {
		r := &sink.Record{Topic: "t", Partition: 1, Offset: 2, Key: key, Value: value,
			Headers: []sink.Header{{Key: "h", Value: []byte("old")}, {Key: "h", Value: hval}}}
		if tsMillis != 0 {
			r.Timestamp = time.UnixMilli(tsMillis)
		}
		keyFmt, valFmt := Format(flags%3), Format(flags/3%3)
		if flags&0x40 != 0 {
			r.Key = nil
		}
		if flags&0x80 != 0 {
			r.Value = nil
		}
		exprs := append([]string(nil), fuzzColumns...)
		exprs = append(exprs, "value."+path, "key."+path, path, "header."+path)
		var all, valid []Column
		for i, e := range exprs {
			src, err := ParseSource(e)
			if err != nil {
				continue
			}
			c := Column{Name: fmt.Sprint("c", i), From: src, Required: flags&0x20 != 0 && i%2 == 0}
			all = append(all, c)
			if (src.kind != srcKeyPath || keyFmt == JSON) && (src.kind != srcValuePath || valFmt == JSON) {
				valid = append(valid, c)
			}
			// Extract never panics, and agrees with a one-column Row.
			v, xerr := Extract(r, src, keyFmt, valFmt)
			m1 := Mapping{Key: keyFmt, Value: valFmt, Columns: []Column{{Name: "x", From: src}}}
			row1, rerr := m1.Row(r, nil)
			if (xerr == nil) != (rerr == nil) || (xerr == nil && !sameValue(v, row1[0])) {
				t.Fatalf("%s: Extract = %#v, %v; Row = %#v, %v", e, v, xerr, row1, rerr)
			}
		}
		// A mapping that fails Validate must not make Row panic.
		bad := Mapping{Key: keyFmt, Value: valFmt, Columns: all}
		_, _ = bad.Row(r, nil)

		m := Mapping{Key: keyFmt, Value: valFmt, Columns: valid}
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		checkAppendCopy(t, &m, r)
		row, err := m.Row(r, make([]any, 3))
		if err == nil {
			checkRow(t, row, len(valid))
			// Each value is what the column alone gives: columns do not disturb each other.
			for i, c := range valid {
				v, err := Extract(r, c.From, keyFmt, valFmt)
				if err != nil || !sameValue(v, row[i]) {
					t.Fatalf("%s: Row gives %#v, Extract %#v, %v", c.From, row[i], v, err)
				}
			}
		} else {
			var fe *FieldError
			if !errors.As(err, &fe) || len(row) != 0 {
				t.Fatalf("Row error %#v with row %q", err, row)
			}
			if fe.Column != "" && (bytes.Contains([]byte(err.Error()), value) && len(value) > 8) {
				t.Fatalf("error %q shows the value", err)
			}
		}

		// The validity of JSON agrees with encoding/json (plus UTF-8, which it does not check).
		if value != nil && r.Value != nil {
			_, err := Extract(r, MustParseSource("value"), JSON, JSON)
			stdValid := json.Valid(value) && utf8.Valid(value)
			if errors.Is(err, ErrInvalidJSON) == stdValid {
				t.Fatalf("%q: Extract error %v, encoding/json valid %v", value, err, stdValid)
			}
			if stdValid {
				// Paths find what encoding/json finds.
				for _, e := range []string{"value.a", "value." + path} {
					src, err := ParseSource(e)
					if err != nil {
						continue
					}
					got, err := Extract(r, src, JSON, JSON)
					want, err2 := stdLookup(value, strings.Split(src.arg, "\x00"))
					if err2 != nil {
						t.Fatal(err2)
					}
					if err != nil {
						if !errors.Is(err, ErrInvalidText) || want == nil || !strings.Contains(*want, "\x00") {
							t.Fatalf("%q: %s: %v", value, e, err)
						}
					} else if !sameValue(got, anyOf(want)) {
						t.Fatalf("%q: %s = %#v, encoding/json finds %#v", value, e, got, anyOf(want))
					}
				}
			}
		}
	})
}

func anyOf(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		b, ok := b.(string)
		return ok && a == b
	case []byte:
		b, ok := b.([]byte)
		return ok && bytes.Equal(a, b)
	}
	return false
}

// checkRow checks that a row has n values, each nil, valid text or []byte, and that it
// goes through COPY text and back unchanged.
func checkRow(t *testing.T, row []any, n int) {
	t.Helper()
	if len(row) != n {
		t.Fatalf("Row gave %d values for %d columns", len(row), n)
	}
	bytea := make([]bool, n)
	for i, v := range row {
		switch v := v.(type) {
		case nil:
		case string:
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				t.Fatalf("value %d %q is not PostgreSQL text", i, v)
			}
		case []byte:
			if v == nil {
				t.Fatalf("value %d is a nil []byte", i)
			}
			bytea[i] = true
		default:
			t.Fatalf("value %d has type %T", i, v)
		}
	}
	buf, err := AppendCopyRow(nil, row, bytea)
	if err != nil {
		t.Fatalf("AppendCopyRow: %v", err)
	}
	rows, err := decodeCopyText(buf)
	if err != nil || len(rows) != 1 || len(rows[0]) != n {
		t.Fatalf("decode %q: %v", buf, err)
	}
	for i, v := range row {
		f := rows[0][i]
		switch v := v.(type) {
		case nil:
			if f != nil {
				t.Fatalf("value %d: NULL came back as %q", i, *f)
			}
		case string:
			if f == nil || *f != v {
				t.Fatalf("value %d: %q came back as %v", i, v, f)
			}
		case []byte:
			b, err := decodeByteaHex(*f)
			if err != nil || !bytes.Equal(b, v) {
				t.Fatalf("value %d: %q came back as %q (%v)", i, v, b, err)
			}
		}
	}
}

// stdLookup finds, with encoding/json, the value that Row should give for the path segs
// in the valid JSON document doc: the first occurrence of a key wins, all-digit segments
// index arrays. It returns nil when the value is absent or null.
func stdLookup(doc []byte, segs []string) (*string, error) {
	raw := json.RawMessage(bytes.TrimSpace(doc))
	for _, seg := range segs {
		dec := json.NewDecoder(bytes.NewReader(raw))
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		found := false
		switch tok {
		case json.Delim('{'):
			for !found && dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return nil, err
				}
				if k.(string) == seg {
					raw, found = v, true
				}
			}
		case json.Delim('['):
			want := -1
			if n, err := strconv.Atoi(seg); err == nil && len(seg) <= 9 && strings.Trim(seg, "0123456789") == "" {
				want = n
			}
			for n := 0; !found && dec.More(); n++ {
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return nil, err
				}
				if n == want {
					raw, found = v, true
				}
			}
		}
		if !found {
			return nil, nil
		}
	}
	var s string
	switch raw[0] {
	case 'n':
		return nil, nil
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
	default:
		s = string(raw)
	}
	return &s, nil
}
