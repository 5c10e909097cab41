package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/eosink/eosink/sink/cdc/internal/txn"
	"github.com/eosink/eosink/sink/internal/schemaformat"
)

// semantic is what the writer of a change event says about a field: its Kafka Connect
// type name (io.debezium.time.MicroTimestamp...) and parameters, and, with the JSON
// converter, whether its schema type is bytes (base64 text). typed is false for JSON
// without schemas, where the target column's type is the only hint.
type semantic struct {
	name   string
	params map[string]string
	bytes  bool
	typed  bool
	items  *semantic // of an array's elements, when the writer says

	// decimals is Config.DecimalHandling, how the connector wrote numeric values when the
	// record does not say (typed false); set by target.row.
	decimals string
}

// value is one field of a row image, as decoded, with its semantic.
type value struct {
	v any
	t semantic
}

// image is a row image (before, after) or a key struct: field → its value and semantic.
// The semantic is a pointer, shared with the schema it comes from: a map slot of
// imageValue is a third of one of value, and a row image's map is allocated for every
// change event.
type image map[string]imageValue

type imageValue struct {
	v any
	t *semantic // never nil: untypedSem or typedSem when no schema names the field
}

// value is iv as convert takes it (a copy of its semantic, which target.row completes).
func (iv imageValue) value() value { return value{v: iv.v, t: *iv.t} }

var (
	untypedSem = &semantic{}            // JSON without schemas
	typedSem   = &semantic{typed: true} // a field its schema does not describe: taken as it is
)

// event is one Debezium change event, decoded.
type event struct {
	op                string         // c, r, u, d, t
	db, schema, table string         // source
	commit, lsn       int64          // the source position (see position)
	ts                int64          // source.ts_ms, the source's commit time (0 when missing), for rewind.go
	src               map[string]any // source as decoded into a map (nil from fastEvent): see source()
	srcFields         sourceFields   // the fields of source that the plugin reads
	txBlock           any            // the transaction block, nil when there is none
	before, after     image
	key               image // the Kafka key's struct; nil for a null key

	// The writers' schemas, for create and evolve (ddl.go): the JsonConverter's (nil
	// without schemas) or the Avro messages'.
	valueSchema, keySchema *jsonSchema
	valueMsg, keyMsg       *schemaformat.Message
}

var errNotEnvelope = errors.New("not a Debezium change event envelope (no op and source)")

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

// jsonImage turns a struct payload into an image with the semantics of its schema.
func jsonImage(v any, s *jsonSchema, what string) (image, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T, want an object", what, v)
	}
	img := make(image, len(m))
	for k, fv := range m {
		img[k] = imageValue{v: fv, t: s.fieldSem(k)}
	}
	return img, nil
}

// decodeJSONValue parses a JsonConverter change event: in one pass when it can
// (fastEvent), else through decodeJSONValueAll.
//
// A record that is not split as {"schema":<the schema last seen>,"payload":…} goes to
// fastEvent whole unless it begins as the JsonConverter's envelope does: fastEvent decodes
// an event only when it has op and source, and the general path takes an object as the
// envelope only when its members are schema and payload alone, so the two agree on
// whatever fastEvent decodes; the check only spares fastEvent a record it would give up on.
func decodeJSONValue(data []byte) (*event, error) {
	payload, s, ok := lastValueSchema.split(data)
	if !ok && !bytes.HasPrefix(data, []byte(schemaOpen)) {
		payload, ok = data, true
	}
	if ok {
		if ev, ok := fastEvent(payload, s); ok {
			return ev, nil
		}
	}
	return decodeJSONValueAll(data)
}

// decodeJSONValueAll parses a JsonConverter change event into maps, then reads them.
func decodeJSONValueAll(data []byte) (*event, error) {
	p, s, err := parseJSON(data, &lastValueSchema)
	if err != nil {
		return nil, err
	}
	m, ok := p.(map[string]any)
	if !ok {
		return nil, errNotEnvelope
	}
	ev, err := envelope(m)
	if err != nil {
		return nil, err
	}
	if ev.before, err = jsonImage(m["before"], s.field("before"), "before"); err != nil {
		return nil, err
	}
	if ev.after, err = jsonImage(m["after"], s.field("after"), "after"); err != nil {
		return nil, err
	}
	ev.valueSchema = s
	return ev, nil
}

// decodeJSONKey parses a JsonConverter key struct, and returns its schema (nil without
// schemas): in one pass straight into the image when it can (a key without schemas, or
// with the schema last seen), else through decodeJSONKeyAll.
func decodeJSONKey(data []byte) (image, *jsonSchema, error) {
	payload, s, ok := lastKeySchema.split(data)
	whole := !ok
	if whole {
		payload = data
	}
	d := anyDecoder{data: payload}
	if img, end, ok := d.image(d.space(0), s); ok && d.space(end) == len(payload) && !(whole && isEnvelope(img)) {
		return img, s, nil
	}
	return decodeJSONKeyAll(data)
}

// isEnvelope reports whether an object decoded whole is the JsonConverter's envelope, which
// parseJSON takes apart: its members are schema and payload, and nothing else.
func isEnvelope(img image) bool {
	_, hasSchema := img["schema"]
	_, hasPayload := img["payload"]
	return len(img) == 2 && hasSchema && hasPayload
}

