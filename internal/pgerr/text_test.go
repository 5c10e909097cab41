package pgerr

import (
	"testing"
	"unicode/utf8"
)

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"café ✓":            "café ✓",
		"a\x00b":            `a\x00b`,
		"\xff\xfe-key":      `\xff\xfe-key`,
		"caf\xe9 \xc3\x28!": `caf\xe9 \xc3(!`,
		"":                  "",
	} {
		got := SafeText(in)
		if got != want || !utf8.ValidString(got) {
			t.Errorf("SafeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSafeText(f *testing.F) {
	f.Add("a\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := SafeText(s)
		for i := range len(got) {
			if got[i] == 0 {
				t.Fatalf("SafeText(%q) holds a NUL", s)
			}
		}
		if !utf8.ValidString(got) {
			t.Fatalf("SafeText(%q) = %q is not UTF-8", s, got)
		}
	})
}
