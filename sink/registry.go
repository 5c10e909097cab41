package sink

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Factory builds a Plugin from its section of a pipeline config. It must do no I/O: the
// database is checked later, by Prepare and Open.
type Factory func(cfg PluginConfig) (Plugin, error)

// quoted matches the value yaml quotes in its type errors.
var quoted = regexp.MustCompile("`[^`]*`")

var registry struct {
	sync.RWMutex
	m map[string]Factory
}

// Register makes a plugin available by name to config files (`sink: {type: name}`) and to
// BuildPlugin. Call it from an init function of the plugin's package; a custom eosink binary
// then imports that package for its side effect. Register panics if name is empty or taken,
// like database/sql.Register.
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" || f == nil {
		panic("eosink: Register with an empty name or nil factory")
	}
	if registry.m == nil {
		registry.m = map[string]Factory{}
	}
	if _, dup := registry.m[name]; dup {
		panic("eosink: Register called twice for plugin " + name)
	}
	registry.m[name] = f
}

// RegisterConfig registers name (see Register) with a factory for a plugin configured by a
// struct C: the factory decodes the plugin's section into a C with PluginConfig.Decode, so
// that unknown keys are errors, then calls build with the section and the C. BuildPlugin
// reports an error from build against the section. With it an init function is one line:
//
//	func init() { sink.RegisterConfig("table", func(_ sink.PluginConfig, c Config) (*Table, error) { return New(c) }) }
func RegisterConfig[C any, P Plugin](name string, build func(cfg PluginConfig, c C) (P, error)) {
	Register(name, func(cfg PluginConfig) (Plugin, error) {
		var c C
		if err := cfg.Decode(&c); err != nil {
			return nil, err
		}
		p, err := build(cfg, c)
		if err != nil {
			return nil, sectionErrors(cfg.Path, yamlKeys(reflect.TypeFor[C]()), err)
		}
		return p, nil
	})
}

// sectionErrors turns the error of a plugin's build into *ConfigError values with full
// paths, joined: each error of a joined error (errors.Join) separately, and each line of a
// message that joins several. A message "columns.sku.cast: unknown cast" whose first
// segment is one of keys (the yaml keys of the plugin's config) becomes the field
// path+".columns.sku.cast"; other messages stay on path. *ConfigError values are kept: they
// have their full path already.
func sectionErrors(path string, keys map[string]bool, err error) error {
	var out []error
	var walk func(err error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *ConfigError
		if errors.As(err, &ce) {
			out = append(out, err)
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			out = append(out, lineError(path, keys, line))
		}
	}
	walk(err)
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// fieldPrefix matches "field.path[1].more: " at the start of a message.
var fieldPrefix = regexp.MustCompile(`^([a-z_][a-z0-9_]*)((?:\[[0-9]+\]|\.[^\s:\[\]]+)*): `)

// lineError is one line of a plugin's error as a *ConfigError.
func lineError(path string, keys map[string]bool, line string) *ConfigError {
	if m := fieldPrefix.FindStringSubmatch(line); m != nil && keys[m[1]] {
		return &ConfigError{Field: path + "." + m[1] + m[2], Reason: line[len(m[0]):]}
	}
	return &ConfigError{Field: path, Reason: line}
}

// yamlKeys returns the yaml keys of the struct t (with its inline structs'), for
// sectionErrors.
func yamlKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return keys
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			for k := range yamlKeys(f.Type) {
				keys[k] = true
			}
		case name != "":
			keys[name] = true
		case f.IsExported():
			keys[strings.ToLower(f.Name)] = true
		}
	}
	return keys
}

// registered names the registered plugins for messages.
func registered() string {
	if names := Plugins(); len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "none"
}

// Plugins returns the registered plugin names, sorted.
func Plugins() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PluginConfig is one plugin's section of a pipeline config, with what the plugin may need
// to know about the pipeline.
type PluginConfig struct {
	// Path names the section in the config file, for errors: "sink", "sink.inner".
	Path string
	// Pipeline is the pipeline's name (Config.Pipeline).
	Pipeline string
	// Schema is the framework's schema (Config.Schema), where a plugin may keep its own
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
func (c PluginConfig) Type() string {
	s, _ := c.Raw["type"].(string)
	return s
}

// Decode fills v (a pointer to a struct with yaml tags) from the section, except its "type"
// key. Unknown keys are errors, so that a typo is not silently ignored. Errors are
// *ConfigError values naming the section.
func (c PluginConfig) Decode(v any) error {
	raw := make(map[string]any, len(c.Raw))
	for k, val := range c.Raw {
		if k != "type" {
			raw[k] = val
		}
	}
	text, err := yaml.Marshal(raw)
	if err != nil {
		return &ConfigError{Field: c.Path, Reason: err.Error()}
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
		field := c.Path
		if m := unknownField.FindStringSubmatch(reason); m != nil && !strings.Contains(reason, ";") {
			field, reason = c.Path+"."+m[1], "unknown field"
		}
		return &ConfigError{Field: field, Reason: reason}
	}
	return nil
}

// unknownField matches yaml's error for a key the plugin's config does not have.
var unknownField = regexp.MustCompile(`^field (\S+) not found in type`)

// Sub returns the nested section under key, for plugins that wrap another (inbox).
func (c PluginConfig) Sub(key string) (PluginConfig, error) {
	sub := c
	sub.Path = c.Path + "." + key
	m, ok := c.Raw[key].(map[string]any)
	if !ok {
		return sub, &ConfigError{Field: sub.Path, Reason: "required: a plugin section with a type"}
	}
	sub.Raw = m
	return sub, nil
}

// BuildPlugin builds the plugin that cfg's "type" names. Errors are *ConfigError values, or
// several joined with errors.Join when the plugin found several problems (a plugin
// registered with RegisterConfig gets each on its field: see sectionErrors).
func BuildPlugin(cfg PluginConfig) (Plugin, error) {
	name := cfg.Type()
	if name == "" {
		return nil, &ConfigError{Field: cfg.Path + ".type", Reason: fmt.Sprintf("required: one of %s", registered())}
	}
	registry.RLock()
	f := registry.m[name]
	registry.RUnlock()
	if f == nil {
		return nil, &ConfigError{Field: cfg.Path + ".type", Reason: fmt.Sprintf("unknown plugin %q; registered: %s (a custom plugin must be compiled into the binary)", name, registered())}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("plugin", name)
	p, err := f(cfg)
	if err != nil {
		return nil, sectionErrors(cfg.Path, nil, err)
	}
	return p, nil
}
