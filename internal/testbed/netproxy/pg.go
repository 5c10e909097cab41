package netproxy

import (
	"encoding/binary"
	"strings"
	"sync"
)

// PGStatements returns a Classify function for the PostgreSQL protocol: it names a client
// turn by the statements the chunk runs, joined by " + " (a Query's text; a Bind's
// prepared statement, named by the Parse that prepared it, on any connection; COPY data),
// each cut to its first words. A chunk that starts inside a message, or a startup
// message, is named "other".
func PGStatements() func([]byte) string {
	var mu sync.Mutex
	prepared := map[string]string{} // statement name -> SQL (pgx names them by the SQL's hash)
	return func(b []byte) string {
		mu.Lock()
		defer mu.Unlock()
		var names []string
		lastParse := ""
		add := func(s string) {
			if len(names) == 0 || names[len(names)-1] != s {
				names = append(names, s)
			}
		}
		for len(b) >= 5 {
			typ, n := b[0], int(binary.BigEndian.Uint32(b[1:5]))
			if n < 4 || typ < 'A' || typ > 'z' {
				break // not at a message boundary (or a startup message)
			}
			body := b[5:min(len(b), 1+n)]
			switch typ {
			case 'Q':
				add(short(cstring(body)))
			case 'P':
				name := cstring(body)
				sql := short(cstring(body[min(len(body), len(name)+1):]))
				prepared[name], lastParse = sql, sql
			case 'B':
				portal := cstring(body)
				stmt := cstring(body[min(len(body), len(portal)+1):])
				if sql, ok := prepared[stmt]; ok && stmt != "" {
					add(sql)
				} else if stmt == "" && lastParse != "" {
					add(lastParse)
				} else {
					add("bind " + stmt)
				}
			case 'd', 'c':
				add("COPY data")
			}
			if 1+n > len(b) {
				break
			}
			b = b[1+n:]
		}
		if len(names) == 0 {
			return "other"
		}
		return strings.Join(names, " + ")
	}
}

func cstring(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// short is a statement's first words, spaces collapsed, at most 60 characters.
func short(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// PGAnswered is an Answered function for the PostgreSQL protocol: the server's chunk ends
// with ReadyForQuery ('Z', length 5, the transaction status), after which a client that
// waits for its answer sends again.
func PGAnswered(chunk []byte) bool {
	n := len(chunk)
	return n >= 6 && chunk[n-6] == 'Z' && binary.BigEndian.Uint32(chunk[n-5:n-1]) == 5
}
