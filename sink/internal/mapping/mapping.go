package mapping

import (
	"errors"
	"fmt"

	"github.com/eosink/eosink/internal/names"
)

// Column is one column of the target table and where its value comes from.
type Column struct {
	// Name is the column's name as PostgreSQL knows it (the caller quotes it in SQL).
	Name string
	// From is where the value comes from. Zero when Expr gives the value.
	From Source
	// Expr gives the value instead of From: a CEL expression over the record (see Expr),
	// whose result becomes text as the package documentation says. A null result is a value
	// not found: Default applies, then Required. Defaults to nil: From gives the value.
	Expr *Expr
	// Required makes a missing value an error: an absent field, JSON null, an absent
	// header, a null key or value, a zero timestamp. An optional column gets NULL instead.
	Required bool
	// Array says the column is a PostgreSQL array (text[], numeric[]...): an array read
	// from a side with a schema'd format (avro, protobuf, json_schema) is then written as an
	// array literal rather than as JSON text. It does not change the json format.
	Array bool
	// Cast converts the value before it is written (see Cast); NULL stays NULL. Defaults to
	// CastNone: the value as it is.
	Cast Cast
	// Default is the value of a column whose source finds nothing: an absent field (or a
	// path through a scalar), an absent header, a null key or value, a zero timestamp. An
	// explicit null (JSON null, a header whose value is null, a null in a schema'd record)
	// stays NULL, like an explicit NULL in an INSERT. The default goes through Cast like a
	// found value, so it is written in the source's form (epoch_ms: "0"). Defaults to nil:
	// no default. A column may not have both Default and Required.
	Default *string
}

// Mapping says how a record's key and value decode and which columns a row has. A Mapping
// is read-only once built: Row and Extract may run on it from many goroutines at once.
type Mapping struct {
	Key     Format   // how the key decodes
	Value   Format   // how the value decodes
	Columns []Column // the row's columns, in order
	// Decoder decodes the sides with a schema'd format (avro, protobuf, json_schema); it is
	// required when one side has such a format. A *schemaformat.Decoder is one.
	Decoder Decoder
	// Where, a condition, filters records: one for which it is false gives ErrSkip from Row
	// and AppendCopy, before any column is read. Defaults to nil: every record is mapped.
	Where *Expr
	// Checks are conditions every record (that Where keeps) must meet, tried in order: the
	// first that is false makes Row and AppendCopy return its *CheckError. Defaults to none.
	Checks []Check
}

// sourceText is what messages call c's source: its source expression or its Expr.
func (c *Column) sourceText() string {
	if c.Expr != nil {
		return "expr " + c.Expr.text
	}
	return c.From.String()
}

// filtered reports whether m has a Where or Checks.
func (m *Mapping) filtered() bool { return m.Where != nil || len(m.Checks) > 0 }

// exprs returns every expression of m.
func (m *Mapping) exprs() []*Expr {
	es := []*Expr{m.Where}
	for _, c := range m.Checks {
		es = append(es, c.Expr)
	}
	for i := range m.Columns {
		es = append(es, m.Columns[i].Expr)
	}
	return es
}

// ReadsValue reports whether some column, Where or check reads the record's value.
func (m *Mapping) ReadsValue() bool {
	if _, v := readsSides(m.exprs()...); v {
		return true
	}
	for _, c := range m.Columns {
		if c.From.Side() == "value" {
			return true
		}
	}
	return false
}

// Validate checks m: known formats, with a Decoder for schema'd ones; every column named,
// once, with a source, a known cast, and a default that casts and is not with Required; paths (key.<path>, value.<path>) only on a side with the json format
// or a schema'd one. A Mapping without
// columns is valid (a sink that needs some checks that itself). It returns all problems
// found, joined.
func (m *Mapping) Validate() error {
	var errs []error
	if !m.Key.valid() {
		errs = append(errs, fmt.Errorf("mapping: invalid key format %v", m.Key))
	}
	if !m.Value.valid() {
		errs = append(errs, fmt.Errorf("mapping: invalid value format %v", m.Value))
	}
	if (m.Key.Schemad() || m.Value.Schemad()) && m.Decoder == nil {
		errs = append(errs, errors.New("mapping: the avro, protobuf and json_schema formats need a schema registry decoder"))
	}
	seen := make(map[string]bool, len(m.Columns))
	for i, c := range m.Columns {
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("mapping: column %d has no name", i+1))
		case names.Check(c.Name) != "":
			errs = append(errs, fmt.Errorf("mapping: column %q: name %s", c.Name, names.Check(c.Name)))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("mapping: column %q appears more than once", c.Name))
		}
		seen[c.Name] = true
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if !c.Cast.valid() {
			errs = append(errs, fmt.Errorf("mapping: column %q: invalid cast %v", name, c.Cast))
		}
		if c.Default != nil {
			if c.Required {
				errs = append(errs, fmt.Errorf("mapping: column %q: a default and required exclude each other (required refuses what the default fills in)", name))
			}
			if c.Cast.valid() {
				if err := c.Cast.Check(*c.Default); err != nil {
					errs = append(errs, fmt.Errorf("mapping: column %q: default: %w", name, err))
				}
			}
		}
		switch c.From.kind {
		case srcNone:
			if c.Expr == nil {
				errs = append(errs, fmt.Errorf("mapping: column %q has no source", name))
			}
		case srcKeyPath:
			if m.Key != JSON && !m.Key.Schemad() {
				errs = append(errs, fmt.Errorf("mapping: column %q reads %s but the key format is %v, not json, avro, protobuf or json_schema", name, c.From, m.Key))
			}
		case srcValuePath:
			if m.Value != JSON && !m.Value.Schemad() {
				errs = append(errs, fmt.Errorf("mapping: column %q reads %s but the value format is %v, not json, avro, protobuf or json_schema", name, c.From, m.Value))
			}
		}
		if c.Expr != nil && !c.From.IsZero() {
			errs = append(errs, fmt.Errorf("mapping: column %q has both a source and an expression", name))
		}
	}
	for _, c := range m.Checks {
		if c.Expr == nil || !c.Expr.bool {
			errs = append(errs, errors.New("mapping: a check needs a condition (CompileCondition)"))
		}
	}
	if m.Where != nil && !m.Where.bool {
		errs = append(errs, errors.New("mapping: where needs a condition (CompileCondition)"))
	}
	key, value := readsSides(m.exprs()...)
	if key && m.Key.Schemad() {
		errs = append(errs, fmt.Errorf("mapping: an expression reads the key, whose format %v expressions cannot read yet (json, string and bytes)", m.Key))
	}
	if value && m.Value.Schemad() {
		errs = append(errs, fmt.Errorf("mapping: an expression reads the value, whose format %v expressions cannot read yet (json, string and bytes)", m.Value))
	}
	return errors.Join(errs...)
}

// ColumnNames returns the names of m's columns, in order.
func (m *Mapping) ColumnNames() []string {
	names := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		names[i] = c.Name
	}
	return names
}
