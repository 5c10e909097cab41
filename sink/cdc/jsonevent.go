package cdc

import (
	"bytes"
	"sync/atomic"
	"unicode/utf8"
)

// The envelope of a JsonConverter change event decoded in one pass. decodeJSONValue's
// general path decodes the whole payload into maps (decodeAny), then reads op and source
// from them (envelope) and copies before and after into images (jsonImage). For a snapshot
// read without schemas that is most of eosink's CPU per record: the payload is a 460-byte
// object whose source block alone has 14 fields, of which the plugin reads 6. fastEvent
// reads the same payload once: before and after straight into images, the source fields
// the plugin reads (sourceField) into sourceFields, the transaction block as decodeAny
// would, and every other value only checked to be JSON. When it meets anything it does not
// expect (a shape envelope or jsonImage refuses, invalid JSON), it gives up and the general
// path decides and words the error: it never accepts what that path refuses, and what it
// returns equals what that path returns, but for the source fields the plugin does not read
// (FuzzFastEvent checks both).

// fastEvent decodes payload (the change event without its schema) with s the value's
// schema (nil without schemas). ok is false when the general path must decide.
func fastEvent(payload []byte, s *jsonSchema) (ev *event, ok bool) {
	d := anyDecoder{data: payload}
	i := d.space(0)
	if i >= len(payload) || payload[i] != '{' {
		return nil, false
	}
	var op any
	var src sourceFields
	haveSrc := false
	var before, after image
	var tx any
	i = d.space(i + 1)
	if i < len(payload) && payload[i] == '}' {
		return nil, false // no op and no source
	}
	for {
		if i >= len(payload) || payload[i] != '"' {
			return nil, false
		}
		k, j, err := d.key(i + 1)
		if err != nil {
			return nil, false
		}
		i = d.space(j)
		if i >= len(payload) || payload[i] != ':' {
			return nil, false
		}
		i = d.space(i + 1)
		switch k {
		case "before", "after":
			img, j, ok := d.image(i, s.field(k))
			if !ok {
				return nil, false
			}
			if k == "before" {
				before = img
			} else {
				after = img
			}
			i = j
		case "source":
			if i >= len(payload) || payload[i] != '{' {
				return nil, false
			}
			f, j, ok := d.source(i + 1)
			if !ok {
				return nil, false
			}
			src, haveSrc, i = f, true, j
		case "op", "transaction":
			v, j, err := d.value(i, 1)
			if err != nil {
				return nil, false
			}
			if k == "op" {
				op = v
			} else {
				tx = v
			}
			i = j
		default:
			j, ok := d.skip(i, 1)
			if !ok {
				return nil, false
			}
			i = j
		}
		var closed, ok bool
		if i, closed, ok = d.next(i, '}'); !ok {
			return nil, false
		}
		if closed {
			break
		}
	}
	if d.space(i) != len(payload) {
		return nil, false // data after the value
	}
	if !haveSrc {
		return nil, false
	}
	ev, err := envelopeOf(op, &src, tx)
	if err != nil {
		return nil, false
	}
	ev.before, ev.after, ev.valueSchema = before, after, s
	return ev, true
}

// image decodes before or after at i: null, or an object whose fields take their semantics
// from is, the image's schema (as jsonImage). ok is false for anything else.
func (d *anyDecoder) image(i int, is *jsonSchema) (img image, end int, ok bool) {
	b := d.data
	if i < len(b) && b[i] == 'n' {
		_, j, err := d.literal(i, "null", nil)
		return nil, j, err == nil
	}
	if i >= len(b) || b[i] != '{' {
		return nil, i, false
	}
	img = image{}
	i = d.space(i + 1)
	if i < len(b) && b[i] == '}' {
		return img, i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, i, false
		}
		k, j, ok := d.name(i) // a column's name, interned
		if !ok {
			var err error
			if k, j, err = d.str(i + 1); err != nil {
				return nil, j, false
			}
		}
		i = d.space(j)
		if i >= len(b) || b[i] != ':' {
			return nil, i, false
		}
		v, j, err := d.value(d.space(i+1), 2)
		if err != nil {
			return nil, j, false
		}
		img[k] = imageValue{v: v, t: is.fieldSem(k)}
		var closed bool
		if i, closed, ok = d.next(j, '}'); !ok || closed {
			return img, i, ok
		}
	}
}

