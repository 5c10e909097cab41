package mapping

import (
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// jsonObject is a JSON object that expressions read (a CEL map, traits.Mapper), decoded on
// demand: its members are found as they are looked up, by a pass over its text that skips
// the values and stops at the key sought, and a member's value is decoded when it is first
// read. An expression that reads three fields of a record decodes those three, and scans
// no further than the last. doc must be valid JSON (the side was validated whole). Like
// decodeJSON's tree, it aliases doc.
type jsonObject struct {
	doc     string // the object's text, from { to }
	members []jsonMember
	small   [8]jsonMember  // members' first array
	byKey   map[string]int // the members' index by key, once there are many
	pos     int            // where the scan resumes in doc: the next member's key (0: not started)
	done    bool           // every member is found
	whole   traits.Mapper  // the whole object, decoded, for what needs every member
}

// jsonMember is one member of a jsonObject: its key and where its value is.
type jsonMember struct {
	key        string
	start, end int // the value's text in the object's doc
	val        ref.Val
}

var _ traits.Mapper = (*jsonObject)(nil)

// jsonValue returns the value of doc, valid JSON: root (a new one when nil), set to doc's
// object, for an object; the tree of decodeJSON otherwise.
func jsonValue(doc string, root *jsonObject) (any, error) {
	doc = trimJSONSpace(doc)
	if len(doc) > 0 && doc[0] == '{' {
		if root == nil {
			root = new(jsonObject)
		}
		*root = jsonObject{doc: doc}
		return root, nil
	}
	return decodeJSON(doc)
}

// manyMembers is the number of members from which lookups go through a map.
const manyMembers = 16

// lookup returns the index of key's member, scanning on until it is found; -1 when the
// object has none. A repeated key keeps its first value, as paths do.
func (o *jsonObject) lookup(key string) int {
	if j := o.find(key); j >= 0 || o.done {
		return j
	}
	for !o.done {
		if o.next() == key {
			return len(o.members) - 1
		}
	}
	return -1
}

// scanAll finds every member.
func (o *jsonObject) scanAll() {
	for !o.done {
		o.next()
	}
}

// next scans the next member and returns its key; a repeated key is not added again.
func (o *jsonObject) next() string {
	doc := o.doc
	i := o.pos
	if i == 0 {
		o.members = o.small[:0]
		if i = skipSpace(doc, 1); doc[i] == '}' {
			o.done = true
			return ""
		}
	}
	end, esc, _ := scanString(doc, i+1)
	key := doc[i+1 : end-1]
	if esc {
		key = string(appendUnescaped(nil, key))
	}
	i = skipSpace(doc, skipSpace(doc, end)+1) // past the colon
	start := i
	i = skipJSONValue(doc, i)
	if o.find(key) < 0 {
		o.members = append(o.members, jsonMember{key: key, start: start, end: i})
		if o.byKey != nil {
			o.byKey[key] = len(o.members) - 1
		} else if len(o.members) > manyMembers {
			o.byKey = make(map[string]int, 2*len(o.members))
			for j := range o.members {
				o.byKey[o.members[j].key] = j
			}
		}
	} else {
		key = "" // not this member's: the first of that key stays
	}
	i = skipSpace(doc, i)
	if doc[i] != ',' {
		o.done = true // the closing brace
	} else {
		o.pos = skipSpace(doc, i+1)
	}
	return key
}

// find returns the index of key's member among those found, -1 when it is not one.
func (o *jsonObject) find(key string) int {
	if o.byKey != nil {
		if j, ok := o.byKey[key]; ok {
			return j
		}
		return -1
	}
	for j := range o.members {
		if o.members[j].key == key {
			return j
		}
	}
	return -1
}

// skipJSONValue returns where the value at i of doc, valid JSON, ends.
func skipJSONValue(doc string, i int) int {
	switch doc[i] {
	case '"':
		end, _, _ := scanString(doc, i+1)
		return end
	case '{', '[':
		depth := 0
		for {
			switch doc[i] {
			case '"':
				i, _, _ = scanString(doc, i+1)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	}
	end, _ := scanNumber(doc, i)
	return end
}

// member returns the value of member j, decoding it on first use.
func (o *jsonObject) member(j int) ref.Val {
	m := &o.members[j]
	if m.val == nil {
		text := o.doc[m.start:m.end]
		switch text[0] {
		case '{':
			m.val = &jsonObject{doc: text}
		case '"':
			if _, esc, _ := scanString(text, 1); esc {
				m.val = types.String(appendUnescaped(nil, text[1:len(text)-1]))
			} else {
				m.val = types.String(text[1 : len(text)-1])
			}
		case 't':
			m.val = types.True
		case 'f':
			m.val = types.False
		case 'n':
			m.val = types.NullValue
		case '[':
			v, err := decodeJSON(text) // valid: it cannot fail
			if err != nil {
				return types.WrapErr(err)
			}
			m.val = types.DefaultTypeAdapter.NativeToValue(v)
		default:
			if n, f, isInt := jsonNumber(text); isInt {
				m.val = types.Int(n)
			} else {
				m.val = types.Double(f)
			}
		}
	}
	return m.val
}

// Find returns the value of key, a string.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false // no other key is in a JSON object
	}
	if j := o.lookup(string(k)); j >= 0 {
		return o.member(j), true
	}
	return nil, false
}

// Get returns the value of key, or a no such key error.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	if v, ok := o.Find(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

// Contains reports whether key is a member.
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	_, ok := o.Find(key)
	return types.Bool(ok)
}

// Size returns the number of members (each key once).
func (o *jsonObject) Size() ref.Val {
	o.scanAll()
	return types.Int(len(o.members))
}

// Iterator iterates over the keys, in the order of the text.
func (o *jsonObject) Iterator() traits.Iterator {
	o.scanAll()
	keys := make([]string, len(o.members))
	for j := range o.members {
		keys[j] = o.members[j].key
	}
	return types.NewStringList(types.DefaultTypeAdapter, keys).Iterator()
}

// wholeMap returns the object decoded whole, once.
func (o *jsonObject) wholeMap() traits.Mapper {
	if o.whole == nil {
		v, _ := decodeJSON(o.doc) // valid: it cannot fail
		o.whole = types.DefaultTypeAdapter.NativeToValue(v).(traits.Mapper)
	}
	return o.whole
}

// ConvertToNative converts the whole object, as a map[string]any would.
func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) {
	return o.wholeMap().ConvertToNative(t)
}

// ConvertToType returns o for the map type, and the whole object's conversion otherwise.
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return o.wholeMap().ConvertToType(t)
}

// Equal compares the whole object with other, as CEL compares maps.
func (o *jsonObject) Equal(other ref.Val) ref.Val { return o.wholeMap().Equal(other) }

// Type is map.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Value returns the whole object as a map[string]any.
func (o *jsonObject) Value() any { return o.wholeMap().Value() }
