package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinTokenLength is the shortest token a tokens file may hold.
const MinTokenLength = 16

// Tokens maps the API's bearer tokens to the operators they name. Only the tokens' SHA-256
// sums are kept; a token presented is compared with every one in constant time.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum      [sha256.Size]byte
	operator string
}

// TokensFileError is a tokens file that cannot be used: its mode lets others read it, or a
// line is malformed. It never holds a token.
type TokensFileError struct {
	File string
	Line int // 0 for the file as a whole
	Msg  string
}

func (e *TokensFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// LoadTokens reads a tokens file: one "TOKEN OPERATOR NAME" per line (the name is the rest of
// the line, and may hold spaces), blank lines and lines starting with # ignored. The file
// must be readable by its owner only (mode 0600 or 0400): a file that its group or others
// may read or write is refused. A token is at least MinTokenLength characters and appears
// once.
func LoadTokens(path string) (*Tokens, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &TokensFileError{File: path, Msg: "not a regular file"}
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, &TokensFileError{File: path, Msg: fmt.Sprintf("mode %04o lets others read or change it; chmod 600 it", perm)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokens(path, data)
}

func parseTokens(path string, data []byte) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		token, name := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			token, name = line[:i], strings.TrimSpace(line[i+1:])
		}
		switch {
		case len(token) < MinTokenLength:
			return nil, &TokensFileError{File: path, Line: n, Msg: fmt.Sprintf("the token is shorter than %d characters", MinTokenLength)}
		case name == "":
			return nil, &TokensFileError{File: path, Line: n, Msg: "no operator name after the token (TOKEN NAME)"}
		}
		sum := sha256.Sum256([]byte(token))
		if seen[sum] {
			return nil, &TokensFileError{File: path, Line: n, Msg: "the token appears on an earlier line too"}
		}
		seen[sum] = true
		t.entries = append(t.entries, tokenEntry{sum: sum, operator: name})
	}
	if err := sc.Err(); err != nil {
		return nil, &TokensFileError{File: path, Msg: err.Error()}
	}
	if len(t.entries) == 0 {
		return nil, &TokensFileError{File: path, Msg: "holds no token"}
	}
	return t, nil
}

// errNoToken: the request has no bearer token, or one of no entry.
var errNoToken = errors.New("no valid bearer token")

// operator returns the operator of token, comparing its sum with every entry's in constant
// time (the loop never ends early).
func (t *Tokens) operator(token string) (string, error) {
	sum := sha256.Sum256([]byte(token))
	found := ""
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found = e.operator
		}
	}
	if found == "" || token == "" {
		return "", errNoToken
	}
	return found, nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }
