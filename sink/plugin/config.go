package plugin

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink"
)

// Config is one plugin's section of a pipeline config, with what the plugin may need to know
// about the pipeline.
type Config struct {
	// Path names the section in the config file, for errors: "sink", "sink.inner".
	Path string
	// Pipeline is the pipeline's name (sink.Config.Pipeline).
	Pipeline string
	// Schema is the framework's schema (sink.Config.Schema), where a plugin may keep its own
	// tables unless configured otherwise.
	Schema string
	// Raw is the section as decoded from YAML or JSON: strings, numbers, booleans, nil,
	// []any and map[string]any. Its "type" key names the plugin.
	Raw map[string]any
	// Logger for the plugin. Defaults to slog.Default().
	Logger *slog.Logger
	// SchemaRegistry is the pipeline's Schema Registry (the schema_registry section of a
	// pipeline config file), nil when it has none. Plugins that decode the avro, protobuf
	// or json_schema formats need it, and refuse those formats without it.
	SchemaRegistry *SchemaRegistry
}

// Type returns the section's "type" value.
func (c Config) Type() string {
	s, _ := c.Raw["type"].(string)
	return s
}

// quoted matches the value yaml quotes in its type errors.
var quoted = regexp.MustCompile("`[^`]*`")

// Decode fills v (a pointer to a struct with yaml tags) from the section, except its "type"
// key. Unknown keys are errors, so that a typo is not silently ignored: each, at any depth,
// is a *sink.ConfigError naming its full path ("sink.routes[0].topik"), with what its
// section takes and, for a typo, the key meant ("unknown key (sink.routes[0] has topic,
// table, columns); did you mean topic?"). The keys of a type with its own UnmarshalYAML are
// checked when it is a KeyLister. Other errors are *sink.ConfigError values naming the
// section. Several errors are joined (errors.Join); v is filled from the rest of the section
// even when there are unknown keys.
func (c Config) Decode(v any) error {
	unknown, err := c.decode(v)
	return joinErrors(append(unknown, err))
}

// joinErrors joins the errors of errs that are not nil: nil for none, the error itself for
// one.
func joinErrors(errs []error) error {
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// decode is Decode, with the unknown keys' errors apart from the others.
func (c Config) decode(v any) (unknown []error, err error) {
	raw := make(map[string]any, len(c.Raw))
	for k, val := range c.Raw {
		if k != "type" {
			raw[k] = val
		}
	}
	var known any = raw
	if t := reflect.TypeOf(v); t != nil {
		known, unknown = unknownKeys(c.Path, raw, t, "type")
	}
	return unknown, decodeKnown(c.Path, known, v)
}

// decodeKnown decodes raw, whose keys were checked, into v.
func decodeKnown(path string, raw any, v any) error {
	text, err := yaml.Marshal(raw)
	if err != nil {
		return &sink.ConfigError{Field: path, Reason: err.Error()}
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		reason := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// Line numbers refer to the re-encoded section, not the file: drop them.
			parts := make([]string, len(te.Errors))
			for i, e := range te.Errors {
				if _, after, ok := strings.Cut(e, ": "); ok && strings.HasPrefix(e, "line ") {
					e = after
				}
				parts[i] = quoted.ReplaceAllString(e, "a value") // yaml quotes the value: it may be a secret
			}
			reason = strings.Join(parts, "; ")
		}
		field := path
		if m := unknownField.FindStringSubmatch(reason); m != nil && !strings.Contains(reason, ";") {
			field, reason = path+"."+m[1], "unknown field"
		}
		return &sink.ConfigError{Field: field, Reason: reason}
	}
	return nil
}

// unknownField matches yaml's error for a key the plugin's config does not have.
var unknownField = regexp.MustCompile(`^field (\S+) not found in type`)

// Sub returns the nested section under key, for plugins that wrap another (inbox).
func (c Config) Sub(key string) (Config, error) {
	sub := c
	sub.Path = c.Path + "." + key
	m, ok := c.Raw[key].(map[string]any)
	if !ok {
		return sub, &sink.ConfigError{Field: sub.Path, Reason: "required: a plugin section with a type"}
	}
	sub.Raw = m
	return sub, nil
}
