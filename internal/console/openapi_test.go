package console_test

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/console"
	"github.com/eosink/eosink/internal/opsview"
)

// openAPIDoc is the part of docs/openapi.yaml the test reads.
type openAPIDoc struct {
	Paths      map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]any `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

// schemaTypes are the Go types each documented schema describes.
var schemaTypes = map[string]reflect.Type{
	"Error":            reflect.TypeFor[console.ErrorBody](),
	"Summary":          reflect.TypeFor[opsview.Summary](),
	"StoppedPartition": reflect.TypeFor[opsview.Stopped](),
	"UnownedPartition": reflect.TypeFor[opsview.Unowned](),
	"Lease":            reflect.TypeFor[admin.Lease](),
	"PipelineDetail":   reflect.TypeFor[console.PipelineDetail](),
	"Position":         reflect.TypeFor[admin.Position](),
	"Stop":             reflect.TypeFor[admin.Stop](),
	"Unowned":          reflect.TypeFor[admin.Unowned](),
	"DeadLetterPage":   reflect.TypeFor[console.DeadLetterPage](),
	"DeadLetter":       reflect.TypeFor[admin.DeadLetter](),
	"DeadLetterDetail": reflect.TypeFor[opsview.DeadLetter](),
	"Header":           reflect.TypeFor[opsview.Header](),
	"ReplayResponse":   reflect.TypeFor[console.ReplayResponse](),
	"DiscardResult":    reflect.TypeFor[console.DiscardResult](),
	"MoveRequest":      reflect.TypeFor[console.MoveRequest](),
	"MoveResult":       reflect.TypeFor[console.MoveResult](),
	"Change":           reflect.TypeFor[admin.Change](),
	"AuditPage":        reflect.TypeFor[console.AuditPage](),
	"MoveAuditEntry":   reflect.TypeFor[admin.MoveAuditEntry](),
	"DeadLetterAudit":  reflect.TypeFor[opsview.AuditEntry](),
	"ActionRequest":    reflect.TypeFor[console.ActionRequest](),
	"HistoryPage":      reflect.TypeFor[console.HistoryPage](),
	"Sample":           reflect.TypeFor[console.Sample](),
}

// jsonFields returns the JSON names encoding/json writes for t's fields, with embedded
// structs' fields promoted (a name set on both levels counts once, the outer's).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			for _, name := range jsonFields(f.Type) {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPI: docs/openapi.yaml documents every route of the handler and no other, and each
// schema's properties are the JSON fields of the Go type it describes.
func TestOpenAPI(t *testing.T) {
	data, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete", "head", "options":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	routed := console.Routes()
	sort.Strings(documented)
	sort.Strings(routed)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("docs/openapi.yaml documents %s, which the handler does not route", d)
		}
	}
	if len(routed) < 8 {
		t.Fatalf("routes %v: want the eight endpoints", routed)
	}
	for name, typ := range schemaTypes {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		if want := jsonFields(typ); !slices.Equal(props, want) {
			t.Errorf("schema %s has properties %v; %s's JSON fields are %v", name, props, typ, want)
		}
	}
	for name := range doc.Components.Schemas {
		if _, ok := schemaTypes[name]; !ok {
			t.Errorf("schema %s describes no type the test knows: add it to schemaTypes", name)
		}
	}
	// Every $ref names a schema, parameter or response that exists.
	for _, ref := range refs(string(data)) {
		parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
		if len(parts) != 2 || !strings.Contains(string(data), "\n    "+parts[1]+":") {
			t.Errorf("$ref %s names nothing", ref)
		}
	}
}

// refs returns the $ref targets of a document.
func refs(doc string) []string {
	var out []string
	for _, part := range strings.Split(doc, `$ref: "`)[1:] {
		ref, _, _ := strings.Cut(part, `"`)
		out = append(out, ref)
	}
	return out
}
