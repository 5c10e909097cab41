package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleSection: console is absent (loopback, read-only), or a mapping with listen, tls,
// mutations and tokens_file; mutations need a tokens file, and mistakes name their path.
func TestConsoleSection(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"cert.pem", "key.pem", "tokens"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func(section string) (*Pipeline, error) {
		return Parse(filepath.Join(dir, "p.yaml"), []byte(minimal+section), Options{LogOutput: io.Discard})
	}
	p, err := load("")
	if err != nil || p.Console != (ConsoleOptions{Listen: DefaultConsoleListen}) || !strings.HasPrefix(DefaultConsoleListen, "127.0.0.1:") {
		t.Fatalf("no section: %+v %v, want the loopback default and no mutations", p.Console, err)
	}
	p, err = load("console:\n  listen: 127.0.0.1:9999\n  mutations: true\n  tokens_file: " + filepath.Join(dir, "tokens") +
		"\n  tls: {cert_file: " + filepath.Join(dir, "cert.pem") + ", key_file: " + filepath.Join(dir, "key.pem") + "}\n")
	want := ConsoleOptions{Listen: "127.0.0.1:9999", Mutations: true, TokensFile: filepath.Join(dir, "tokens"),
		TLSCertFile: filepath.Join(dir, "cert.pem"), TLSKeyFile: filepath.Join(dir, "key.pem")}
	if err != nil || p.Console != want {
		t.Fatalf("full section: %+v %v, want %+v", p.Console, err, want)
	}
	for section, want := range map[string]string{
		"console: {mutations: true}\n":                                          "console.tokens_file: required with mutations: true",
		"console: {mutations: yes please}\n":                                    "console.mutations: ",
		"console: {listen: nope}\n":                                             "console.listen: ",
		"console: {tokens_file: /nonexistent/tokens}\n":                         "console.tokens_file: cannot read",
		"console: {tls: {cert_file: " + filepath.Join(dir, "cert.pem") + "}}\n": "console.tls.key_file",
		"console: {token_file: x}\n":                                            "console.token_file: unknown key (console has listen, tls, mutations, tokens_file); did you mean tokens_file?",
		"console: [a]\n":                                                        "console: must be a mapping",
	} {
		if _, err := load(section); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", strings.TrimSpace(section), err, want)
		}
	}
}
