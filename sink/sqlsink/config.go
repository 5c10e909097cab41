package sqlsink

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/eosink/eosink/internal/kafkaconf"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

// Config configures the sql plugin.
type Config struct {
	// Params declares the named parameters the statements use, each with the source
	// expression of its value (see package doc). A statement refers to a parameter as
	// @name. Every parameter must be used by some statement. Defaults to none.
	Params map[string]Param `yaml:"params"`
	// Statements run for each record, in order, with the record's parameter values bound
	// by PostgreSQL (extended protocol): record data never becomes SQL text. They serve
	// every topic no route takes. Required unless Routes is set; without them, a topic no
	// route takes has no route, which the sink refuses (sink.TopicRouter).
	Statements []string `yaml:"statements"`
	// Routes give some topics statements of their own, tried in order before Statements.
	// Defaults to none: every topic runs Statements.
	Routes []Route `yaml:"routes"`
	// OnTombstone says what a record with a null value does: "poison" (it is refused as
	// poison: on_poison decides), "skip" (its offset is passed, counted as skipped), or
	// "statements" (TombstoneStatements run instead of Statements). Defaults to
	// "statements" when TombstoneStatements is set, otherwise "poison".
	OnTombstone string `yaml:"on_tombstone"`
	// TombstoneStatements run for each tombstone with OnTombstone "statements", for the
	// topics of Statements and of every route without its own. Their parameters must not
	// read the value, which a tombstone does not have. Defaults to none.
	TombstoneStatements []string `yaml:"tombstone_statements"`
	// KeyFormat and ValueFormat say how key and value decode: json, string, bytes, avro,
	// protobuf or json_schema. Default to string and json.
	KeyFormat   string `yaml:"key_format"`
	ValueFormat string `yaml:"value_format"`
	// SchemaRegistry is where the avro, protobuf and json_schema formats find their
	// schemas; required for them. From a config file it is the pipeline's schema_registry
	// section (plugin.Config.SchemaRegistry).
	SchemaRegistry *plugin.SchemaRegistry `yaml:"-"`
}

// Route gives the topics it matches statements of their own; the parameters are the
// section's.
type Route struct {
	// Topic is a topic name, or a regular expression when it starts with ^. Required.
	Topic string `yaml:"topic"`
	// Statements run for each record of the route's topics. Required.
	Statements []string `yaml:"statements"`
	// TombstoneStatements run for each tombstone with OnTombstone "statements". Defaults to
	// Config.TombstoneStatements.
	TombstoneStatements []string `yaml:"tombstone_statements"`
}

// Param is one named parameter's source, mapped as the table plugin's columns are (the
// same code: see package doc, "Casts and defaults"). In a config file it is a string (the
// source expression) or a map {from: EXPR, expr: CEL, required: BOOL, cast: NAME, default: TEXT}.
type Param struct {
	From string `yaml:"from"`
	// Expr is a CEL expression whose result is the parameter's value, instead of From, as
	// for the table plugin's columns (see mapping.Expr). Defaults to "": From gives it.
	Expr string `yaml:"expr"`
	// Required makes a missing value (absent field, JSON null, null key or value) poison;
	// otherwise the parameter is NULL. Not with Default. Defaults to false.
	Required bool `yaml:"required"`
	// Cast converts the value before it is bound: epoch_s, epoch_ms, epoch_us or rfc3339 to
	// RFC 3339 text for a timestamptz, base64 to bytes for a bytea, json (a string holding
	// JSON) to checked JSON text; see mapping.Cast. A value that does not cast makes its
	// record poison before any statement runs. Defaults to none: the value as it is, parsed
	// by PostgreSQL into the type it infers.
	Cast string `yaml:"cast"`
	// Default is the value when the source finds nothing (an absent field or header, a null
	// key or value); an explicit null stays NULL. It goes through Cast and is checked at
	// load. Not with Required. Defaults to nil: NULL.
	Default *string `yaml:"default"`

	problems []mapping.Problem // what UnmarshalYAML refused, reported by New with the parameter's path
}

