package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// The JsonConverter's schemas: parsed once per schema text and cached, and recognised on
// the next record of the same table by comparing bytes.

// jsonSchema is a Kafka Connect schema as the JsonConverter writes it.
type jsonSchema struct {
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	Field      string         `json:"field"`
	Parameters map[string]any `json:"parameters"`
	Fields     []jsonSchema   `json:"fields"`
	Items      *jsonSchema    `json:"items"`

	sem semantic // semantic(), computed once by resolve
}

// resolve computes the semantic of s and of every field below it.
func (s *jsonSchema) resolve() {
	s.sem = s.semantic()
	if s.Items != nil {
		s.Items.resolve()
		s.sem.items = &s.Items.sem
	}
	for i := range s.Fields {
		s.Fields[i].resolve()
	}
}

func (s *jsonSchema) field(name string) *jsonSchema {
	if s == nil {
		return nil
	}
	for i := range s.Fields {
		if s.Fields[i].Field == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// fieldSem is the semantic of s's field name: untypedSem without a schema (s nil),
// typedSem for a field s does not describe.
func (s *jsonSchema) fieldSem(name string) *semantic {
	if s == nil {
		return untypedSem
	}
	if fs := s.field(name); fs != nil {
		return &fs.sem
	}
	return typedSem
}

func (s *jsonSchema) semantic() semantic {
	if s == nil {
		return semantic{}
	}
	t := semantic{name: s.Name, bytes: s.Type == "bytes", typed: true}
	if len(s.Parameters) > 0 {
		t.params = make(map[string]string, len(s.Parameters))
		for k, v := range s.Parameters {
			t.params[k] = fmt.Sprint(v)
		}
	}
	return t
}

// parseJSON reads a JsonConverter record: {schema, payload} when schemas are enabled,
// else the payload alone. schema is nil without schemas. The schema, most of the bytes of
// a Debezium record and the same on every record of a table, is parsed once and cached
// (schemaCache); a record whose schema is byte for byte the one last parsed through last is
// split by comparing bytes, without parsing the schema again, and only its payload is
// decoded (lastSchema.split).
func parseJSON(data []byte, last *lastSchema) (payload any, schema *jsonSchema, err error) {
	if p, s, ok := last.split(data); ok {
		if payload, err := decodeNumbers(p); err == nil {
			return payload, s, nil
		}
		// Not what the fast path expects: the full parse below decides, and words any error.
	}
	var outer map[string]json.RawMessage
	if mayBeEnvelope(data) && json.Unmarshal(data, &outer) == nil && len(outer) == 2 {
		rawSchema, hasSchema := outer["schema"]
		rawPayload, hasPayload := outer["payload"]
		if hasSchema && hasPayload {
			if schema, err = schemas.get(rawSchema); err != nil {
				return nil, nil, fmt.Errorf("schema: %v", err)
			}
			if payload, err = decodeNumbers(rawPayload); err != nil {
				return nil, nil, err
			}
			last.remember(rawSchema, schema)
			return payload, schema, nil
		}
	}
	payload, err = decodeNumbers(data)
	return payload, nil, err
}

// mayBeEnvelope reports whether data may be the JsonConverter's {"schema":…,"payload":…}:
// a record whose text has neither "payload" nor an escape (\u0070ayload) has no field of
// that name, and is parsed once, as JSON without schemas, instead of twice.
func mayBeEnvelope(data []byte) bool {
	return bytes.Contains(data, []byte(`"payload"`)) || bytes.Contains(data, []byte(`\u`))
}

// lastSchema remembers the schema text of the last record parsed through it (one for
// keys, one for values), so that the next record with the same schema, the common case of a
// table's change stream, is split by comparing bytes instead of scanning them.
type lastSchema struct{ p atomic.Pointer[knownSchema] }

type knownSchema struct {
	raw []byte // the schema's JSON text, exactly as it appeared
	s   *jsonSchema
}

var lastKeySchema, lastValueSchema lastSchema

const (
	schemaOpen   = `{"schema":`
	payloadField = `,"payload":`
)

// split recognises {"schema":<the remembered schema>,"payload":<payload>} written compactly,
// as the JsonConverter writes it, and returns the payload's bytes (not yet checked to be one
// JSON value) and the schema. ok is false for anything else.
func (l *lastSchema) split(data []byte) (payload []byte, s *jsonSchema, ok bool) {
	k := l.p.Load()
	if k == nil {
		return nil, nil, false
	}
	rest, found := bytes.CutPrefix(data, []byte(schemaOpen))
	if !found {
		return nil, nil, false
	}
	if rest, found = bytes.CutPrefix(rest, k.raw); !found {
		return nil, nil, false
	}
	if rest, found = bytes.CutPrefix(rest, []byte(payloadField)); !found {
		return nil, nil, false
	}
	rest = bytes.TrimRight(rest, " \t\r\n")
	if len(rest) < 2 || rest[len(rest)-1] != '}' {
		return nil, nil, false
	}
	return rest[:len(rest)-1], k.s, true
}

func (l *lastSchema) remember(raw []byte, s *jsonSchema) {
	if k := l.p.Load(); k != nil && k.s == s {
		return
	}
	l.p.Store(&knownSchema{raw: bytes.Clone(raw), s: s})
}

// decodeNumbers decodes one JSON value, numbers as json.Number (exact decimals), with
// nothing but white space after it (decodeAny).
func decodeNumbers(data []byte) (any, error) {
	v, end, err := decodeAny(data)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if len(bytes.TrimLeft(data[end:], " \t\r\n")) > 0 {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

// schemaCache keeps parsed JsonConverter schemas by their text. It holds at most
// maxSchemas of them (a stream has a few per table and version) and at most
// maxSchemaBytes (8 MiB) of schema text, about 55 MiB of memory with the parsed forms
// (which take about 6 times their text); when one more would pass either bound it starts
// again empty. A schema longer than maxSchemaBytes/8 is parsed for its record and never
// kept, so that one huge schema cannot evict the others. Parsed schemas are shared and
// never written to.
type schemaCache struct {
	mu    sync.Mutex
	m     map[string]*jsonSchema
	bytes int // the text of the schemas in m
}

const (
	maxSchemas     = 1024
	maxSchemaBytes = 8 << 20
)

var schemas = &schemaCache{m: map[string]*jsonSchema{}}

func (c *schemaCache) get(raw []byte) (*jsonSchema, error) {
	c.mu.Lock()
	s, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s = &jsonSchema{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	s.resolve()
	if len(raw) > maxSchemaBytes/8 {
		return s, nil
	}
	c.mu.Lock()
	if len(c.m) >= maxSchemas || c.bytes+len(raw) > maxSchemaBytes {
		clear(c.m)
		c.bytes = 0
	}
	if _, dup := c.m[string(raw)]; !dup {
		c.m[string(raw)] = s
		c.bytes += len(raw)
	}
	c.mu.Unlock()
	return s, nil
}
