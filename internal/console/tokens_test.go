package console

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTokens: a tokens file maps each token to the rest of its line; a file others can
// read, a short token, a line without a name, a repeated token and an empty file are refused
// with the line, never the token.
func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tk, err := LoadTokens(write("ok", "# comment\n\n  aaaaaaaaaaaaaaaa   Ann Lee  \nbbbbbbbbbbbbbbbb\tbob\n", 0o600))
	if err != nil || tk.Len() != 2 {
		t.Fatalf("valid file: %v %v", tk, err)
	}
	for token, want := range map[string]string{"aaaaaaaaaaaaaaaa": "Ann Lee", "bbbbbbbbbbbbbbbb": "bob"} {
		if op, err := tk.operator(token); err != nil || op != want {
			t.Errorf("operator(%q) = %q %v, want %q", token, op, err, want)
		}
	}
	for _, bad := range []string{"", "aaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa ", "aaaaaaaaaaaaaaaab"} {
		if _, err := tk.operator(bad); !errors.Is(err, errNoToken) {
			t.Errorf("operator(%q): %v, want errNoToken", bad, err)
		}
	}
	if _, err := LoadTokens(write("ro", "aaaaaaaaaaaaaaaa ann\n", 0o400)); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	for _, c := range []struct {
		text string
		mode os.FileMode
		want string
	}{
		{"aaaaaaaaaaaaaaaa ann\n", 0o644, "mode 0644"},
		{"aaaaaaaaaaaaaaaa ann\n", 0o660, "mode 0660"},
		{"short ann\n", 0o600, ":1: the token is shorter than 16"},
		{"# x\naaaaaaaaaaaaaaaa\n", 0o600, ":2: no operator name"},
		{"aaaaaaaaaaaaaaaa ann\naaaaaaaaaaaaaaaa bob\n", 0o600, ":2: the token appears on an earlier line"},
		{"# nothing\n", 0o600, "holds no token"},
	} {
		_, err := LoadTokens(write("bad", c.text, c.mode))
		var tfe *TokensFileError
		if !errors.As(err, &tfe) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "aaaaaaaaaaaaaaaa") {
			t.Errorf("%q mode %o: %v, want %q without the token", c.text, c.mode, err, c.want)
		}
	}
	if _, err := LoadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
}
