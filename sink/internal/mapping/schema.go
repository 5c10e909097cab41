package mapping

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/schemaformat"
	"github.com/eosink/eosink/sink/plugin"
)

// This file reads the sides with a schema'd format (avro, protobuf, json_schema): the side
// is decoded once per record into a tree (see package schemaformat), paths walk the tree,
// leaves render with schemaformat.Text and subtrees with schemaformat.JSON.

// Decoder decodes a key or value in the Confluent wire format. *schemaformat.Decoder is
// one; its errors classify as RecordError describes.
type Decoder interface {
	Decode(f schemaformat.Format, data []byte) (schemaformat.Message, error)
}

// schemaFormat is f as package schemaformat names it.
func (f Format) schemaFormat() schemaformat.Format {
	switch f {
	case Protobuf:
		return schemaformat.Protobuf
	case JSONSchema:
		return schemaformat.JSONSchema
	}
	return schemaformat.Avro
}

// decode decodes a schema'd side on first use.
func (rd *reader) decode(s *side) error {
	if s.scanned {
		return s.err
	}
	s.scanned = true
	if rd.dec == nil {
		s.err = fmt.Errorf("the %v format needs a schema registry decoder (the mapping did not pass Validate)", s.format)
		return s.err
	}
	msg, err := rd.dec.Decode(s.format.schemaFormat(), s.data)
	if err != nil {
		s.err = err
		return err
	}
	s.tree = msg.Value
	return nil
}

// schemaValue returns the value of src, a whole side or a path into it, for a side with a
// schema'd format. array says the column is a PostgreSQL array.
func (rd *reader) schemaValue(s *side, src Source, array bool, why string, buf []byte) (result, []byte, error) {
	if s.data == nil {
		return absent(why), buf, nil
	}
	if err := rd.decode(s); err != nil {
		return result{}, buf, err
	}
	v, ok := walk(s.tree, src.arg)
	if !ok {
		return absent("field absent"), buf, nil
	}
	switch x := v.(type) {
	case nil:
		return null("null"), buf, nil
	case string:
		if err := checkText(x); err != nil {
			return result{}, buf, err
		}
		return direct(x), buf, nil // the tree is the record's own: no copy needed
	case []byte:
		return direct(x), buf, nil
	case []any:
		if array {
			start := len(buf)
			buf, err := appendArrayLiteral(buf, x, 0)
			if err != nil {
				return result{}, buf[:start], err
			}
			return result{kind: resBuf, start: start, end: len(buf)}, buf, nil
		}
		return appendJSONResult(buf, x)
	case map[string]any:
		return appendJSONResult(buf, x)
	}
	t, err := schemaformat.Text(v)
	if err != nil {
		return result{}, buf, textError(err)
	}
	return direct(t), buf, nil
}

// appendJSONResult appends v's JSON text to buf, for json and jsonb columns.
func appendJSONResult(buf []byte, v any) (result, []byte, error) {
	start := len(buf)
	out, err := schemaformat.AppendJSON(buf, v)
	if err != nil { // out is nil then
		return result{}, buf[:start], textError(err)
	}
	return result{kind: resBuf, start: start, end: len(out)}, out, nil
}

// textError maps schemaformat's ErrNotText to ErrInvalidText.
func textError(err error) error {
	if errors.Is(err, schemaformat.ErrNotText) {
		return &detailError{ErrInvalidText, err.Error()}
	}
	return err
}

