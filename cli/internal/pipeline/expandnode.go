package pipeline

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// ExpandNode expands the references of every scalar in n (${NAME}, ${NAME:-default},
// ${file:PATH} relative to the folder of file, $$) as a pipeline file's are, for the
// eosink command's other config files (the relay's). It returns the values read from files,
// to redact from messages. Errors name the line and the reference, never a value.
func ExpandNode(file string, n *yaml.Node) (secrets []string, err error) {
	x := &expander{lookupEnv: os.LookupEnv, readFile: os.ReadFile, dir: filepath.Dir(file)}
	var walk func(*yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.ScalarNode && n.Tag != "!!binary" {
			out, subst, err := x.expand(n.Value)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", file, n.Line, err)
			}
			if subst {
				n.Value = out
				if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
					n.Tag = "" // unquoted: resolve the expanded text again (a number, a boolean)
				}
			}
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	err = walk(n)
	return x.fromFiles, err
}

// HTTPSection reads n, the http section of another config file of the eosink command (the
// relay's), as a pipeline file's http is read: a listen address, or a mapping with listen,
// tls, auth and limits (docs/pipeline-config.md#http), its ${...} references expanded. n is
// the section as written, before ExpandNode. It returns the secrets read, to redact from
// messages; errors name the file, the key and the line, never a value.
func HTTPSection(file string, n *yaml.Node) (listen string, o HTTPOptions, secrets []string, err error) {
	l := newLoader(file, &expander{lookupEnv: os.LookupEnv, readFile: os.ReadFile, dir: filepath.Dir(file)})
	listen, o = l.http(n)
	secrets = append(append(secrets, l.secrets...), l.x.fromFiles...)
	if len(l.errs) > 0 {
		return "", HTTPOptions{}, secrets, l.errs.sorted()
	}
	return listen, o, secrets, nil
}
