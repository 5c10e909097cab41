package table

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/kafkaconf"
	"github.com/eosink/eosink/internal/names"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
)

// Route sends the records of some topics to a table of their own. Routes are tried in
// order; the first whose Topic matches a record's topic wins, and a topic no route matches
// goes to Config.Table, or, without one, has no route (the sink then refuses it: see
// sink.TopicRouter).
type Route struct {
	// Topic is a topic name, or a regular expression when it starts with ^ (matched
	// against the whole name as written: "^orders-.*" matches orders-eu). Required.
	Topic string `yaml:"topic"`
	// Table is the target, "table" or "schema.table". ${topic} is replaced by the record's
	// topic and, when Topic is a pattern, ${1} to ${9} by its capture groups (in a pipeline
	// config file write $${topic}, since the loader expands ${...} itself). Required.
	Table string `yaml:"table"`
	// Columns maps the target's columns to source expressions. Defaults to Config.Columns.
	Columns map[string]Column `yaml:"columns"`
	// Key lists the key columns, for the upsert plugin only. Defaults to UpsertConfig.Key.
	Key []string `yaml:"key"`
	// Where and Check filter and check the route's records, as Config.Where and
	// Config.Check do. Default to Config.Where and Config.Check.
	Where string  `yaml:"where"`
	Check []Check `yaml:"check"`
}

// routed returns c with r's Where and Check, for the writer of r's tables.
func (c Config) routed(r Route) Config {
	c.Where, c.Check = r.Where, r.Check
	return c
}

// tableVar matches a ${...} variable in a table name.
var tableVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// nameTemplate is a table name with variables, split at its dots (outside ${...}) into
// [schema.]table.
type nameTemplate struct {
	text  string
	parts []string
	vars  bool // it holds a variable
}

