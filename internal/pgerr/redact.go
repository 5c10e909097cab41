package pgerr

import (
	"errors"
	"net/url"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Mask replaces a password in redacted text.
const Mask = "xxxxx"

// secretKeys are the connection string keywords whose values are secrets.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// span is a secret's place in a connection string: [start, end) as written, and its value.
type span struct {
	start, end int
	value      string
}

// secretSpans parses s as libpq does, a URL (postgres:// or postgresql://, in any case)
// or keyword/value pairs, and returns where its secrets are written. It parses strings that
// libpq or pgx would refuse as far as it can: a password is found in a string that fails to
// parse for another reason.
func secretSpans(s string) []span {
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return urlSpans(s)
	}
	return keywordSpans(s)
}

// keywordSpans parses libpq's keyword/value form: keyword, optional spaces, "=", optional
// spaces, then a value that is either quoted ('...', with \' and \\ escapes) or runs to the
// next space (with \ escaping the next character).
func keywordSpans(s string) []span {
	var out []span
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		k := i
		for i < len(s) && !isSpace(s[i]) && s[i] != '=' {
			i++
		}
		key := s[k:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			// Not key=value: libpq refuses the string. Whatever follows may still hold a
			// password written "password" + something else; treat the rest as words.
			continue
		}
		i++ // '='
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start := i
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
			if i < len(s) {
				i++ // closing quote
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
		}
		if secretKeys[strings.ToLower(key)] {
			out = append(out, span{start, i, v.String()})
		}
	}
	return out
}

// urlSpans finds the password of a URL's user information and the password and sslpassword
// query parameters. A malformed URL is over-masked rather than under-masked: the user
// information runs to the last "@" before the query.
func urlSpans(s string) []span {
	var out []span
	rest := strings.Index(s, "://") + 3
	query := len(s)
	if q := strings.IndexByte(s[rest:], '?'); q >= 0 {
		query = rest + q
	}
	if at := strings.LastIndexByte(s[rest:query], '@'); at >= 0 {
		if colon := strings.IndexByte(s[rest:rest+at], ':'); colon >= 0 {
			start, end := rest+colon+1, rest+at
			out = append(out, span{start, end, unescape(s[start:end])})
		}
	}
	if query < len(s) {
		pos := query + 1
		for _, kv := range strings.Split(s[query+1:], "&") {
			k, v, _ := strings.Cut(kv, "=")
			if secretKeys[strings.ToLower(unescape(k))] {
				start := pos + len(k) + 1
				if start > pos+len(kv) {
					start = pos + len(kv)
				}
				out = append(out, span{start, pos + len(kv), unescape(v)})
			}
			pos += len(kv) + 1
		}
	}
	return out
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// RedactConnString returns s with the value of each password written in it replaced by Mask.
func RedactConnString(s string) string {
	spans := secretSpans(s)
	for i := len(spans) - 1; i >= 0; i-- { // from the end: the earlier offsets stay right
		sp := spans[i]
		s = s[:sp.start] + Mask + s[sp.end:]
	}
	return s
}

// ConnStringSecrets returns the passwords written in the connection string s, each both as
// written and decoded (unquoted, unescaped), longest first. It parses s rather than matching
// patterns, and finds them in strings that fail to parse for another reason.
func ConnStringSecrets(s string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v != "" && v != Mask && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, sp := range secretSpans(s) {
		add(s[sp.start:sp.end])
		add(sp.value)
		add(strings.Trim(s[sp.start:sp.end], "'"))
	}
	if cfg, err := pgconn.ParseConfig(s); err == nil {
		add(cfg.Password) // also from PGPASSWORD or the password file
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// RedactError returns err with every password of the connection string connString removed
// from its text: pgx's own parse errors are rebuilt around the redacted string, and every
// occurrence of a password (as written or decoded) in the text is replaced by Mask. The
// result unwraps to err, so that errors.Is and errors.As still see its chain.
func RedactError(err error, connString string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		cp := *pe
		cp.ConnString = RedactConnString(pe.ConnString)
		msg = strings.ReplaceAll(msg, pe.Error(), cp.Error())
	}
	msg = RedactText(msg, connString)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// minSecret is the shortest password RedactText replaces in free text: shorter ones would
// turn ordinary words into noise. (A connection string in pgx's parse errors is redacted
// whole, whatever the password's length.)
const minSecret = 4

// RedactText replaces every password of connString (of 4 bytes or more) in text by Mask.
func RedactText(text, connString string) string {
	for _, secret := range ConnStringSecrets(connString) {
		if len(secret) < minSecret {
			continue
		}
		text = strings.ReplaceAll(text, secret, Mask)
	}
	return text
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
