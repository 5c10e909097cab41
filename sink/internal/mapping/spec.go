package mapping

import (
	"fmt"
	"maps"
	"slices"

	"github.com/eosink/eosink/internal/suggest"
)

// Spec is a mapped value as a sink's config writes it: a source expression, or a map
// {from, expr, required, cast, default}. The table and upsert plugins' columns and the sql
// plugin's parameters are decoded by DecodeSpec and checked by Spec.Column, so that both
// take the same options with the same errors.
type Spec struct {
	From     string  // the source expression (ParseSource)
	Expr     string  // a CEL expression instead of From (CompileExpr); "" for none
	Required bool    // Column.Required
	Cast     string  // the cast's name (ParseCast); "" for none
	Default  *string // Column.Default; nil for none
	// Problems are what DecodeSpec refused, reported by Column with the spec's path.
	Problems []Problem
}

// Problem is a key of a spec's map ("" for the spec as a whole) that DecodeSpec refused,
// and why.
type Problem struct{ Key, Reason string }

// SpecError is one problem of a spec at load: its field (the spec's path, or the path of
// one of its keys: "columns.at.cast", "params.at.default") and why.
type SpecError struct{ Field, Reason string }

// Error returns "<field>: <reason>".
func (e *SpecError) Error() string { return e.Field + ": " + e.Reason }

// SpecKeys returns the keys of a spec's map form, in the order to show them (for
// plugin.KeyLister).
func SpecKeys() []string { return []string{"from", "expr", "required", "cast", "default"} }

// specSyntax is what a spec may be, for errors.
const specSyntax = "a source expression or {from: EXPR, expr: CEL, required: BOOL, cast: NAME, default: TEXT}"

// DecodeSpec decodes a spec with a YAML UnmarshalYAML's unmarshal: "value.x" or {from:
// value.x, required: true, cast: epoch_ms, default: "0"}. what names the spec in errors ("a
// column", "a parameter"). It refuses nothing itself: each problem goes to Spec.Problems,
// for Column to report with the spec's path together with every other problem. A scalar
// default (a number, a boolean) is kept in its YAML text form.
func DecodeSpec(unmarshal func(any) error, what string) Spec {
	var s Spec
	if err := unmarshal(&s.From); err == nil {
		return s
	}
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		s.Problems = append(s.Problems, Problem{"", what + " is " + specSyntax})
		return s
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "from":
			f, ok := v.(string)
			if !ok {
				s.Problems = append(s.Problems, Problem{k, "want a source expression"})
			}
			s.From = f
		case "expr":
			e, ok := v.(string)
			if !ok {
				s.Problems = append(s.Problems, Problem{k, "want a CEL expression, as a string"})
			}
			s.Expr = e
		case "required":
			b, ok := v.(bool)
			if !ok {
				s.Problems = append(s.Problems, Problem{k, "want true or false"})
			}
			s.Required = b
		case "cast":
			c, ok := v.(string)
			if !ok {
				s.Problems = append(s.Problems, Problem{k, "want one of " + castSyntax})
			}
			s.Cast = c
		case "default":
			switch v := v.(type) {
			case string:
				s.Default = &v
			case bool, int, int64, uint64, float64:
				d := fmt.Sprint(v)
				s.Default = &d
			case nil:
				s.Problems = append(s.Problems, Problem{k, "null is no default (a missing value is NULL without one); leave it out"})
			default:
				s.Problems = append(s.Problems, Problem{k, "want a scalar, the value in its text form"})
			}
		default:
			s.Problems = append(s.Problems, Problem{k, suggest.UnknownKey(what, k, SpecKeys())})
		}
	}
	return s
}

// Column returns the Column called name that s describes, or every problem of s: those
// DecodeSpec kept, a source that does not parse or an expression that does not compile
// (or both given), an unknown cast, a default with Required
// or one the cast refuses. Each problem names its field under path, the spec's own
// ("columns.at", "params.at"): path.cast for the cast, path itself for the spec as a whole.
func (s Spec) Column(name, path string) (Column, []*SpecError) {
	var errs []*SpecError
	refused := map[string]bool{}
	field := func(key string) string {
		if key == "" {
			return path
		}
		return path + "." + key
	}
	for _, p := range s.Problems {
		refused[p.Key] = true
		errs = append(errs, &SpecError{field(p.Key), p.Reason})
	}
	var src Source
	var expr *Expr
	var err error
	switch {
	case s.Expr != "" && s.From != "":
		errs = append(errs, &SpecError{field("expr"), "give from or expr, not both"})
	case s.Expr != "":
		if expr, err = CompileExpr(s.Expr); err != nil {
			errs = append(errs, &SpecError{field("expr"), err.Error()})
		}
	default:
		if src, err = ParseSource(s.From); err != nil && !refused[""] && !refused["from"] && !refused["expr"] {
			errs = append(errs, &SpecError{field("from"), err.Error()})
		}
	}
	cast, err := ParseCast(s.Cast)
	if err != nil && !refused["cast"] {
		errs = append(errs, &SpecError{field("cast"), err.Error()})
	}
	if d := s.Default; d != nil && !refused["default"] {
		if s.Required {
			errs = append(errs, &SpecError{field("default"), "a default and required: true exclude each other (required refuses what the default fills in)"})
		} else if err == nil {
			if err := cast.Check(*d); err != nil {
				errs = append(errs, &SpecError{field("default"), err.Error()})
			}
		}
	}
	if len(errs) > 0 {
		return Column{}, errs
	}
	return Column{Name: name, From: src, Expr: expr, Required: s.Required, Cast: cast, Default: s.Default}, nil
}
