package pipeline

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink"
)

// This file derives, from rawFile's tags, the file's keys and the sink.Config fields they
// set. A key's config tag names its field and, after a comma, how setFields converts the
// value (a kind of conversions); without a kind, load converts the value itself.

// fileField is a key of the file that sets a sink.Config field.
type fileField struct {
	path  string // in the file: "batch.max_bytes"
	index []int  // of its node in rawFile, for reflect.Value.FieldByIndex
	field string // in sink.Config: "MaxBatchBytes"
	kind  string // a key of conversions, or "" when load converts the value
}

// fileFields are the keys with a config tag, in the file's order; knownKeys maps each
// section's path ("" for the top level) to its keys.
var fileFields, knownKeys = walkRaw()

func walkRaw() (fields []fileField, keys map[string][]string) {
	keys = map[string][]string{}
	var walk func(path string, t reflect.Type, index []int)
	walk = func(path string, t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			keys[path] = append(keys[path], key)
			at := append(slices.Clone(index), i)
			if field, kind, _ := strings.Cut(f.Tag.Get("config"), ","); field != "" {
				fields = append(fields, fileField{path: join(path, key), index: at, field: field, kind: kind})
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[yaml.Node]() {
				walk(join(path, key), f.Type, at)
			}
		}
	}
	walk("", reflect.TypeFor[rawFile](), nil)
	return fields, keys
}

// configFields maps sink.Config fields to the file's paths.
var configFields = func() map[string]string {
	m := map[string]string{}
	for _, f := range fileFields {
		m[f.field] = f.path
	}
	return m
}()

// notInFile are the sink.Config fields a file cannot set, with the path that errors about
// them name ("": Config.<field>).
var notInFile = map[string]string{
	"Pool": "database.url", "Handler": "sink", "Registerer": "(metrics)", "TracerProvider": "",
}

// conversions convert a value of the file for a config tag's kind.
var conversions = map[string]func(l *loader, path string, n *yaml.Node) any{
	"string":   convert((*loader).str),
	"bool":     convert((*loader).boolean),
	"count":    convert((*loader).count),
	"size":     convert((*loader).size),
	"duration": convert((*loader).duration),
	"ratio":    convert((*loader).ratio),
}

func convert[T string | bool | int | float64 | time.Duration](f func(*loader, string, *yaml.Node) T) func(*loader, string, *yaml.Node) any {
	return func(l *loader, path string, n *yaml.Node) any { return f(l, path, n) }
}

// setFields converts the values whose config tag has a kind and sets their fields of c.
func (l *loader) setFields(raw *rawFile, c *sink.Config) {
	rv, cv := reflect.ValueOf(raw).Elem(), reflect.ValueOf(c).Elem()
	for _, f := range fileFields {
		if conv := conversions[f.kind]; conv != nil {
			dst := cv.FieldByName(f.field)
			v := conv(l, f.path, rv.FieldByIndex(f.index).Addr().Interface().(*yaml.Node))
			dst.Set(reflect.ValueOf(v).Convert(dst.Type()))
		}
	}
}

// fieldPath maps a sink.Config field name, perhaps with an index ("Topics[0]",
// "Kafka[sasl.mechanism]"), to the file's path.
func fieldPath(field string) string {
	name, index, _ := strings.Cut(field, "[")
	path, ok := configFields[name]
	if !ok {
		path = notInFile[name]
	}
	if path == "" {
		return "Config." + field
	}
	if index != "" {
		path += "[" + index
	}
	return path
}

// compoundName finds words written like a Go field name of two or more parts: MaxBatchBytes,
// GroupID.
var compoundName = regexp.MustCompile(`\b[A-Z][a-z0-9]*[A-Z][A-Za-z0-9]*\b`)

// fileReason rewrites a *sink.ConfigError's reason for the file: the fields it names by their
// Go names ("less than MaxBatchBytes") become the file's paths ("less than batch.max_bytes").
// Only compound names are rewritten: one-word names (Kafka, Schema) are also plain words.
func fileReason(reason string) string {
	return compoundName.ReplaceAllStringFunc(reason, func(w string) string {
		if path, ok := configFields[w]; ok {
			return path
		}
		return w
	})
}