// source decodes the members of the source block whose opening brace is before i, keeping
// those the plugin reads (sourceField).
func (d *anyDecoder) source(i int) (f sourceFields, end int, ok bool) {
	b := d.data
	i = d.space(i)
	if i < len(b) && b[i] == '}' {
		return f, i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return f, i, false
		}
		k, j, err := d.key(i + 1)
		if err != nil {
			return f, j, false
		}
		i = d.space(j)
		if i >= len(b) || b[i] != ':' {
			return f, i, false
		}
		i = d.space(i + 1)
		fi := sourceField(k)
		if fi == srcDB || fi == srcSchema || fi == srcTable {
			if v, j, ok := d.name(i); ok {
				f.set(fi, v)
				i = j
				fi = -2 // decoded
			}
		}
		if fi >= 0 {
			v, j, err := d.value(i, 2)
			if err != nil {
				return f, j, false
			}
			f.set(fi, v)
			i = j
		} else if fi == -1 {
			if i, ok = d.skip(i, 2); !ok {
				return f, i, false
			}
		}
		var closed bool
		if i, closed, ok = d.next(i, '}'); !ok || closed {
			return f, i, ok
		}
	}
}

// next reads what follows a member or element at i: a comma (it returns the offset of the
// next member or element) or closing (closed, and the offset after it). ok is false for
// anything else.
func (d *anyDecoder) next(i int, closing byte) (end int, closed, ok bool) {
	i = d.space(i)
	switch {
	case i >= len(d.data):
		return i, false, false
	case d.data[i] == ',':
		return d.space(i + 1), false, true
	case d.data[i] == closing:
		return i + 1, true, true
	}
	return i, false, false
}

// skip checks the JSON value at i as decodeAny would decode it (depth as value's) and
// returns the offset after it, allocating nothing. ok is false where decodeAny fails.
func (d *anyDecoder) skip(i, depth int) (int, bool) {
	b := d.data
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if depth++; depth > maxDepth {
			return i, false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		i = d.space(i + 1)
		if i < len(b) && b[i] == closing {
			return i + 1, true
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return i, false
				}
				j, ok := d.skipStr(i + 1)
				if !ok {
					return j, false
				}
				if i = d.space(j); i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = d.space(i + 1)
			}
			j, ok := d.skip(i, depth)
			if !ok {
				return j, false
			}
			var closed bool
			if i, closed, ok = d.next(j, closing); !ok || closed {
				return i, ok
			}
		}
	case c == '"':
		return d.skipStr(i + 1)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number(i)
	case c == 't':
		_, j, err := d.literal(i, "true", true)
		return j, err == nil
	case c == 'f':
		_, j, err := d.literal(i, "false", false)
		return j, err == nil
	case c == 'n':
		_, j, err := d.literal(i, "null", nil)
		return j, err == nil
	}
	return i, false
}

// skipStr checks a string whose opening quote is before i, as str decodes it, and returns
// the offset after its closing quote.
func (d *anyDecoder) skipStr(i int) (int, bool) {
	b := d.data
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b, i+2); !ok {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
	return i, false
}

// name decodes the string at i as str does when it has no escape and is valid UTF-8, as
// the names of a source block and of a row image's columns are: interned, so that a
// stream's few database, schema, table and column names cost no allocation per record.
// ok is false for any other value.
func (d *anyDecoder) name(i int) (string, int, bool) {
	b := d.data
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	end := bytes.IndexByte(b[i+1:], '"')
	if end < 0 {
		return "", i, false
	}
	s := b[i+1 : i+1+end]
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return "", i, false
		}
	}
	if !utf8.Valid(s) {
		return "", i, false
	}
	return intern(s), i + end + 2, true
}

// interned holds names seen lately, a slot per hash of their bytes (1,024: a stream of many
// tables or wide ones evicts little).
var interned [1024]atomic.Pointer[string]

// intern returns string(b), the same string as the last time b's slot held these bytes.
func intern(b []byte) string {
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &interned[h%uint32(len(interned))]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
