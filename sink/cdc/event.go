package cdc

import (
	"bytes"
	"errors"
	"fmt"

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
