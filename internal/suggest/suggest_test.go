package suggest

import "testing"

func TestUnknownKey(t *testing.T) {
	known := []string{"from", "required", "cast", "default"}
	for _, c := range []struct{ key, want string }{
		{"requird", "unknown key (sink.columns.a has from, required, cast, default); did you mean required?"},
		{"Cast", "unknown key (sink.columns.a has from, required, cast, default); did you mean cast?"},
		{"colour", "unknown key (sink.columns.a has from, required, cast, default)"},
	} {
		if got := UnknownKey("sink.columns.a", c.key, known); got != c.want {
			t.Errorf("UnknownKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	if got := Closest("grop", []string{"brokers", "group", "topics"}); got != "group" {
		t.Errorf("Closest(grop) = %q", got)
	}
}
