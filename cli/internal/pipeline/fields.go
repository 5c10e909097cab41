package pipeline

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
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

	required string // for a field Validate requires: what it holds, in the file's words
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
				fields = append(fields, fileField{path: join(path, key), index: at, field: field, kind: kind, required: f.Tag.Get("required")})
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[yaml.Node]() {
				walk(join(path, key), f.Type, at)
			}
		}
	}
	walk("", reflect.TypeFor[rawFile](), nil)
	return fields, keys
}

// configFields maps sink.Config fields to the file's paths; requiredText maps those a
// required tag describes to its text.
var configFields, requiredText = func() (paths, required map[string]string) {
	paths, required = map[string]string{}, map[string]string{}
	for _, f := range fileFields {
		paths[f.field] = f.path
		if f.required != "" {
			required[f.field] = f.required
		}
	}
	return paths, required
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
func fieldPath(field string) string { return pathOf(field, nil) }

// pathOf is fieldPath with topics, the file's paths of Config.Topics (the topics the loader
// read, in their order), for the index of Topics[i].
func pathOf(field string, topics []string) string {
	name, index, _ := strings.Cut(field, "[")
	if i, err := strconv.Atoi(strings.TrimSuffix(index, "]")); name == "Topics" && err == nil && i >= 0 && i < len(topics) {
		return topics[i]
	}
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

// goName finds the Go names of fields in a *sink.ConfigError's reason: compound names
// (MaxBatchBytes, GroupID), indexed names (Topics[0], Kafka[group.id]) and any name after
// "set " (set Brokers).
var goName = regexp.MustCompile(`\bset [A-Z][A-Za-z0-9]*\b|\b[A-Z][A-Za-z0-9]*\[[^\]\s]*\]|\b[A-Z][a-z0-9]*[A-Z][A-Za-z0-9]*\b`)

// fileReason rewrites a *sink.ConfigError's reason for the file: the fields it names by their
// Go names ("less than MaxBatchBytes", "set GroupID") become the file's paths ("less than
// batch.max_bytes", "set kafka.group"). Other one-word names (Kafka, Schema) are also plain
// words, and are left alone.
func fileReason(reason string) string { return fileText(reason, nil) }

// fileText is fileReason with topics, as for pathOf.
func fileText(reason string, topics []string) string {
	return goName.ReplaceAllStringFunc(reason, func(w string) string {
		prefix, name := "", w
		if rest, ok := strings.CutPrefix(w, "set "); ok {
			prefix, name = "set ", rest
		}
		field, _, indexed := strings.Cut(name, "[")
		if _, ok := configFields[field]; !ok {
			return w
		}
		if indexed {
			return prefix + pathOf(name, topics)
		}
		return prefix + configFields[field]
	})
}
