package plugin

import (
	"encoding"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/internal/suggest"
	"github.com/eosink/eosink/sink"
)

// KeyLister is implemented by a config type with its own UnmarshalYAML whose mapping form
// takes fixed keys (a column's {from, required, ...}): ConfigKeys lists them, in the order to
// show them, so that Config.Decode reports any other key at its full path with the keys
// taken and a suggestion, as for a struct's keys. Decode calls it on the zero value.
type KeyLister interface {
	ConfigKeys() []string
}

var (
	keyListerType     = reflect.TypeFor[KeyLister]()
	unmarshalerType   = reflect.TypeFor[yaml.Unmarshaler]()
	obsoleteUnmarshal = reflect.TypeFor[interface{ UnmarshalYAML(func(any) error) error }]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// unknownKeys returns a *sink.ConfigError for each key in raw (the section, or a value in it,
// at path) that the type t it decodes into does not take: a struct's yaml keys (those of its
// inline structs too), or a KeyLister's. Each names the key's full path
// ("sink.routes[0].topik", "sink.tables[inventory.orders].tabel"), what its section takes,
// and the key meant when it looks like a typo. Maps, lists and pointers are followed; a type
// that decodes itself without listing its keys, an interface, and a struct with an inline map
// take any key. Keys are visited in order, so that the errors are too. known is raw without
// those keys (a copy where it differs), for decoding what the section says besides them.
// also are keys raw itself may hold besides t's (a plugin section's type), listed first.
func unknownKeys(path string, raw any, t reflect.Type, also ...string) (known any, errs []error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	var keys []string
	switch {
	case pt.Implements(keyListerType):
		keys = reflect.New(t).Interface().(KeyLister).ConfigKeys()
	case pt.Implements(unmarshalerType) || pt.Implements(obsoleteUnmarshal) || pt.Implements(textUnmarshaler):
		return raw, nil
	}
	switch m, list := mapOf(raw), listOf(raw); {
	case keys != nil && m != nil:
		out := map[string]any{}
		for _, k := range sortedKeys(m) {
			if slices.Contains(keys, k) {
				out[k] = m[k]
			} else {
				errs = append(errs, unknownKey(path, k, keys))
			}
		}
		return out, errs
	case t.Kind() == reflect.Struct && m != nil:
		names, fields, anyKey := structKeys(t)
		if anyKey {
			return raw, nil
		}
		names = append(also, names...)
		out := map[string]any{}
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, unknownKey(path, k, names))
				continue
			}
			v, e := unknownKeys(joinKey(path, k), m[k], ft)
			out[k], errs = v, append(errs, e...)
		}
		return out, errs
	case t.Kind() == reflect.Map && m != nil:
		out := map[string]any{}
		for _, k := range sortedKeys(m) {
			v, e := unknownKeys(joinKey(path, k), m[k], t.Elem())
			out[k], errs = v, append(errs, e...)
		}
		return out, errs
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && list != nil:
		out := make([]any, len(list))
		for i, item := range list {
			v, e := unknownKeys(fmt.Sprintf("%s[%d]", path, i), item, t.Elem())
			out[i], errs = v, append(errs, e...)
		}
		return out, errs
	}
	return raw, nil
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }
func listOf(v any) []any         { l, _ := v.([]any); return l }

func unknownKey(path, key string, known []string) error {
	return &sink.ConfigError{Field: joinKey(path, key), Reason: suggest.UnknownKey(path, key, known)}
}

// structKeys returns the yaml keys of the struct t in its fields' order (with its inline
// structs'), the type each decodes into, and whether an inline map takes any other key.
func structKeys(t reflect.Type) (names []string, fields map[string]reflect.Type, anyKey bool) {
	fields = map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-", !f.IsExported() && !f.Anonymous:
		case strings.Contains(opts, "inline"):
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct {
				anyKey = true
				continue
			}
			n, fs, any := structKeys(ft)
			anyKey = anyKey || any
			names = append(names, n...)
			for k, v := range fs {
				fields[k] = v
			}
		default:
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			names = append(names, name)
			fields[name] = f.Type
		}
	}
	return names, fields, false
}

// joinKey appends a key to a path as the pipeline config file's errors write it: "sink" +
// "table" is "sink.table"; a key that is not a plain name is bracketed:
// "sink.tables[inventory.orders]".
func joinKey(path, key string) string {
	if plainKey.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + key + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
