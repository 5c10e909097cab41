package plugin

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/eosink/eosink/sink"
)

// Factory builds a sink.Plugin from its section of a pipeline config. It must do no I/O: the
// database is checked later, by Prepare and Open.
type Factory func(cfg Config) (sink.Plugin, error)

var registry struct {
	sync.RWMutex
	m map[string]Factory
}

// Register makes a plugin available by name to config files (`sink: {type: name}`) and to
// Build. Call it from an init function of the plugin's package; a custom eosink binary
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
// struct C: the factory decodes the plugin's section into a C with Config.Decode, so that
// unknown keys are errors, then calls build with the section and the C (filled from the rest
// of the section when some keys were unknown, so that their errors come with build's). Build
// reports an error from build against the section. With it an init function is one line:
//
//	func init() { plugin.RegisterConfig("table", func(_ plugin.Config, c Config) (*Table, error) { return New(c) }) }
func RegisterConfig[C any, P sink.Plugin](name string, build func(cfg Config, c C) (P, error)) {
	Register(name, func(cfg Config) (sink.Plugin, error) {
		var c C
		// The other problems are reported with the unknown keys: build gets the rest.
		unknown, err := cfg.decode(&c)
		if err != nil {
			return nil, joinErrors(append(unknown, err))
		}
		p, err := build(cfg, c)
		if err != nil {
			return nil, joinErrors(append(unknown, sectionErrors(cfg.Path, yamlKeys(reflect.TypeFor[C]()), err)))
		}
		if len(unknown) > 0 {
			return nil, joinErrors(unknown)
		}
		return p, nil
	})
}

// sectionErrors turns the error of a plugin's build into *sink.ConfigError values with full
// paths, joined: each error of a joined error (errors.Join) separately, and each line of a
// message that joins several. A message "columns.sku.cast: unknown cast" whose first
// segment is one of keys (the yaml keys of the plugin's config) becomes the field
// path+".columns.sku.cast"; other messages stay on path. *sink.ConfigError values are kept:
// they have their full path already.
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
		var ce *sink.ConfigError
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

// lineError is one line of a plugin's error as a *sink.ConfigError.
func lineError(path string, keys map[string]bool, line string) *sink.ConfigError {
	if m := fieldPrefix.FindStringSubmatch(line); m != nil && keys[m[1]] {
		return &sink.ConfigError{Field: path + "." + m[1] + m[2], Reason: line[len(m[0]):]}
	}
	return &sink.ConfigError{Field: path, Reason: line}
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
	names, _, _ := structKeys(t)
	for _, k := range names {
		keys[k] = true
	}
	return keys
}

// registered names the registered plugins for messages.
func registered() string {
	if names := Names(); len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "none"
}

// Names returns the registered plugin names, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Build builds the plugin that cfg's "type" names. Errors are *sink.ConfigError values, or
// several joined with errors.Join when the plugin found several problems (a plugin
// registered with RegisterConfig gets each on its field: see sectionErrors).
func Build(cfg Config) (sink.Plugin, error) {
	name := cfg.Type()
	if name == "" {
		return nil, &sink.ConfigError{Field: cfg.Path + ".type", Reason: fmt.Sprintf("required: one of %s", registered())}
	}
	registry.RLock()
	f := registry.m[name]
	registry.RUnlock()
	if f == nil {
		return nil, &sink.ConfigError{Field: cfg.Path + ".type", Reason: fmt.Sprintf("unknown plugin %q; registered: %s (a custom plugin must be compiled into the binary)", name, registered())}
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
