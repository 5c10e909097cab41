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
