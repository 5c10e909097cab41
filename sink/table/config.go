package table

import (
	"maps"
	"slices"

	"github.com/eosink/eosink/internal/suggest"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

// Config configures the table plugin.
type Config struct {
	// Table is the target, "table" or "schema.table", of every topic no route takes.
	// ${topic} in it is replaced by the record's topic (in a pipeline config file write
	// $${topic}). Required unless Routes is set; without it, a topic no route takes has no
	// route, which the sink refuses (sink.TopicRouter).
	Table string `yaml:"table"`
	// Columns maps each column to a source expression (see package doc). Required, unless
	// every route has its own.
	Columns map[string]Column `yaml:"columns"`
	// Where is a CEL condition over the record (see mapping.Expr): a record for which it is
	// false is not written; its offset commits with the batch and it counts as skipped
	// (sink.Skipped). Defaults to "": every record is written.
	Where string `yaml:"where"`
	// Check lists CEL conditions every record that Where keeps must meet: the first that is
	// false makes the record poison, with the check's message (dead-lettered per the sink's
	// on_poison). Defaults to none.
	Check []Check `yaml:"check"`
	// Routes send topics to tables of their own, tried in order before Table. Defaults to
	// none: every topic goes to Table.
	Routes []Route `yaml:"routes"`
	// KeyFormat and ValueFormat say how key and value decode: json, string, bytes, avro,
	// protobuf or json_schema. Default to string and json.
	KeyFormat   string `yaml:"key_format"`
	ValueFormat string `yaml:"value_format"`
	// SchemaRegistry is where the avro, protobuf and json_schema formats find their
	// schemas; required for them. From a config file it is the pipeline's schema_registry
	// section (plugin.Config.SchemaRegistry).
	SchemaRegistry *plugin.SchemaRegistry `yaml:"-"`
	// Create creates a missing table, in the transaction of the first batch that writes to
	// it, with the mapped columns typed from the registry schema of the batch's first
	// record that decodes (paths into avro keys and values; see mapping.ColumnTypes), and
	// for upsert its key as primary key. Defaults to false: a missing table fails Prepare.
	Create bool `yaml:"create"`
	// OnConflict is for the table plugin: "error", a row breaking a unique key is a data
	// error (poison), or "nothing", such a row is skipped (the first record of a key in a
	// batch is inserted) and counted as skipped (sink.Skipped), for example when records
	// are replayed into a table with a unique key. With nothing the batch is copied into a
	// temporary table and inserted with one INSERT ... ON CONFLICT DO NOTHING. Defaults to
	// error. In a config file it is the table section's on_conflict; the upsert plugin has
	// its own (UpsertConfig.OnConflict).
	OnConflict string `yaml:"-"`
}

// Column is one column's source. In a config file it is a string (the source expression) or
// a map {from: EXPR, expr: CEL, required: BOOL, cast: NAME, default: TEXT}.
type Column struct {
	From string `yaml:"from"`
	// Expr is a CEL expression whose result is the column's value (see mapping.Expr),
	// instead of From; Cast, Default and Required apply to it as to From's value, a null
	// result being a value not found. Defaults to "": From gives the value.
	Expr     string `yaml:"expr"`
	Required bool   `yaml:"required"`
	// Cast converts the value: epoch_s, epoch_ms, epoch_us or rfc3339 to timestamptz,
	// base64 to bytea, json (a string holding JSON) to jsonb; see mapping.Cast. Defaults to
	// none: the value as it is.
	Cast string `yaml:"cast"`
	// Default is the value when the source finds nothing (an absent field or header, a null
	// key or value); an explicit null stays NULL. It goes through Cast. Not with Required.
	// Defaults to nil: NULL.
	Default *string `yaml:"default"`

	problems []mapping.Problem // what UnmarshalYAML refused, reported by New with the column's path
}

// ConfigKeys lists the keys of a column's map form (plugin.KeyLister), so that
// plugin.Config.Decode reports any other key at its path with a suggestion.
func (*Column) ConfigKeys() []string { return mapping.SpecKeys() }

// UnmarshalYAML accepts "value.x" or {from: value.x (or expr: CEL), required: true, cast: epoch_ms,
// default: "0"}, decoded as the sql plugin's parameters are (mapping.DecodeSpec). It
// refuses nothing itself: each problem is kept and reported by New, with the column's path,
// together with every other problem of the section.
func (c *Column) UnmarshalYAML(unmarshal func(any) error) error {
	s := mapping.DecodeSpec(unmarshal, "a column")
	*c = Column{From: s.From, Expr: s.Expr, Required: s.Required, Cast: s.Cast, Default: s.Default, problems: s.Problems}
	return nil
}

// spec is c as mapping.Spec.Column checks it.
func (c Column) spec() mapping.Spec {
	return mapping.Spec{From: c.From, Expr: c.Expr, Required: c.Required, Cast: c.Cast, Default: c.Default, Problems: c.problems}
}

// Check is one condition of Config.Check. In a config file it is a string (the CEL
// condition) or a map {expr: CEL, message: TEXT}.
type Check struct {
	// Expr is the CEL condition. Required.
	Expr string `yaml:"expr"`
	// Message is the poison's reason when Expr is false. Defaults to "check failed: EXPR".
	Message string `yaml:"message"`

	problems []mapping.Problem
}

var checkKeys = []string{"expr", "message"}

// ConfigKeys lists the keys of a check's map form (plugin.KeyLister).
func (*Check) ConfigKeys() []string { return checkKeys }

// UnmarshalYAML accepts "EXPR" or {expr: EXPR, message: TEXT}; like Column's, it keeps its
// problems for New to report with the check's path.
func (c *Check) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		c.Expr = s
		return nil
	}
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		c.problems = append(c.problems, mapping.Problem{Key: "", Reason: "a check is a CEL condition or {expr: CEL, message: TEXT}"})
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		switch {
		case k != "expr" && k != "message":
			c.problems = append(c.problems, mapping.Problem{Key: k, Reason: suggest.UnknownKey("a check", k, checkKeys)})
		case !ok:
			c.problems = append(c.problems, mapping.Problem{Key: k, Reason: "want a string"})
		case k == "expr":
			c.Expr = s
		default:
			c.Message = s
		}
	}
	return nil
}

// tableSection is the table plugin's config section: Config and on_conflict.
type tableSection struct {
	Config     `yaml:",inline"`
	OnConflict string `yaml:"on_conflict"`
}
