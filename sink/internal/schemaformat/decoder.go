package schemaformat

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/rest"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"github.com/hamba/avro/v2"
)

// Format is a schema'd encoding in the Confluent wire format.
type Format string

const (
	Avro       Format = "avro"
	Protobuf   Format = "protobuf"
	JSONSchema Format = "json_schema"
)

// ParseFormat parses "avro", "protobuf" or "json_schema".
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Avro, Protobuf, JSONSchema:
		return f, nil
	}
	return "", fmt.Errorf("schemaformat: unknown format %q (want avro, protobuf or json_schema)", s)
}

// schemaType is the registry's name for the schema type of f.
func (f Format) schemaType() string {
	switch f {
	case Protobuf:
		return "PROTOBUF"
	case JSONSchema:
		return "JSON"
	}
	return "AVRO"
}

// Decoder decodes keys and values in the Confluent wire format with the schemas of one
// Schema Registry. Each schema is fetched once, on the first record that names its id,
// and kept with its parsed form (ids are immutable in a registry), up to
// maxCachedSchemaBytes of schema text: past it the cache starts again empty, so producers
// that register schemas (auto.register.schemas, the serializers' default) cannot grow the
// process without bound. A Decoder is safe for concurrent use.
type Decoder struct {
	client schemaregistry.Client
	proto  *protobuf.Deserializer
	json   *jsonschema.Deserializer

	mu      sync.RWMutex
	schemas map[schemaKey]*compiled
	bytes   int // schema text held by schemas
}

const (
	// defaultMaxCachedSchemaBytes bounds the schema text a Decoder keeps parsed (its
	// parsed forms take a few times more memory).
	defaultMaxCachedSchemaBytes = 16 << 20
	// clientCacheEntries bounds each of the registry client's caches (LRU).
	clientCacheEntries = 256
)

// maxCachedSchemaBytes is defaultMaxCachedSchemaBytes; tests lower it.
var maxCachedSchemaBytes = defaultMaxCachedSchemaBytes

type schemaKey struct {
	format Format
	id     int
}

// compiled is a schema parsed for one format.
type compiled struct {
	avro  *avroSchema
	proto *protoSchema
}

// New returns a Decoder for the registry that cfg describes. It makes no request.
func New(cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conf, err := cfg.clientConfig()
	if err != nil {
		return nil, err
	}
	client, err := schemaregistry.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("schemaformat: registry client: %w", err)
	}
	// Look schemas up by id alone: the id names one schema whatever the subject, and the
	// cache then holds one entry per id.
	byID := func(string, serde.Type, schemaregistry.SchemaInfo) (string, error) { return "", nil }
	pd, err := protobuf.NewDeserializer(client, serde.ValueSerde, protobuf.NewDeserializerConfig())
	if err != nil {
		return nil, fmt.Errorf("schemaformat: protobuf deserializer: %w", err)
	}
	pd.SubjectNameStrategy = byID
	jd, err := jsonschema.NewDeserializer(client, serde.ValueSerde, jsonschema.NewDeserializerConfig())
	if err != nil {
		return nil, fmt.Errorf("schemaformat: json schema deserializer: %w", err)
	}
	jd.SubjectNameStrategy = byID
	return &Decoder{client: client, proto: pd, json: jd, schemas: make(map[schemaKey]*compiled)}, nil
}

// Close releases the registry client.
func (d *Decoder) Close() error { return d.client.Close() }

// Message is a decoded key or value.
type Message struct {
	// Value is the decoded tree: see the package documentation for its types. It is nil
	// for a null record (a tombstone).
	Value any
	// SchemaID is the id from the wire-format header, 0 for a null record.
	SchemaID int

	connect *connectNode // Avro only: the Kafka Connect types of the schema's nodes
	avro    avro.Schema  // Avro only: the writer's schema
}

// Decode decodes data, a key or a value in format f. A nil data is a null record (a
// tombstone) and gives a zero Message; empty but non-nil data is malformed.
//
// The error matches ErrMalformed, ErrUnknownSchema or ErrBadSchema when the record is
// poison (see IsPoison), or is a *RegistryError, matching ErrRegistryUnavailable when the
// registry could not answer and the same record should be retried later.
func (d *Decoder) Decode(f Format, data []byte) (Message, error) {
	if data == nil {
		return Message{}, nil
	}
	h, body, err := parseHeader(data, f == Protobuf)
	if err != nil {
		return Message{}, err
	}
	c, err := d.schema(f, h.schemaID)
	if err != nil {
		return Message{}, err
	}
	m := Message{SchemaID: h.schemaID}
	switch f {
	case Avro:
		m.Value, err = c.avro.decode(body)
		m.connect, m.avro = c.avro.connect, c.avro.schema
	case Protobuf:
		m.Value, err = d.decodeProtobuf(c.proto, h, data)
	case JSONSchema:
		m.Value, err = d.decodeJSON(data)
	default:
		return Message{}, fmt.Errorf("schemaformat: unknown format %q", f)
	}
	if err != nil {
		if !IsPoison(err) && !errors.Is(err, ErrRegistryUnavailable) {
			var re *RegistryError
			if !errors.As(err, &re) {
				err = fmt.Errorf("%w: schema %d: %v", ErrMalformed, h.schemaID, err)
			}
		}
		return Message{}, err
	}
	return m, nil
}