func parseNameTemplate(s string, groups int) (nameTemplate, error) {
	if strings.TrimSpace(s) == "" {
		return nameTemplate{}, errors.New("required")
	}
	if r := names.Check(s); r != "" {
		return nameTemplate{}, fmt.Errorf("%q %s", s, r)
	}
	parts := mapping.SplitTableTemplate(s)
	if len(parts) > 2 || slices.Contains(parts, "") {
		return nameTemplate{}, fmt.Errorf("%q is not table or schema.table", s)
	}
	t := nameTemplate{text: s, parts: parts}
	for _, m := range tableVar.FindAllStringSubmatch(s, -1) {
		t.vars = true
		if m[1] == "topic" {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 9 {
			return nameTemplate{}, fmt.Errorf("%q: unknown variable ${%s} (want ${topic}, or ${1} to ${9} for a pattern's groups)", s, m[1])
		}
		if n > groups {
			return nameTemplate{}, fmt.Errorf("%q: ${%d} but the route's topic pattern has %d capture groups", s, n, groups)
		}
	}
	return t, nil
}

// render returns the table for topic; groups are the route pattern's submatches (groups[0]
// is the whole match). Each rendered part must be a name PostgreSQL keeps as it is.
func (t nameTemplate) render(topic string, groups []string) (pgx.Identifier, error) {
	id := make(pgx.Identifier, len(t.parts))
	for i, p := range t.parts {
		id[i] = tableVar.ReplaceAllStringFunc(p, func(v string) string {
			name := v[2 : len(v)-1]
			if name == "topic" {
				return topic
			}
			n, _ := strconv.Atoi(name)
			if n < len(groups) {
				return groups[n]
			}
			return ""
		})
		switch {
		case id[i] == "":
			return nil, fmt.Errorf("table %q gives an empty name for topic %q", t.text, topic)
		case len(id[i]) > 63:
			// PostgreSQL would cut it to 63 bytes, and two topics could meet in one table.
			return nil, fmt.Errorf("table %q gives %q for topic %q, longer than PostgreSQL's 63 bytes", t.text, id[i], topic)
		case strings.ContainsRune(id[i], 0):
			return nil, fmt.Errorf("table %q gives a name with a NUL byte for topic %q", t.text, topic)
		}
	}
	return id, nil
}

// route is one compiled route; the default route (Config.Table) has neither name nor re.
type route struct {
	name  string         // exact topic, "" for a pattern or the default
	re    *regexp.Regexp // the topic pattern
	table nameTemplate
	spec  Route // Columns and Key set (the defaults filled in)
	path  string
}

// match reports whether the route takes topic, with the pattern's groups.
func (r *route) match(topic string) ([]string, bool) {
	switch {
	case r.re != nil:
		g := r.re.FindStringSubmatch(topic)
		return g, g != nil
	case r.name != "":
		return nil, r.name == topic
	}
	return nil, true // the default
}

// router finds each topic's target, a *tableTarget or an *upsertTarget, built once per
// (route, table) by build and kept by topic.
type router[T any] struct {
	routes []*route // in order, the default last
	build  func(r *route, table pgx.Identifier) (T, error)

	mu      sync.Mutex
	byTopic map[string]T
	byTable map[string]T // by route path and quoted table: topics sharing a target share its catalog
}

// newRouter compiles c's routes (Config.Table is the default route when set) and checks
// each by building a target: for a table name with variables, a target with an example
// name, which checks the columns, formats and key.
func newRouter[T any](c Config, key []string, build func(r *route, table pgx.Identifier) (T, error)) (*router[T], error) {
	rt := &router[T]{build: build, byTopic: map[string]T{}, byTable: map[string]T{}}
	// The section's where and check once, rather than in each route that takes them: when
	// they do not compile, the routes are checked without them.
	filterErrs := compileFilter(&mapping.Mapping{}, c.Where, c.Check)
	if len(filterErrs) > 0 {
		c.Where, c.Check = "", nil
	}
	var errs []error
	seen := map[string]int{}
	for i, rc := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		r := &route{path: path, spec: rc}
		groups := 0
		switch {
		case strings.TrimSpace(rc.Topic) == "":
			errs = append(errs, fmt.Errorf("%s.topic: required: a topic name, or a pattern starting with ^", path))
			continue
		case kafkaconf.IsTopicPattern(rc.Topic):
			re, err := regexp.Compile(rc.Topic)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.topic: %q is not a regular expression: %v", path, rc.Topic, err))
				continue
			}
			r.re, groups = re, re.NumSubexp()
		default:
			r.name = rc.Topic
		}
		if j, dup := seen[rc.Topic]; dup {
			errs = append(errs, fmt.Errorf("%s.topic: %q is routed by routes[%d] already", path, rc.Topic, j))
			continue
		}
		seen[rc.Topic] = i
		t, err := parseNameTemplate(rc.Table, groups)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.table: %w", path, err))
			continue
		}
		r.table = t
		if len(r.spec.Columns) == 0 {
			r.spec.Columns = c.Columns
		}
		if len(r.spec.Key) == 0 {
			r.spec.Key = key
		}
		if r.spec.Where == "" {
			r.spec.Where = c.Where
		}
		if len(r.spec.Check) == 0 {
			r.spec.Check = c.Check
		}
		rt.routes = append(rt.routes, r)
	}
	if c.Table != "" {
		t, err := parseNameTemplate(c.Table, 0)
		if err != nil {
			errs = append(errs, fmt.Errorf("table: %w", err))
		} else {
			rt.routes = append(rt.routes, &route{table: t, spec: Route{Columns: c.Columns, Key: key, Where: c.Where, Check: c.Check}})
		}
	} else if len(c.Routes) == 0 {
		errs = append(errs, errors.New("table: required (or routes)"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(append(filterErrs, errs...)...)
	}
	errs = filterErrs
	for _, r := range rt.routes {
		id, err := r.table.render("topic", []string{"x", "x", "x", "x", "x", "x", "x", "x", "x", "x"})
		if err == nil {
			_, err = rt.build(r, id)
		}
		if err != nil {
			errs = append(errs, r.wrap(err))
		}
	}
	return rt, errors.Join(errs...)
}

// wrap names the route in a configuration error: "routes[1].columns.x: ...", each error of
// a joined one.
func (r *route) wrap(err error) error {
	if r.path == "" {
		return err
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = r.wrap(e)
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s.%w", r.path, err)
}

// describe lists the routes for messages: "orders, ^eu-.*".
func (rt *router[T]) describe() string {
	var names []string
	for _, r := range rt.routes {
		if r.path != "" {
			names = append(names, r.spec.Topic)
		}
	}
	return strings.Join(names, ", ")
}

// find returns the route of topic and the table it renders; a *sink.NoRouteError when no
// route matches or the name it gives cannot be used.
func (rt *router[T]) find(topic string) (*route, pgx.Identifier, error) {
	for _, r := range rt.routes {
		groups, ok := r.match(topic)
		if !ok {
			continue
		}
		id, err := r.table.render(topic, groups)
		if err != nil {
			return nil, nil, &sink.NoRouteError{Topic: topic, Reason: r.wrap(err).Error()}
		}
		return r, id, nil
	}
	return nil, nil, &sink.NoRouteError{Topic: topic,
		Reason: fmt.Sprintf("it matches none of the sink's routes (%s) and the sink has no default table", rt.describe())}
}

// CheckTopic reports whether topic has a route (sink.TopicRouter).
func (rt *router[T]) CheckTopic(topic string) error {
	_, _, err := rt.find(topic)
	return err
}

// target returns the target of topic, building it on first use.
func (rt *router[T]) target(topic string) (T, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if t, ok := rt.byTopic[topic]; ok {
		return t, nil
	}
	var zero T
	r, id, err := rt.find(topic)
	if err != nil {
		return zero, err
	}
	k := r.path + " " + id.Sanitize()
	t, ok := rt.byTable[k]
	if !ok {
		if t, err = rt.build(r, id); err != nil {
			return zero, r.wrap(err)
		}
		rt.byTable[k] = t
	}
	rt.byTopic[topic] = t
	return t, nil
}

// fixed returns the targets whose table has no variable, built now, to check at start.
func (rt *router[T]) fixed() ([]T, error) {
	var ts []T
	for _, r := range rt.routes {
		if r.table.vars {
			continue
		}
		id, err := r.table.render("", nil)
		if err != nil {
			return nil, err
		}
		rt.mu.Lock()
		k := r.path + " " + id.Sanitize()
		t, ok := rt.byTable[k]
		if !ok {
			if t, err = rt.build(r, id); err != nil {
				rt.mu.Unlock()
				return nil, r.wrap(err)
			}
			rt.byTable[k] = t
		}
		rt.mu.Unlock()
		ts = append(ts, t)
	}
	return ts, nil
}

// Summary lines of the routes, for `eosink run -validate`: "orders -> public.orders".
func (rt *router[T]) summary() []string {
	var lines []string
	for _, r := range rt.routes {
		from := "(any other topic)"
		if len(rt.routes) == 1 {
			from = "(every topic)"
		}
		if r.path != "" {
			from = r.spec.Topic
		}
		line := fmt.Sprintf("%s -> %s", from, r.table.text)
		if len(r.spec.Key) > 0 {
			line += " (key " + strings.Join(r.spec.Key, ", ") + ")"
		}
		lines = append(lines, line)
	}
	return lines
}

// prepare runs check on every fixed target (Prepare).
func prepareAll[T any](ctx context.Context, rt *router[T], check func(context.Context, T) error) error {
	ts, err := rt.fixed()
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := check(ctx, t); err != nil {
			return err
		}
	}
	return nil
}