// ConfigKeys lists the keys of a parameter's map form (plugin.KeyLister), so that
// plugin.Config.Decode reports any other key at its path with a suggestion.
func (*Param) ConfigKeys() []string { return mapping.SpecKeys() }

// UnmarshalYAML accepts "value.x" or {from: value.x, required: true, cast: rfc3339,
// default: TEXT}, decoded as the table plugin's columns are (mapping.DecodeSpec). It refuses
// nothing itself: each problem is kept and reported by New, with the parameter's path,
// together with every other problem of the section.
func (p *Param) UnmarshalYAML(unmarshal func(any) error) error {
	s := mapping.DecodeSpec(unmarshal, "a parameter")
	*p = Param{From: s.From, Expr: s.Expr, Required: s.Required, Cast: s.Cast, Default: s.Default, problems: s.Problems}
	return nil
}

// spec is p as mapping.Spec.Column checks it.
func (p Param) spec() mapping.Spec {
	return mapping.Spec{From: p.From, Expr: p.Expr, Required: p.Required, Cast: p.Cast, Default: p.Default, Problems: p.problems}
}

// The values of Config.OnTombstone.
const (
	TombstonePoison     = "poison"
	TombstoneSkip       = "skip"
	TombstoneStatements = "statements"
)

func init() {
	plugin.RegisterConfig("sql", func(pc plugin.Config, c Config) (*SQL, error) {
		c.SchemaRegistry = pc.SchemaRegistry
		p, err := New(c)
		var ce *sink.ConfigError
		if errors.As(err, &ce) {
			// Name the field from the file's root: sink.statements[1].
			return nil, &sink.ConfigError{Field: pc.Path + "." + ce.Field, Reason: ce.Reason}
		}
		return p, err
	})
}

// problems gathers configuration errors; err returns the first as a *sink.ConfigError
// naming its field, with the others in its reason.
type problems []*sink.ConfigError

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, &sink.ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	first := *ps[0]
	if len(ps) > 1 {
		more := make([]string, 0, len(ps)-1)
		for _, p := range ps[1:] {
			more = append(more, p.Field+": "+p.Reason)
		}
		first.Reason += "; also " + strings.Join(more, "; ")
	}
	return &first
}