// schema returns the schema id parsed for format f, fetching it on first use.
func (d *Decoder) schema(f Format, id int) (*compiled, error) {
	key := schemaKey{f, id}
	d.mu.RLock()
	c := d.schemas[key]
	d.mu.RUnlock()
	if c != nil {
		return c, nil
	}
	info, err := d.fetch(id)
	if err != nil {
		return nil, err
	}
	st := info.SchemaType
	if st == "" {
		st = "AVRO"
	}
	if st != f.schemaType() {
		return nil, badSchema(id, "schema type %s, but the format is %s", st, f)
	}
	c = &compiled{}
	switch f {
	case Avro:
		c.avro, err = d.compileAvro(id, info)
	case Protobuf:
		c.proto, err = d.compileProtobuf(id, info)
	}
	if err != nil {
		return nil, err
	}
	size := len(info.Schema)
	for _, r := range info.References {
		size += len(r.Name) + len(r.Subject)
	}
	d.mu.Lock()
	if d.bytes+size > maxCachedSchemaBytes {
		clear(d.schemas)
		d.bytes = 0
	}
	d.schemas[key] = c
	d.bytes += size
	d.mu.Unlock()
	return c, nil
}

// fetch gets schema id from the registry (or the client's cache) and classifies errors.
func (d *Decoder) fetch(id int) (schemaregistry.SchemaInfo, error) {
	info, err := d.client.GetBySubjectAndID("", id)
	if err != nil {
		return info, classify(id, err)
	}
	return info, nil
}

// fetchReference gets a referenced schema (subject and version) and classifies errors. A
// missing reference makes the schema unusable.
func (d *Decoder) fetchReference(id int, ref schemaregistry.Reference) (schemaregistry.SchemaInfo, error) {
	meta, err := d.client.GetSchemaMetadataIncludeDeleted(ref.Subject, ref.Version, true)
	if err != nil {
		var re *rest.Error
		if errors.As(err, &re) && re.Code/100 == 404 {
			return meta.SchemaInfo, badSchema(id, "reference %s version %d: %v", ref.Subject, ref.Version, err)
		}
		return meta.SchemaInfo, classify(id, err)
	}
	return meta.SchemaInfo, nil
}

// maxReferenceDepth bounds how deep references may nest (a cycle ends there too).
const maxReferenceDepth = 32

// walkReferences calls visit with each schema that info references, directly or through
// other references, each one after the schemas it references itself (a dependency comes
// before what needs it). Nesting deeper than maxReferenceDepth makes the schema unusable.
func (d *Decoder) walkReferences(id int, info schemaregistry.SchemaInfo, depth int, visit func(ref schemaregistry.Reference, ri schemaregistry.SchemaInfo) error) error {
	if depth > maxReferenceDepth {
		return badSchema(id, "references nest too deep")
	}
	for _, ref := range info.References {
		ri, err := d.fetchReference(id, ref)
		if err != nil {
			return err
		}
		if err := d.walkReferences(id, ri, depth+1, visit); err != nil {
			return err
		}
		if err := visit(ref, ri); err != nil {
			return err
		}
	}
	return nil
}

// classify turns an error of the registry client into ErrUnknownSchema or a
// *RegistryError.
func classify(id int, err error) error {
	var re *rest.Error
	if errors.As(err, &re) {
		if re.Code == 40403 {
			return fmt.Errorf("%w %d: %v", ErrUnknownSchema, id, err)
		}
		status := re.Code
		if status >= 10000 { // 40401, 50001...: the HTTP status with two more digits
			status /= 100
		}
		return &RegistryError{SchemaID: id, Status: status, Code: re.Code, Err: err}
	}
	var se *statusError
	if errors.As(err, &se) {
		return &RegistryError{SchemaID: id, Status: se.status, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return &RegistryError{SchemaID: id, Err: err}
	}
	// Anything else (an answer that is not JSON, a TLS failure) may be the registry or
	// the way to it: retrying is safe, skipping records is not.
	return &RegistryError{SchemaID: id, Err: err}
}
