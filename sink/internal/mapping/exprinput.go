package mapping

import (
	"fmt"
	"strconv"
	"time"

	"cel.dev/cel-go/interpreter"

	"github.com/eosink/eosink/sink"
)

// exprInput is one record as its expressions see it (an interpreter.Activation). The key
// and the value are decoded on first use, once per record, and only for the sides some
// expression reads. The decoded tree's strings alias the record: nothing of it may outlive
// the Row or AppendCopy call, and values that leave it are copied (exprValue).
type exprInput struct {
	rec                    *sink.Record
	keyFormat, valueFormat Format

	keyDone, valueDone bool
	key, value         any
	headers            map[string]string
	size               int        // of the record's key, value and headers; -1 until known
	valueRoot          jsonObject // the value when it is an object (the key's is allocated)
}

// small reports whether the record has at most exprSmallRecord bytes.
func (in *exprInput) small() bool {
	if in.size < 0 {
		r := in.rec
		in.size = len(r.Key) + len(r.Value) + len(r.Topic)
		for _, h := range r.Headers {
			in.size += len(h.Key) + len(h.Value)
		}
	}
	return in.size <= exprSmallRecord
}

// prepare decodes the sides that e reads, once; a json side must have been validated (a
// side that is not JSON never gets here: see reader.prepare). An error is a *FieldError for
// the side (not text, for the string format).
func (in *exprInput) prepare(e *Expr) error {
	if e.key && !in.keyDone {
		v, err := decodeExprSide(in.rec.Key, in.keyFormat, nil)
		if err != nil {
			return &FieldError{Source: "key", Err: err}
		}
		in.key, in.keyDone = v, true
	}
	if e.value && !in.valueDone {
		v, err := decodeExprSide(in.rec.Value, in.valueFormat, &in.valueRoot)
		if err != nil {
			return &FieldError{Source: "value", Err: err}
		}
		in.value, in.valueDone = v, true
	}
	return nil
}

// ResolveName returns the value of a variable.
func (in *exprInput) ResolveName(name string) (any, bool) {
	r := in.rec
	switch name {
	case "key":
		return in.key, true
	case "value":
		return in.value, true
	case "headers":
		if in.headers == nil {
			in.headers = make(map[string]string, len(r.Headers))
			for _, h := range r.Headers { // the last of a name wins
				if h.Value == nil {
					delete(in.headers, h.Key)
				} else {
					in.headers[h.Key] = unsafeString(h.Value)
				}
			}
		}
		return in.headers, true
	case "topic":
		return r.Topic, true
	case "partition":
		return int64(r.Partition), true
	case "offset":
		return r.Offset, true
	case "timestamp":
		if r.Timestamp.IsZero() {
			return time.Time{}.UTC(), true
		}
		return r.Timestamp.UTC(), true
	}
	return nil, false
}

// Parent returns nil: an input has no parent.
func (in *exprInput) Parent() interpreter.Activation { return nil }

// decodeExprSide decodes a key or value for expressions: null for a null side, a string
// (string format), bytes (bytes format), or, with the json format (data validated), a
// *jsonObject for an object (decoded as it is read) or decodeJSON's tree.
func decodeExprSide(data []byte, f Format, root *jsonObject) (any, error) {
	if data == nil {
		return nil, nil
	}
	switch f {
	case JSON: // validated by the caller
		return jsonValue(unsafeString(data), root)
	case String:
		if err := checkTextBytes(data); err != nil {
			return nil, err
		}
		return unsafeString(data), nil
	case Bytes:
		return data, nil
	}
	return nil, fmt.Errorf("expressions cannot read the %v format", f)
}

// decodeJSON decodes doc, which must be valid UTF-8, into maps (map[string]any), lists
// ([]any), strings, numbers, bools and nil. A number is an int64 when its literal has no
// fraction nor exponent and fits; otherwise a float64 (the nearest). An object that repeats
// a key keeps the first, as paths do. Strings without escapes alias doc.
func decodeJSON(doc string) (any, error) {
	d := jsonDecoder{doc: doc}
	i := skipSpace(doc, 0)
	v, i, err := d.value(i, 0)
	if err != nil {
		return nil, err
	}
	if i = skipSpace(doc, i); i != len(doc) {
		return nil, syntaxError(doc, i)
	}
	return v, nil
}

// jsonDecoder decodes a JSON document into a tree for expressions.
type jsonDecoder struct{ doc string }

// value decodes the value at i (after whitespace) and returns where it ends.
func (d *jsonDecoder) value(i, depth int) (any, int, error) {
	doc := d.doc
	if i >= len(doc) {
		return nil, i, syntaxError(doc, i)
	}
	switch c := doc[i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, i, errTooDeep()
		}
		obj := map[string]any{}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			return obj, i + 1, nil
		}
		for {
			if i >= len(doc) || doc[i] != '"' {
				return nil, i, syntaxError(doc, i)
			}
			k, next, err := d.str(i)
			if err != nil {
				return nil, i, err
			}
			i = skipSpace(doc, next)
			if i >= len(doc) || doc[i] != ':' {
				return nil, i, syntaxError(doc, i)
			}
			v, next, err := d.value(skipSpace(doc, i+1), depth+1)
			if err != nil {
				return nil, next, err
			}
			if _, dup := obj[k]; !dup {
				obj[k] = v
			}
			i = skipSpace(doc, next)
			if i < len(doc) && doc[i] == ',' {
				i = skipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				return obj, i + 1, nil
			}
			return nil, i, syntaxError(doc, i)
		}
	case c == '[':
		if depth >= maxDepth {
			return nil, i, errTooDeep()
		}
		list := []any{}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			return list, i + 1, nil
		}
		for {
			v, next, err := d.value(i, depth+1)
			if err != nil {
				return nil, next, err
			}
			list = append(list, v)
			i = skipSpace(doc, next)
			if i < len(doc) && doc[i] == ',' {
				i = skipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == ']' {
				return list, i + 1, nil
			}
			return nil, i, syntaxError(doc, i)
		}
	case c == '"':
		return d.str(i)
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(doc)-i >= len(lit) && doc[i:i+len(lit)] == lit {
				switch lit[0] {
				case 't':
					return true, i + 4, nil
				case 'f':
					return false, i + 5, nil
				}
				return nil, i + 4, nil
			}
		}
		return nil, i, syntaxError(doc, i)
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := scanNumber(doc, i)
		if !ok {
			return nil, end, syntaxError(doc, end)
		}
		n, f, isInt := jsonNumber(doc[i:end])
		if isInt {
			return n, end, nil
		}
		return f, end, nil
	}
	return nil, i, syntaxError(doc, i)
}

// str decodes the string whose quote is at i.
func (d *jsonDecoder) str(i int) (string, int, error) {
	end, esc, ok := scanString(d.doc, i+1)
	if !ok {
		return "", end, syntaxError(d.doc, end)
	}
	body := d.doc[i+1 : end-1]
	if !esc {
		return body, end, nil
	}
	return string(appendUnescaped(make([]byte, 0, len(body)), body)), end, nil
}

// jsonNumber is a number literal's value: an int64 (isInt) when it is an integer that
// fits, else the nearest float64 (±Inf beyond its range).
func jsonNumber(lit string) (n int64, f float64, isInt bool) {
	integer := true
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	if integer {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return n, 0, true
		}
	}
	f, _ = strconv.ParseFloat(lit, 64) // a literal scanNumber accepted parses, or is out of range: ±Inf
	return 0, f, false
}
