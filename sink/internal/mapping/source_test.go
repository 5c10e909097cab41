package mapping

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		expr string
		kind sourceKind
		side string
		arg  string // path segments joined by NUL, or header name
	}{
		{"key", srcKey, "key", ""},
		{"value", srcValue, "value", ""},
		{"topic", srcTopic, "meta", ""},
		{"partition", srcPartition, "meta", ""},
		{"offset", srcOffset, "meta", ""},
		{"timestamp", srcTimestamp, "meta", ""},
		{"key.id", srcKeyPath, "key", "id"},
		{`key.a\.b.c`, srcKeyPath, "key", "a.b\x00c"},
		{"value.id", srcValuePath, "value", "id"},
		{"value.user.name", srcValuePath, "value", "user\x00name"},
		{"value.items.0.sku", srcValuePath, "value", "items\x000\x00sku"},
		{`value.a\.b`, srcValuePath, "value", "a.b"},
		{`value.a\\b`, srcValuePath, "value", `a\b`},
		{`value.a\*b`, srcValuePath, "value", "a*b"},
		{"value.a*b", srcValuePath, "value", "a*b"},
		{"value.a?b|c#d@e!f", srcValuePath, "value", "a?b|c#d@e!f"},
		{"value.@this", srcValuePath, "value", "@this"},
		{"value.#", srcValuePath, "value", "#"},
		{"value.a=b<c>d%e", srcValuePath, "value", "a=b<c>d%e"},
		{"value.k y", srcValuePath, "value", "k y"},
		{"value.ключ", srcValuePath, "value", "ключ"},
		{"value.snake_case-x:y", srcValuePath, "value", "snake_case-x:y"},
		{"header.trace-id", srcHeader, "header", "trace-id"},
		{"header.a.b", srcHeader, "header", "a.b"},
		{"header.*", srcHeader, "header", "*"},
		{"header. ", srcHeader, "header", " "},
	} {
		s, err := ParseSource(tc.expr)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", tc.expr, err)
			continue
		}
		if s.kind != tc.kind || s.arg != tc.arg || s.Side() != tc.side || s.String() != tc.expr || s.IsZero() {
			t.Errorf("ParseSource(%q) = kind %d arg %q side %q string %q; want kind %d arg %q side %q",
				tc.expr, s.kind, s.arg, s.Side(), s.String(), tc.kind, tc.arg, tc.side)
		}
		if s != MustParseSource(tc.expr) {
			t.Errorf("ParseSource(%q) is not comparable to itself", tc.expr)
		}
		var u Source
		if err := u.UnmarshalText([]byte(tc.expr)); err != nil || u != s {
			t.Errorf("UnmarshalText(%q) = %v, %v", tc.expr, u, err)
		}
		if b, _ := s.MarshalText(); string(b) != tc.expr {
			t.Errorf("MarshalText = %q, want %q", b, tc.expr)
		}
	}
}

func TestParseSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		expr, want string
	}{
		{"", "empty source"},
		{"foo", `bad source "foo": want key, key.<path>`},
		{"Value", `bad source "Value"`},
		{" value", `bad source " value"`},
		{"value ", `bad source "value "`},
		{"values.x", `bad source "values.x"`},
		{"topic.x", `bad source "topic.x"`},
		{"partition.0", `bad source "partition.0"`},
		{"meta.offset", `bad source "meta.offset"`},
		{"value.", `bad source "value.": empty path segment`},
		{"key.", `bad source "key.": empty path segment`},
		{"value..a", "empty path segment"},
		{"value.a.", "empty path segment"},
		{"value.a..b", "empty path segment"},
		{`value.a\`, "lone backslash"},
		{"value.a\x00b", "NUL"},
		{"header.", `bad source "header.": empty header name`},
	} {
		_, err := ParseSource(tc.expr)
		if err == nil {
			t.Errorf("ParseSource(%q) succeeded", tc.expr)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSource(%q) error %q, want it to contain %q", tc.expr, err, tc.want)
		}
		var s Source
		if s.UnmarshalText([]byte(tc.expr)) == nil {
			t.Errorf("UnmarshalText(%q) succeeded", tc.expr)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseSource did not panic")
		}
	}()
	MustParseSource("nope")
}

func TestZeroSource(t *testing.T) {
	var s Source
	if !s.IsZero() || s.String() != "" || s.Side() != "" {
		t.Errorf("zero Source: IsZero %v String %q Side %q", s.IsZero(), s.String(), s.Side())
	}
}
