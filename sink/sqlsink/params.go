package sqlsink

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// statement is one configured statement with its named parameters rewritten to $n.
type statement struct {
	path  string   // for messages: "statements[1]", "tombstone_statements[0]"
	text  string   // as configured
	sql   string   // with $1..$n
	names []string // the parameter of each $n, in order: names[0] is $1
	args  []int    // index into the plugin's params of each $n
	bytea []bool   // per $n: PostgreSQL infers bytea (set by describe)
}

// rewrite replaces the named parameters @name of text by $1, $2, ... in order of first
// appearance, and returns the names in that order. The lexer follows pgx.NamedArgs: a
// parameter is @ followed by a letter or underscore, then letters, digits and underscores
// (case-sensitive); nothing inside a string constant ('...', E'...', $tag$...$tag$), a quoted
// identifier ("...") or a comment (--, /* */) is a parameter. Positional parameters ($1)
// are refused: the plugin numbers them itself.
func rewrite(text string) (sql string, names []string, err error) {
	if strings.TrimSpace(text) == "" {
		return "", nil, errors.New("empty statement")
	}
	if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
		return "", nil, errors.New("the statement is not valid UTF-8 or holds a NUL byte")
	}
	var b strings.Builder
	ordinal := map[string]int{}
	s := text
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'' || ((c == 'e' || c == 'E') && i+1 < len(s) && s[i+1] == '\'' && !identBefore(s, i)):
			start := i
			escapes := c != '\''
			if escapes {
				i++
			}
			end, ok := quoted(s, i+1, '\'', escapes)
			if !ok {
				return "", nil, fmt.Errorf("unterminated string constant at %d", start+1)
			}
			b.WriteString(s[start:end])
			i = end
		case c == '"':
			end, ok := quoted(s, i+1, '"', false)
			if !ok {
				return "", nil, fmt.Errorf("unterminated quoted identifier at %d", i+1)
			}
			b.WriteString(s[i:end])
			i = end
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			end := strings.IndexAny(s[i:], "\r\n")
			if end < 0 {
				end = len(s) - i
			}
			b.WriteString(s[i : i+end])
			i += end
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end, ok := comment(s, i)
			if !ok {
				return "", nil, fmt.Errorf("unterminated comment at %d", i+1)
			}
			b.WriteString(s[i:end])
			i = end
		case c == '$' && !identBefore(s, i):
			if i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				return "", nil, fmt.Errorf("positional parameter $%s at %d: name parameters with @name and declare them under params", digitsAt(s, i+1), i+1)
			}
			if tag, ok := dollarTag(s[i:]); ok {
				end := strings.Index(s[i+len(tag):], tag)
				if end < 0 {
					return "", nil, fmt.Errorf("unterminated dollar-quoted string at %d", i+1)
				}
				end += i + 2*len(tag)
				b.WriteString(s[i:end])
				i = end
				continue
			}
			b.WriteByte(c)
			i++
		case c == '@' && i+1 < len(s) && nameStart(s[i+1]):
			j := i + 1
			for j < len(s) && namePart(s[j]) {
				j++
			}
			name := s[i+1 : j]
			n, ok := ordinal[name]
			if !ok {
				names = append(names, name)
				n = len(names)
				ordinal[name] = n
			}
			b.WriteString("$" + strconv.Itoa(n))
			i = j
		case nameStart(c) || c >= 0x80:
			// An identifier or keyword, consumed whole so that a $ or ' inside it (a$b, e'x'
			// after a name) is not taken for the start of something else.
			j := i + 1
			for j < len(s) && (namePart(s[j]) || s[j] == '$' || s[j] >= 0x80) {
				j++
			}
			b.WriteString(s[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), names, nil
}

// quoted returns the index after the closing quote q of a literal whose content starts at
// i; a doubled quote is part of the content, and with escapes so is a backslashed character.
func quoted(s string, i int, q byte, escapes bool) (int, bool) {
	for i < len(s) {
		switch {
		case escapes && s[i] == '\\':
			i += 2
		case s[i] == q:
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1, true
		default:
			i++
		}
	}
	return 0, false
}

// comment returns the index after the /* */ comment at i, which PostgreSQL nests.
func comment(s string, i int) (int, bool) {
	depth := 0
	for i+1 < len(s) {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			depth++
			i += 2
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return 0, false
}

// dollarTag returns the opening $tag$ at the start of s, if it is one.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case nameStart(c) || c >= 0x80 || (j > 1 && c >= '0' && c <= '9'):
		default:
			return "", false
		}
	}
	return "", false
}

// identBefore reports whether s[i] continues an identifier (so a $ or ' there starts nothing).
func identBefore(s string, i int) bool {
	return i > 0 && (namePart(s[i-1]) || s[i-1] == '$' || s[i-1] >= 0x80)
}

func digitsAt(s string, i int) string {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return s[i:j]
}

func nameStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func namePart(c byte) bool  { return nameStart(c) || (c >= '0' && c <= '9') }

// validName reports whether name can be written @name.
func validName(name string) bool {
	if name == "" || !nameStart(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !namePart(name[i]) {
			return false
		}
	}
	return true
}