// decodeJSONKeyAll is decodeJSONKey through maps (parseJSON, jsonImage).
func decodeJSONKeyAll(data []byte) (image, *jsonSchema, error) {
	p, s, err := parseJSON(data, &lastKeySchema)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		return nil, s, nil
	}
	img, err := jsonImage(p, s, "key")
	return img, s, err
}

// avroImage turns a decoded Avro record into an image, with the Connect types of its
// fields from msg at path side.
func avroImage(msg *schemaformat.Message, v any, side string) (image, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T, want a record", side, v)
	}
	img := make(image, len(m))
	for k, fv := range m {
		t := &semantic{typed: true}
		var path []string
		if side != "" {
			path = append(path, side)
		}
		if ct, ok := msg.Connect(append(path, k)...); ok {
			t.name, t.params = ct.Name, ct.Parameters
		}
		if _, ok := fv.([]any); ok {
			items := semantic{typed: true}
			if ct, ok := msg.Connect(append(path, k, "*")...); ok {
				items.name, items.params = ct.Name, ct.Parameters
			}
			t.items = &items
		}
		img[k] = imageValue{v: fv, t: t}
	}
	return img, nil
}

func decodeAvroValue(msg *schemaformat.Message) (*event, error) {
	m, ok := msg.Value.(map[string]any)
	if !ok {
		return nil, errNotEnvelope
	}
	ev, err := envelope(m)
	if err != nil {
		return nil, err
	}
	if ev.before, err = avroImage(msg, m["before"], "before"); err != nil {
		return nil, err
	}
	if ev.after, err = avroImage(msg, m["after"], "after"); err != nil {
		return nil, err
	}
	ev.valueMsg = msg
	return ev, nil
}

// envelope reads op and source of a change event.
func envelope(m map[string]any) (*event, error) {
	src, _ := m["source"].(map[string]any)
	if src == nil {
		return nil, errNotEnvelope
	}
	var f sourceFields
	for i, name := range sourceNames {
		if v, ok := src[name]; ok {
			f.set(i, v)
		}
	}
	ev, err := envelopeOf(m["op"], &f, m["transaction"])
	if err != nil {
		return nil, err
	}
	ev.src = src
	return ev, nil
}

// envelopeOf reads a change event's op, source fields and transaction block.
func envelopeOf(opv any, f *sourceFields, tx any) (*event, error) {
	op, _ := opv.(string)
	if op == "" {
		return nil, errNotEnvelope
	}
	ev := &event{op: op, srcFields: *f, txBlock: tx}
	ev.db, _ = f.v[srcDB].(string)
	ev.schema, _ = f.v[srcSchema].(string)
	ev.table, _ = f.v[srcTable].(string)
	if ev.schema == "" || ev.table == "" {
		return nil, errors.New("source.schema or source.table missing")
	}
	ev.ts, _ = asInt64(f.v[srcTsMs])
	var err error
	if ev.commit, ev.lsn, err = position(f.v[srcLSN], f.v[srcSequence], op); err != nil {
		return nil, err
	}
	return ev, nil
}

// source returns the event's source block: as decoded, or, from fastEvent, the fields the
// plugin reads.
func (ev *event) source() map[string]any {
	if ev.src == nil {
		ev.src = ev.srcFields.asMap()
	}
	return ev.src
}

// The fields of a source block that the plugin reads: envelopeOf and position here,
// txn.DecodeChange (schema, table, sequence) for transactions.
const (
	srcDB = iota
	srcSchema
	srcTable
	srcTsMs
	srcLSN
	srcSequence
	nSourceFields
)

var sourceNames = [nSourceFields]string{"db", "schema", "table", "ts_ms", "lsn", "sequence"}

// sourceField is the index of the source field named k, or -1 for one the plugin does
// not read.
func sourceField(k string) int {
	switch k {
	case "db":
		return srcDB
	case "schema":
		return srcSchema
	case "table":
		return srcTable
	case "ts_ms":
		return srcTsMs
	case "lsn":
		return srcLSN
	case "sequence":
		return srcSequence
	}
	return -1
}

// sourceFields holds the source fields the plugin reads, as decoded; has has bit i set for
// a field present (its value may be nil, a JSON null).
type sourceFields struct {
	v   [nSourceFields]any
	has uint8
}

func (f *sourceFields) set(i int, v any) { f.v[i], f.has = v, f.has|1<<i }

func (f *sourceFields) asMap() map[string]any {
	m := make(map[string]any, nSourceFields)
	for i, name := range sourceNames {
		if f.has&(1<<i) != 0 {
			m[name] = f.v[i]
		}
	}
	return m
}

// lastMarkerSchema is the last transaction marker schema seen (consistency: transaction),
// apart from the change events' so that the two, which alternate on the set's loop, do not
// evict each other.
var lastMarkerSchema lastSchema

// decodeMarkerJSON decodes a transaction marker written by the JsonConverter as
// txn.DecodeMarkerJSON does, with the change events' decoder: a schema whose text was seen
// last is skipped rather than decoded again (txn.DecodeMarkerJSON decodes the whole record
// with encoding/json, some 30 µs a marker, a quarter of the set loop's time in the bench).
// Whatever that decoder does not take (invalid JSON, a schema it does not parse) goes to
// txn.DecodeMarkerJSON, which words the error.
func decodeMarkerJSON(data []byte) (txn.Marker, error) {
	p, _, err := parseJSON(data, &lastMarkerSchema)
	if err != nil {
		return txn.DecodeMarkerJSON(data)
	}
	return txn.DecodeMarker(p)
}
