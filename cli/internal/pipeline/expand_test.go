package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crlf"), []byte("line\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOST": "db.example", "EMPTY": "", "REF": "${HOST}"}
	x := &expander{
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		readFile:  os.ReadFile,
		dir:       dir,
	}
	for _, c := range []struct {
		in, want string
		subst    bool
	}{
		{"plain", "plain", false},
		{"${HOST}", "db.example", true},
		{"postgres://${HOST}:5432/x", "postgres://db.example:5432/x", true},
		{"${EMPTY}", "", true},
		{"${EMPTY:-fallback}", "fallback", true}, // like the shell: empty takes the default
		{"${UNSET:-fallback}", "fallback", true},
		{"${UNSET:-}", "", true},
		{"${HOST:-fallback}", "db.example", true},
		{"$${HOST}", "${HOST}", true},
		{"cost $$5", "cost $5", true},
		{"pa$word", "pa$word", false}, // a lone $ is literal
		{"end$", "end$", false},
		{"${REF}", "${HOST}", true}, // substituted text is not expanded again
		{"${file:pw}", "s3cret\n", true},
		{"${file:" + filepath.Join(dir, "pw") + "}", "s3cret\n", true},
		{"${file:crlf}", "line", true},
		{"${HOST}-${HOST}", "db.example-db.example", true},
	} {
		got, subst, err := x.expand(c.in)
		if err != nil || got != c.want || subst != c.subst {
			t.Errorf("expand(%q) = %q, %v, %v; want %q, %v", c.in, got, subst, err, c.want, c.subst)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"${UNSET}", "environment variable UNSET is not set"},
		{"a ${HOST", `unterminated "${"`},
		{"${}", `"" is not an environment variable name`},
		{"${1X:-hidden-default}", `"1X" is not an environment variable name`},
		{"${file:}", "no file named"},
		{"${file:missing}", "${file:missing}: cannot read " + filepath.Join(dir, "missing")},
	} {
		_, _, err := x.expand(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("expand(%q): error %v, want %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hidden-default") {
			t.Errorf("expand(%q): error shows the default: %v", c.in, err)
		}
	}
	if len(x.fromFiles) == 0 || x.fromFiles[0] != "s3cret\n" {
		t.Errorf("values read from files are not remembered for redaction: %q", x.fromFiles)
	}
}
