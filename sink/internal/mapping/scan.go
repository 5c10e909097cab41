package mapping

import (
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a single-pass JSON scanner: it validates a document (RFC 8259, as
// encoding/json does, plus a nesting limit) and, in the same pass, finds the values of
// up to 64 paths. Each path's first occurrence of a key wins. It allocates only for deep
// documents (over 32 levels), long paths (over 8 segments) or long escaped keys. It does
// not check UTF-8: the caller does, in a faster separate pass.

// maxDepth is how deeply arrays and objects may nest, as in encoding/json.
const maxDepth = 10000

// pathCol is one path's search in a scan, and then what it found.
type pathCol struct {
	seg  string // the segment to match at the current level
	rest string // the segments after seg, NUL-separated
	idx  int    // seg as an array index, or -1

	found      bool
	kind       byte // what was found: '"' string, '0' number, 't', 'f', 'n' literals, '{' object or array
	esc        bool // a string with escapes
	start, end int  // the value's text in the document; for a string, between the quotes
}

// newPathCol starts the search for a path encoded by encodePath.
func newPathCol(path string) pathCol {
	// The root is entered like any container, which moves to the first segment.
	return pathCol{rest: path, idx: -1}
}

// advance moves c to its next segment. It sets c.idx for arrays only (see scanJSON).
func (c *pathCol) advance() {
	r := c.rest
	for i := 0; i < len(r); i++ {
		if r[i] == 0 {
			c.seg, c.rest = r[:i], r[i+1:]
			return
		}
	}
	c.seg, c.rest = r, ""
}

// arrayIndex returns seg as an array index, or -1 if seg is not made of digits only.
func arrayIndex(seg string) int {
	if seg == "" || len(seg) > 9 {
		return -1
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// level is an open array or object that some path looks into or at.
type level struct {
	depth   int    // its depth, 1 for the root
	cands   uint64 // paths whose seg is matched against its keys or indexes
	targets uint64 // paths whose value it is
	start   int    // offset of its opening bracket
	index   int    // index of its current element, for arrays
}

// scanJSON validates doc and fills the pathCols in cols[:64] selected by mask, which
// must have been made with newPathCol. It reports why doc is not valid JSON.
func scanJSON(doc string, cols []pathCol, mask uint64) error {
	var kindArray [32]byte
	kinds := kindArray[:0] // the open containers, '{' or '['
	var levelArray [8]level
	levels := levelArray[:0] // the open containers some path looks into or at

	// The next value is the target of tgt and contains the paths of desc.
	desc, tgt := mask, uint64(0)
	i := skipSpace(doc, 0)
	for {
		if i >= len(doc) {
			return syntaxError(doc, i)
		}
		c := doc[i]
		switch c {
		case '{', '[':
			if len(kinds) == maxDepth {
				return errTooDeep()
			}
			kinds = append(kinds, c)
			if desc|tgt != 0 {
				for m := desc; m != 0; m &= m - 1 {
					pc := &cols[bits.TrailingZeros64(m)]
					pc.advance()
					if c == '[' {
						pc.idx = arrayIndex(pc.seg)
					}
				}
				levels = append(levels, level{depth: len(kinds), cands: desc, targets: tgt, start: i})
			}
			i = skipSpace(doc, i+1)
			if i < len(doc) && doc[i] == c+2 { // ']' is '['+2, '}' is '{'+2
				break // empty: closed below
			}
			var err error
			if i, desc, tgt, err = element(doc, i, cols, kinds, levels); err != nil {
				return err
			}
			continue
		case '"':
			end, esc, ok := scanString(doc, i+1)
			if !ok {
				return syntaxError(doc, end)
			}
			found(cols, tgt, '"', esc, i+1, end-1)
			i = end
		case 't', 'f', 'n':
			lit := literal(c)
			if !strings.HasPrefix(doc[i:], lit) {
				return syntaxError(doc, i)
			}
			found(cols, tgt, c, false, i, i+len(lit))
			i += len(lit)
		default:
			end, ok := scanNumber(doc, i)
			if !ok {
				return syntaxError(doc, end)
			}
			found(cols, tgt, '0', false, i, end)
			i = end
		}
		// A value ended, or a container opened empty at i. Close containers and find the
		// next element.
		for {
			i = skipSpace(doc, i)
			if len(kinds) == 0 {
				if i != len(doc) {
					return syntaxError(doc, i)
				}
				return nil
			}
			if i >= len(doc) {
				return syntaxError(doc, i)
			}
			top := kinds[len(kinds)-1]
			if doc[i] == ',' {
				var err error
				if i, desc, tgt, err = element(doc, skipSpace(doc, i+1), cols, kinds, levels); err != nil {
					return err
				}
				break
			}
			if doc[i] != top+2 {
				return syntaxError(doc, i)
			}
			i++
			if n := len(levels); n > 0 && levels[n-1].depth == len(kinds) {
				found(cols, levels[n-1].targets, '{', false, levels[n-1].start, i)
				levels = levels[:n-1]
			}
			kinds = kinds[:len(kinds)-1]
		}
	}
}

// element starts the next element of the innermost open container at i: for an object
// it reads the key and the colon. It returns where the element's value starts, and
// which paths descend into it or have it as their target.
func element(doc string, i int, cols []pathCol, kinds []byte, levels []level) (int, uint64, uint64, error) {
	var lv *level
	if n := len(levels); n > 0 && levels[n-1].depth == len(kinds) {
		lv = &levels[n-1]
	}
	var desc, tgt uint64
	if kinds[len(kinds)-1] == '[' {
		if lv != nil {
			for m := lv.cands; m != 0; m &= m - 1 {
				j := bits.TrailingZeros64(m)
				if cols[j].idx == lv.index {
					desc, tgt = take(cols, j, lv, desc, tgt)
				}
			}
			lv.index++
		}
		return skipSpace(doc, i), desc, tgt, nil
	}
	if i >= len(doc) || doc[i] != '"' {
		return i, 0, 0, syntaxError(doc, i)
	}
	end, esc, ok := scanString(doc, i+1)
	if !ok {
		return end, 0, 0, syntaxError(doc, end)
	}
	if lv != nil && lv.cands != 0 {
		key := doc[i+1 : end-1]
		if esc {
			var keyBuf [64]byte
			unescaped := appendUnescaped(keyBuf[:0], key)
			for m := lv.cands; m != 0; m &= m - 1 {
				if j := bits.TrailingZeros64(m); cols[j].seg == string(unescaped) {
					desc, tgt = take(cols, j, lv, desc, tgt)
				}
			}
		} else {
			for m := lv.cands; m != 0; m &= m - 1 {
				if j := bits.TrailingZeros64(m); cols[j].seg == key {
					desc, tgt = take(cols, j, lv, desc, tgt)
				}
			}
		}
	}
	i = skipSpace(doc, end)
	if i >= len(doc) || doc[i] != ':' {
		return i, 0, 0, syntaxError(doc, i)
	}
	return skipSpace(doc, i+1), desc, tgt, nil
}

// take moves path j, which matched the current element, out of lv's candidates: the
// element is its target, or it descends into the element.
func take(cols []pathCol, j int, lv *level, desc, tgt uint64) (uint64, uint64) {
	lv.cands &^= 1 << j
	if cols[j].rest == "" {
		return desc, tgt | 1<<j
	}
	return desc | 1<<j, tgt
}

// found records, for the paths in tgt, the value at doc[start:end].
func found(cols []pathCol, tgt uint64, kind byte, esc bool, start, end int) {
	for m := tgt; m != 0; m &= m - 1 {
		c := &cols[bits.TrailingZeros64(m)]
		c.found, c.kind, c.esc, c.start, c.end = true, kind, esc, start, end
	}
}

func literal(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

func skipSpace(doc string, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t') {
		i++
	}
	return i
}

// scanString scans a string whose opening quote is before i. It returns the offset after
// the closing quote and whether the string has escapes; on error, where it went wrong.
func scanString(doc string, i int) (end int, esc, ok bool) {
	for {
		// Skip plain bytes, eight at a time while they last.
		for i+8 <= len(doc) && !special8(load8(doc, i)) {
			i += 8
		}
		for i < len(doc) && doc[i] >= 0x20 && doc[i] != '"' && doc[i] != '\\' {
			i++
		}
		if i >= len(doc) {
			return i, esc, false
		}
		switch doc[i] {
		case '"':
			return i + 1, esc, true
		case '\\':
			esc = true
			if i+1 >= len(doc) {
				return i, esc, false
			}
			switch doc[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(doc) || !isHex(doc[i+2]) || !isHex(doc[i+3]) || !isHex(doc[i+4]) || !isHex(doc[i+5]) {
					return i, esc, false
				}
				i += 6
			default:
				return i, esc, false
			}
		default: // a control character
			return i, esc, false
		}
	}
}

// special8 reports whether one of the eight bytes in x is a quote, a backslash or a
// control character (below 0x20): the bytes that end a plain run in a JSON string.
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	// A byte b is zero, or below 0x20, where (b - k) borrows into its high bit while b's
	// high bit is clear; the result may also flag a byte above a flagged one, which is fine
	// here since only whether any byte is special matters.
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(x-ones*0x20)&^x)&highs != 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? from i.
func scanNumber(doc string, i int) (end int, ok bool) {
	if i < len(doc) && doc[i] == '-' {
		i++
	}
	switch {
	case i < len(doc) && doc[i] == '0':
		i++
	case i < len(doc) && doc[i] >= '1' && doc[i] <= '9':
		i = digits(doc, i+1)
	default:
		return i, false
	}
	if i < len(doc) && doc[i] == '.' {
		j := digits(doc, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		j := digits(doc, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(doc string, i int) int {
	for i < len(doc) && doc[i] >= '0' && doc[i] <= '9' {
		i++
	}
	return i
}

// appendUnescaped appends the text of the JSON string body s, which scanString accepted,
// to buf. Like encoding/json, it turns a \u escape of a lone surrogate into U+FFFD.
func appendUnescaped(buf []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 {
			return append(buf, s...)
		}
		buf = append(buf, s[:i]...)
		c := s[i+1]
		s = s[i+2:]
		switch c {
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r := hex4(s)
			s = s[4:]
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					r2 = hex4(s[2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					s = s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default: // '"', '\\', '/'
			buf = append(buf, c)
		}
	}
}

// hex4 decodes the four hex digits at the start of s, which scanString checked.
func hex4(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// syntaxError says where doc stops being JSON, without showing doc.
func syntaxError(doc string, i int) error {
	if i >= len(doc) {
		return &detailError{ErrInvalidJSON, "unexpected end"}
	}
	return &detailError{ErrInvalidJSON, "syntax error at byte " + strconv.Itoa(i)}
}

func errTooDeep() error {
	return &detailError{ErrInvalidJSON, "nested more than " + strconv.Itoa(maxDepth) + " levels deep"}
}
