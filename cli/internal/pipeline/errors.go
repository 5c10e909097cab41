package pipeline

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Error is one problem in a pipeline config file. It never holds a value of the file that
// may be secret.
type Error struct {
	File string // the file's name, as given
	Path string // the field, for example "kafka.topics[0]"; empty for the file as a whole
	Line int    // the line in the file, 0 when unknown (for example a missing field)
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// Errors are all the problems found in a file, one per line when printed.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted orders errors by line, then those without a line (missing fields) by the file's
// order of their sections, each section's in the order they were found.
func (es Errors) sorted() Errors {
	out := append(Errors(nil), es...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Line, out[j].Line
		if a > 0 || b > 0 {
			return a > 0 && (b == 0 || a < b)
		}
		return sectionRank(out[i].Path) < sectionRank(out[j].Path)
	})
	return out
}

// sectionRank is the place of path's top-level key in the file's keys; other paths come
// after them.
func sectionRank(path string) int {
	key, _, _ := strings.Cut(path, ".")
	key, _, _ = strings.Cut(key, "[")
	if i := slices.Index(knownKeys[""], key); i >= 0 {
		return i
	}
	return len(knownKeys[""])
}

// minSecret is the shortest secret that is redacted from messages; shorter ones would turn
// ordinary words into noise.
const minSecret = 4

// Redactor removes known secret values from text that others wrote (pgx, plugins, the
// engine, librdkafka), as a second line of defence: this package's own messages never
// include them. The eosink command's other config files (the relay's) use it too. The zero
// value redacts nothing.
type Redactor []string

// Add remembers secrets to redact; those shorter than 4 bytes are ignored.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		if len(s) >= minSecret {
			*r = append(*r, s)
		}
	}
}

// Redact returns s with each secret replaced by xxxxx.
func (r Redactor) Redact(s string) string {
	// Longest first, so that a URL is replaced whole before the password inside it.
	secrets := append([]string(nil), r...)
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "xxxxx")
	}
	return s
}