// compile checks c and returns the mapping of its parameters (in sorted order) and its
// statements rewritten to positional parameters. Errors are one *sink.ConfigError naming
// the first problem's field relative to the section (statements[1], params.sku).
func compile(c Config) (m mapping.Mapping, targets []*target, onTomb string, err error) {
	var ps problems
	m = mapping.Mapping{Key: mapping.String, Value: mapping.JSON}
	if c.KeyFormat != "" {
		if m.Key, err = mapping.ParseFormat(c.KeyFormat); err != nil {
			ps.add("key_format", "%v", err)
		}
	}
	if c.ValueFormat != "" {
		if m.Value, err = mapping.ParseFormat(c.ValueFormat); err != nil {
			ps.add("value_format", "%v", err)
		}
	}
	if len(ps) == 0 {
		if err := m.SetDecoder(c.SchemaRegistry, "key_format", "value_format"); err != nil {
			ps.add("value_format", "%v", err)
		}
	}
	names := slices.Sorted(maps.Keys(c.Params))
	index := make(map[string]int, len(names))
	for _, name := range names {
		p, field := c.Params[name], "params."+name
		if !validName(name) {
			ps.add(field, "%q cannot be written @%s: a name is a letter or _ followed by letters, digits and _", name, name)
			continue
		}
		col, errs := p.spec().Column(name, field)
		for _, e := range errs {
			ps.add(e.Field, "%s", e.Reason)
		}
		if len(errs) > 0 {
			continue
		}
		index[name] = len(m.Columns)
		m.Columns = append(m.Columns, col)
	}
	if len(ps) == 0 {
		if err := m.Validate(); err != nil {
			ps.add("params", "%v", err)
		}
	}
	anyTomb := len(c.TombstoneStatements) > 0
	for _, r := range c.Routes {
		anyTomb = anyTomb || len(r.TombstoneStatements) > 0
	}
	onTomb = c.OnTombstone
	if onTomb == "" {
		onTomb = TombstonePoison
		if anyTomb {
			onTomb = TombstoneStatements
		}
	}
	switch onTomb {
	case TombstonePoison, TombstoneSkip:
		if len(c.TombstoneStatements) > 0 {
			ps.add("tombstone_statements", "only with on_tombstone: statements (it is %s)", onTomb)
		}
		for i, r := range c.Routes {
			if len(r.TombstoneStatements) > 0 {
				ps.add(fmt.Sprintf("routes[%d].tombstone_statements", i), "only with on_tombstone: statements (it is %s)", onTomb)
			}
		}
	case TombstoneStatements:
		if len(c.TombstoneStatements) == 0 && len(c.Statements) > 0 {
			ps.add("tombstone_statements", "required with on_tombstone: statements: at least one statement")
		}
	default:
		ps.add("on_tombstone", "%q: want poison, skip or statements", c.OnTombstone)
	}
	if len(c.Statements) == 0 && len(c.Routes) == 0 {
		ps.add("statements", "required (or routes): at least one statement")
	}
	used := map[string]bool{}
	build := func(list string, texts []string, tombstone bool) []*statement {
		out := make([]*statement, 0, len(texts))
		for i, text := range texts {
			path := fmt.Sprintf("%s[%d]", list, i)
			q, pnames, err := rewrite(text)
			if err != nil {
				ps.add(path, "%v", err)
				continue
			}
			st := &statement{path: path, text: text, sql: q, names: pnames}
			for _, n := range pnames {
				used[n] = true
				j, ok := index[n]
				if !ok {
					if _, declared := c.Params[n]; !declared {
						ps.add(path, "unknown parameter @%s (declared under params: %s)", n, declaredList(names))
					}
					continue
				}
				if tombstone && m.Columns[j].From.Side() == "value" {
					ps.add(path, "@%s reads the value (%s), which a tombstone does not have", n, m.Columns[j].From)
				}
				st.args = append(st.args, j)
			}
			out = append(out, st)
		}
		return out
	}
	seen := map[string]int{}
	for i, r := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		t := &target{topic: r.Topic}
		switch {
		case strings.TrimSpace(r.Topic) == "":
			ps.add(path+".topic", "required: a topic name, or a pattern starting with ^")
		case kafkaconf.IsTopicPattern(r.Topic):
			re, err := regexp.Compile(r.Topic)
			if err != nil {
				ps.add(path+".topic", "%q is not a regular expression: %v", r.Topic, err)
			}
			t.re = re
		}
		if j, dup := seen[r.Topic]; dup {
			ps.add(path+".topic", "%q is routed by routes[%d] already", r.Topic, j)
		}
		seen[r.Topic] = i
		if len(r.Statements) == 0 {
			ps.add(path+".statements", "required: at least one statement")
		}
		t.stmts = build(path+".statements", r.Statements, false)
		if onTomb == TombstoneStatements {
			if len(r.TombstoneStatements) > 0 {
				t.tomb = build(path+".tombstone_statements", r.TombstoneStatements, true)
			} else if len(c.TombstoneStatements) == 0 {
				ps.add(path+".tombstone_statements", "required with on_tombstone: statements (or the section's tombstone_statements)")
			}
		}
		targets = append(targets, t)
	}
	var def *target
	if len(c.Statements) > 0 {
		def = &target{stmts: build("statements", c.Statements, false)}
		targets = append(targets, def)
	}
	if len(c.TombstoneStatements) > 0 {
		tomb := build("tombstone_statements", c.TombstoneStatements, true)
		for _, t := range targets {
			if t.tomb == nil {
				t.tomb = tomb
			}
		}
	}
	for _, name := range names {
		if !used[name] {
			ps.add("params."+name, "not used by any statement (write @%s where it goes, or remove it)", name)
		}
	}
	return m, targets, onTomb, ps.err()
}

func declaredList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
