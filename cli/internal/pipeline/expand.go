package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// expander replaces references in scalar values, after the YAML is parsed, so that a value
// can never change the document's structure:
//
//	${NAME}           the environment variable NAME; an error when it is not set
//	${NAME:-default}  NAME, or default when NAME is unset or empty
//	${file:PATH}      the content of the file at PATH (relative to the config file's folder)
//	                  with one trailing newline removed
//	$$                a literal $
//
// A $ not followed by { or $ is literal. Substituted text is not scanned again.
type expander struct {
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
	dir       string   // the config file's folder, for relative ${file:...} paths
	fromFiles []string // values read from files (secrets), to redact from messages

	allowUnset bool     // an unset ${NAME} expands to "" and is recorded in unset, not an error
	unset      []string // the unset variables of the last expand, with allowUnset
}

// expand returns s with its references replaced; subst reports whether s held any reference
// or $$. Errors name the reference but never a value.
func (x *expander) expand(s string) (out string, subst bool, err error) {
	x.unset = x.unset[:0]
	if !strings.Contains(s, "$") {
		return s, false, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			subst = true
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", false, errors.New(`unterminated "${" (write "$$" for a literal "$")`)
			}
			v, err := x.resolve(s[i+2 : i+2+end])
			if err != nil {
				return "", false, err
			}
			b.WriteString(v)
			i += 2 + end + 1
			subst = true
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), subst, nil
}

// resolve returns the value of one reference, the text between "${" and "}".
func (x *expander) resolve(ref string) (string, error) {
	if path, ok := strings.CutPrefix(ref, "file:"); ok {
		if path == "" {
			return "", errors.New("${file:}: no file named")
		}
		full := path
		if !filepath.IsAbs(full) {
			full = filepath.Join(x.dir, full)
		}
		data, err := x.readFile(full)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the message already
			}
			return "", fmt.Errorf("${file:%s}: cannot read %s: %v", path, full, err)
		}
		v := string(data)
		if t, ok := strings.CutSuffix(v, "\n"); ok {
			v = strings.TrimSuffix(t, "\r")
		}
		x.fromFiles = append(x.fromFiles, v)
		return v, nil
	}
	name, def, hasDef := strings.Cut(ref, ":-")
	if !isVarName(name) {
		// Print the name only: a default may be a secret.
		return "", fmt.Errorf("${%s}: %q is not an environment variable name (letters, digits and _, not starting with a digit; ${file:PATH} reads a file)", name, name)
	}
	v, ok := x.lookupEnv(name)
	switch {
	case ok && (v != "" || !hasDef):
		return v, nil
	case hasDef:
		return def, nil
	case x.allowUnset:
		x.unset = append(x.unset, name)
		return "", nil
	}
	return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} for a default)", name, name)
}

func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
