package mapping

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestAppendCopyRow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   []any
		bytea []bool
		want  string
	}{
		{"plain", []any{"a", "b c", ""}, nil, "a\tb c\t\n"},
		{"null", []any{nil, "x", nil}, nil, "\\N\tx\t\\N\n"},
		{"empty row", []any{}, nil, "\n"},
		{"escapes", []any{"tab\there", "new\nline", "cr\rlf\r\n", `back\slash`}, nil,
			`tab\there` + "\t" + `new\nline` + "\t" + `cr\rlf\r\n` + "\t" + `back\\slash` + "\n"},
		{"looks like null", []any{`\N`, "N"}, nil, `\\N` + "\tN\n"},
		{"end marker", []any{`\.`}, nil, `\\.` + "\n"},
		{"other controls stay", []any{"\x01\b\f\v\x1b\x7f"}, nil, "\x01\b\f\v\x1b\x7f\n"},
		{"unicode", []any{"Zürich 😀"}, nil, "Zürich 😀\n"},
		{"bytes as text", []any{[]byte("a\tb")}, nil, `a\tb` + "\n"},
		{"bytea bytes", []any{[]byte{0, 1, 0xab, 0xff}}, []bool{true}, `\\x0001abff` + "\n"},
		{"bytea string", []any{"\x00\\"}, []bool{true}, `\\x005c` + "\n"},
		{"bytea empty", []any{[]byte{}}, []bool{true}, `\\x` + "\n"},
		{"bytea nil bytes", []any{[]byte(nil)}, []bool{true}, `\N` + "\n"},
		{"nil bytes", []any{[]byte(nil)}, nil, `\N` + "\n"},
		{"bytea null", []any{nil}, []bool{true}, `\N` + "\n"},
		{"bytea mask shorter", []any{[]byte{1}, []byte("x"), "y"}, []bool{true}, `\\x01` + "\tx\ty\n"},
		{"bytea mask mixed", []any{"\xff", "ok"}, []bool{true, false}, `\\xff` + "\tok\n"},
		{"other types", []any{true, false, 7, int32(-3), int64(1 << 40), ts}, nil,
			"true\tfalse\t7\t-3\t1099511627776\t2024-05-06T05:08:09.123Z\n"},
	} {
		got, err := AppendCopyRow([]byte("prev\n"), tc.row, tc.bytea)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != "prev\n"+tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got[5:], tc.want)
		}
	}
}

func TestAppendCopyRowErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  []any
		err  error
		msg  string
	}{
		{"NUL string", []any{"ok", "a\x00b"}, ErrInvalidText, "mapping: COPY column 2: text PostgreSQL cannot store: contains a NUL byte"},
		{"NUL bytes", []any{[]byte{0}}, ErrInvalidText, "NUL"},
		{"invalid UTF-8", []any{"a\xffb"}, ErrInvalidText, "not valid UTF-8"},
		{"truncated UTF-8", []any{[]byte("\xe2\x82")}, ErrInvalidText, "not valid UTF-8"},
		{"surrogate", []any{"\xed\xa0\x80"}, ErrInvalidText, "not valid UTF-8"},
		{"type", []any{1.5}, nil, "mapping: COPY column 1: unsupported type float64"},
		{"type after good", []any{"x", struct{}{}}, nil, "COPY column 2: unsupported type struct {}"},
	} {
		buf := []byte("prev\n")
		got, err := AppendCopyRow(buf, tc.row, nil)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %q lacks %q", tc.name, err, tc.msg)
		}
		if string(got) != "prev\n" {
			t.Errorf("%s: buffer %q after the error, want it unchanged", tc.name, got)
		}
	}
}

func TestAppendCopyRowRoundTrip(t *testing.T) {
	rows := [][]any{
		{"a\tb\\c\nd\re", nil, []byte{0, 0xff}, "", `\N`},
		{"2", "x", []byte{}, nil, "\x01"},
	}
	bytea := []bool{false, false, true}
	var buf []byte
	for _, r := range rows {
		var err error
		if buf, err = AppendCopyRow(buf, r, bytea); err != nil {
			t.Fatal(err)
		}
	}
	got, err := decodeCopyText(buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("decoded %d rows, want %d", len(got), len(rows))
	}
	for i, r := range rows {
		for j, v := range r {
			f := got[i][j]
			if j < len(bytea) && bytea[j] && f != nil {
				b, err := decodeByteaHex(*f)
				if err != nil || !bytes.Equal(b, v.([]byte)) {
					t.Errorf("row %d column %d: %q (%v), want %q", i, j, b, err, v)
				}
				continue
			}
			switch v := v.(type) {
			case nil:
				if f != nil {
					t.Errorf("row %d column %d: %q, want NULL", i, j, *f)
				}
			case string:
				if f == nil || *f != v {
					t.Errorf("row %d column %d: %v, want %q", i, j, f, v)
				}
			}
		}
	}
}

func TestDecodeCopyTextRejects(t *testing.T) {
	for _, bad := range []string{"a", "a\rb\n", "a\\\n", "\\.\n", "\\0\n", "\xff\n"} {
		if _, err := decodeCopyText([]byte(bad)); err == nil {
			t.Errorf("decodeCopyText(%q) succeeded", bad)
		}
	}
	rows, err := decodeCopyText([]byte(`\b\f\v\101\x41\q` + "\t\\N\n"))
	if err != nil || len(rows) != 1 || *rows[0][0] != "\b\f\vAAq" || rows[0][1] != nil {
		t.Errorf("decodeCopyText = %v, %v", rows, err)
	}
}