// walk returns the node at path (segments joined by NUL, "" for the root) in tree. A
// segment indexes a []any when it is made of digits only, and names a key of a map, as
// paths do in JSON. ok is false when a segment is missing or the path goes through a leaf.
func walk(tree any, path string) (any, bool) {
	v := tree
	for path != "" {
		seg := path
		if i := strings.IndexByte(path, 0); i >= 0 {
			seg, path = path[:i], path[i+1:]
		} else {
			path = ""
		}
		switch n := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = n[seg]; !ok {
				return nil, false
			}
		case []any:
			i := arrayIndex(seg)
			if i < 0 || i >= len(n) {
				return nil, false
			}
			v = n[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// appendArrayLiteral appends a as a PostgreSQL array literal, {"a","b",NULL}: every element
// quoted (PostgreSQL reads "12" into an integer[] too), nested arrays as nested braces,
// bytes in bytea's hex form, records and maps as JSON text.
func appendArrayLiteral(buf []byte, a []any, depth int) ([]byte, error) {
	if depth > 6 { // PostgreSQL arrays have at most 6 dimensions
		return buf, &detailError{ErrInvalidText, "array nests deeper than PostgreSQL's 6 dimensions"}
	}
	buf = append(buf, '{')
	for i, e := range a {
		if i > 0 {
			buf = append(buf, ',')
		}
		var text string
		switch x := e.(type) {
		case nil:
			buf = append(buf, "NULL"...)
			continue
		case []any:
			var err error
			if buf, err = appendArrayLiteral(buf, x, depth+1); err != nil {
				return buf, err
			}
			continue
		case []byte:
			const digits = "0123456789abcdef"
			b := make([]byte, 0, 2+2*len(x))
			b = append(b, '\\', 'x')
			for _, c := range x {
				b = append(b, digits[c>>4], digits[c&15])
			}
			text = string(b)
		case map[string]any:
			j, err := schemaformat.JSON(x)
			if err != nil {
				return buf, textError(err)
			}
			text = string(j)
		default:
			t, err := schemaformat.Text(x)
			if err != nil {
				return buf, textError(err)
			}
			text, _ = t.(string)
		}
		buf = append(buf, '"')
		for k := 0; k < len(text); k++ {
			if c := text[k]; c == '"' || c == '\\' {
				buf = append(buf, '\\')
			}
			buf = append(buf, text[k])
		}
		buf = append(buf, '"')
	}
	return append(buf, '}'), nil
}

// RecordError turns an error of Row or Extract on r into the error a plugin's Write
// returns: a schema registry that cannot be reached is transient (sink.Transient: the batch
// is retried, nothing is skipped); any other registry failure (401, 403, a URL that is not
// a registry) is a *RegistryConfigError, which stops the partition, since the configuration
// is wrong; anything else is about the record and makes it poison (sink.Poison).
func RecordError(r *sink.Record, err error) error {
	if errors.Is(err, schemaformat.ErrRegistryUnavailable) {
		return sink.Transient(err)
	}
	var re *schemaformat.RegistryError
	if errors.As(err, &re) {
		return &RegistryConfigError{Err: re, msg: err.Error()}
	}
	return sink.Poison(r, err)
}

// RegistryConfigError is a schema registry's refusal that retrying cannot fix (401, 403, a
// URL that is not a registry). It matches *schemaformat.RegistryError with errors.As but
// hides the rest of the chain: the *url.Error that net/http wraps a refusal in would
// otherwise count as a lost connection and be retried forever.
type RegistryConfigError struct {
	Err *schemaformat.RegistryError
	msg string
}

func (e *RegistryConfigError) Error() string {
	return "schema registry refused the request (check schema_registry's url and credentials): " + e.msg
}

// As matches a **schemaformat.RegistryError target, and nothing under it.
func (e *RegistryConfigError) As(target any) bool {
	if p, ok := target.(**schemaformat.RegistryError); ok {
		*p = e.Err
		return true
	}
	return false
}

// shared holds the decoders made by NewDecoder, one per registry configuration.
var shared struct {
	sync.Mutex
	m map[schemaformat.Config]*schemaformat.Decoder
}

// NewDecoder returns the decoder for reg, shared by every caller with the same settings in
// the process (so that the plugins of a pipeline share one registry client and one schema
// cache). It makes no request; it reads the TLS files. Shared decoders are never closed.
func NewDecoder(reg *plugin.SchemaRegistry) (*schemaformat.Decoder, error) {
	if reg == nil {
		return nil, errors.New("no schema registry configured")
	}
	cfg := schemaformat.Config{URL: reg.URL, Username: reg.Username, Password: reg.Password,
		BearerToken: reg.BearerToken, Timeout: reg.Timeout,
		TLS: schemaformat.TLSConfig{CAFile: reg.TLS.CAFile, CertFile: reg.TLS.CertFile, KeyFile: reg.TLS.KeyFile,
			InsecureSkipVerify: reg.TLS.InsecureSkipVerify}}
	shared.Lock()
	defer shared.Unlock()
	if d := shared.m[cfg]; d != nil {
		return d, nil
	}
	d, err := schemaformat.New(cfg)
	if err != nil {
		return nil, err
	}
	if shared.m == nil {
		shared.m = map[schemaformat.Config]*schemaformat.Decoder{}
	}
	shared.m[cfg] = d
	return d, nil
}

// SetDecoder sets m.Decoder from reg when one of m's sides has a schema'd format; it
// reports a missing registry as an error naming the option (keyOpt or valueOpt) that asks
// for the format.
func (m *Mapping) SetDecoder(reg *plugin.SchemaRegistry, keyOpt, valueOpt string) error {
	if !m.Key.Schemad() && !m.Value.Schemad() {
		return nil
	}
	if reg == nil {
		opt, f := valueOpt, m.Value
		if m.Key.Schemad() {
			opt, f = keyOpt, m.Key
		}
		return fmt.Errorf("%s: %v needs the pipeline's schema_registry section (its url at least)", opt, f)
	}
	d, err := NewDecoder(reg)
	if err != nil {
		return fmt.Errorf("schema_registry: %w", err)
	}
	m.Decoder = d
	return nil
}
