package cdc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/names"
	"github.com/eosink/eosink/sink"
)

// Confinement: where a change event may write.
//
// A change event names its own source (source.schema, source.table), and the templates
// build the target from it, so whoever can produce to a subscribed topic chooses the table.
// Every target is therefore checked before any statement touches it:
//
//   - its schema is one the config names: the fixed schema of its template
//     (replica.${source.table}), or, for a template whose schema comes from the event (the
//     default ${source.schema}.${source.table}), one of Config.Schemas;
//   - never one of eosink's own schemas (the pipeline's and PositionsSchema),
//     information_schema or a pg_ schema (pg_catalog, pg_toast, pg_temp_N...), whatever
//     the config says;
//   - when the target depends on the event's source (a ${source.*} variable, or a tables
//     override chosen by it), the event's source table is the one its topic names under
//     Debezium's topic naming, <topic.prefix>.<schema>.<table> (unless TopicCheck is off);
//   - its names, and the column names that create and evolve would add, pass checkName
//     and checkColumn.
//
// A record that fails is poison (a *ConfinementError): dead-lettered under on_poison:
// dead-letter, never a stop. A name that the config fixes is checked when the config is
// loaded instead.

// Defaults and limits of the confinement.
const (
	// MaxIdentifierBytes is PostgreSQL's identifier length (NAMEDATALEN - 1); a longer name
	// is silently truncated by the server, so two names would name one table or column.
	MaxIdentifierBytes = 63
	// DefaultMaxColumns is MaxColumns' default.
	DefaultMaxColumns = 250
	// TopicCheckDebezium and TopicCheckOff are TopicCheck's values.
	TopicCheckDebezium = "debezium"
	TopicCheckOff      = "off"
	// reservedColumnPrefix begins the staging table's own columns (eosink_commit,
	// eosink_lsn...): no replicated column may take it.
	reservedColumnPrefix = "eosink_"
)

// systemColumns are PostgreSQL's system columns: no user column may take their names.
var systemColumns = []string{"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid", "oid"}

// ConfinementError says why a change event may not write where it would: its target
// (schema.table, unquoted) and the reason. Its records are poison.
type ConfinementError struct {
	Target string
	Reason string
}

func (e *ConfinementError) Error() string {
	return fmt.Sprintf("cdc: refused target %s: %s", e.Target, e.Reason)
}

// checkName returns why s cannot be a table, schema or column name: names.Check's reasons,
// empty, or longer than MaxIdentifierBytes. "" when it can.
func checkName(s string) string {
	if s == "" {
		return "is empty"
	}
	if why := names.Check(s); why != "" {
		return why
	}
	if len(s) > MaxIdentifierBytes {
		return fmt.Sprintf("is %d bytes long; PostgreSQL truncates names at %d bytes, so it would name another table or column", len(s), MaxIdentifierBytes)
	}
	return ""
}

// checkColumn returns why name cannot be a replicated column: checkName's reasons, a
// system column's name, or the staging columns' eosink_ prefix. "" when it can.
func checkColumn(name string) string {
	if why := checkName(name); why != "" {
		return why
	}
	if slices.Contains(systemColumns, name) {
		return "is the name of a PostgreSQL system column"
	}
	if strings.HasPrefix(name, reservedColumnPrefix) {
		return "begins with " + reservedColumnPrefix + ", which eosink's staging columns use"
	}
	return ""
}

// schemaRefusal returns why schema may never be a target's, whatever the config says: it
// is one of own (eosink's schemas), information_schema or a pg_ schema. "" when it may.
func schemaRefusal(schema string, own []string) string {
	switch {
	case slices.Contains(own, schema):
		return "is eosink's own schema (the pipeline's schema or positions_schema)"
	case schema == "information_schema", strings.HasPrefix(schema, "pg_"):
		return "is a PostgreSQL system schema"
	}
	return ""
}

// confinement is what New derived from the config for the checks above.
type confinement struct {
	own        []string        // eosink's schemas: always refused
	schemas    map[string]bool // Config.Schemas
	topicCheck bool            // check source against topic (TopicCheck, when routing depends on the source)
	maxColumns int
}

// newConfinement checks the config's schemas and fixed names and returns the confinement.
func newConfinement(c *Config, rs routes) (confinement, error) {
	cf := confinement{own: []string{c.PipelineSchema, c.PositionsSchema}, schemas: map[string]bool{}, maxColumns: c.MaxColumns}
	if cf.maxColumns == 0 {
		cf.maxColumns = DefaultMaxColumns
	}
	if cf.maxColumns < 0 || cf.maxColumns > 1600 {
		return cf, fmt.Errorf("max_columns: %d is not between 1 and 1600 (PostgreSQL's limit)", c.MaxColumns)
	}
	for _, s := range c.Schemas {
		if why := checkName(s); why != "" {
			return cf, fmt.Errorf("schemas: a schema %s", why)
		}
		if why := schemaRefusal(s, cf.own); why != "" {
			return cf, fmt.Errorf("schemas: %s %s; eosink never writes replicas there", s, why)
		}
		cf.schemas[s] = true
	}
	dependsOnSource := len(rs.byST) > 0
	check := func(path string, t template) error {
		dependsOnSource = dependsOnSource || t.fromSource()
		if !t.fixed(0) && len(c.Schemas) == 0 {
			return fmt.Errorf("%s: %q takes its schema from each event; list the schemas its targets may be in with schemas: [...] "+
				"(or give the template a fixed schema, as in replica.${source.table})", path, strings.Join(t.parts, "."))
		}
		for i, p := range t.parts {
			if !t.fixed(i) {
				continue
			}
			if why := checkName(p); why != "" {
				return fmt.Errorf("%s: %q: a name %s", path, strings.Join(t.parts, "."), why)
			}
		}
		if t.fixed(0) {
			if why := schemaRefusal(t.parts[0], cf.own); why != "" {
				return fmt.Errorf("%s: schema %s %s; eosink never writes replicas there", path, t.parts[0], why)
			}
		}
		return nil
	}
	if err := check("table", rs.def.tmpl); err != nil {
		return cf, err
	}
	fixed := map[string]string{} // a fixed target → the source table routed to it
	for _, st := range slices.Sorted(maps.Keys(rs.byST)) {
		t := rs.byST[st].tmpl
		if err := check("tables."+st+".table", t); err != nil {
			return cf, err
		}
		if t.fixed(0) && t.fixed(1) {
			name := t.render("", "", "", "").Sanitize()
			if other, ok := fixed[name]; ok {
				return cf, fmt.Errorf("tables: %s and %s both go to %s; one target per source table", other, st, name)
			}
			fixed[name] = st
		}
	}
	switch c.TopicCheck {
	case "", TopicCheckDebezium:
		cf.topicCheck = dependsOnSource
	case TopicCheckOff:
	default:
		return cf, fmt.Errorf("topic_check: %q is not %s or %s", c.TopicCheck, TopicCheckDebezium, TopicCheckOff)
	}
	return cf, nil
}

// target checks the target id of ev (from topic) under route rt. Its error is a
// *ConfinementError.
func (cf confinement) target(id pgx.Identifier, rt route, ev *event, topic string) error {
	refuse := func(format string, a ...any) error {
		return &ConfinementError{Target: strings.Join(id, "."), Reason: fmt.Sprintf(format, a...)}
	}
	if cf.topicCheck {
		if !topicNames(topic, ev.schema, ev.table) {
			return refuse("the event's source table %s.%s is not the one its topic %s names (<topic.prefix>.<schema>.<table>); "+
				"topics renamed by a topic-routing transform (ByLogicalTableRouter) need topic_check: off", ev.schema, ev.table, topic)
		}
	}
	for i, p := range id {
		if why := checkName(p); why != "" {
			return refuse("its %s name %s", [...]string{"schema", "table"}[i], why)
		}
	}
	if why := schemaRefusal(id[0], cf.own); why != "" {
		return refuse("schema %s %s", id[0], why)
	}
	if !rt.tmpl.fixed(0) && !cf.schemas[id[0]] {
		return refuse("schema %s is not one of schemas: [%s]", id[0], strings.Join(slices.Sorted(maps.Keys(cf.schemas)), ", "))
	}
	return nil
}

// columns checks the columns that create or evolve would give table (cols added to a
// table of existing columns). Its error is a *ConfinementError.
func (cf confinement) columns(table string, existing int, cols []string) error {
	for _, c := range cols {
		if why := checkColumn(c); why != "" {
			return &ConfinementError{Target: table, Reason: fmt.Sprintf("field %q cannot be a column: it %s", c, why)}
		}
	}
	if n := existing + len(cols); n > cf.maxColumns {
		return &ConfinementError{Target: table, Reason: fmt.Sprintf("%d columns would exceed max_columns (%d): %d more asked for %s",
			n, cf.maxColumns, len(cols), strings.Join(cols, ", "))}
	}
	return nil
}

// topicNames reports whether topic is <prefix>.<schema>.<table> for a non-empty prefix,
// the names spelled as Debezium spells them in topic names (topicPart).
func topicNames(topic, schema, table string) bool {
	suffix := "." + topicPart(schema) + "." + topicPart(table)
	return len(topic) > len(suffix) && strings.HasSuffix(topic, suffix)
}

// topicPart is name as Debezium's topic naming writes it: each UTF-16 code unit that a
// Kafka topic name cannot hold (anything but ASCII letters, digits, '.', '_' and '-')
// becomes '_'.
func topicPart(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("__") // a surrogate pair in Java's String
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// poisonIfRefused makes a *ConfinementError in err the record's poison; other errors pass.
func poisonIfRefused(r *sink.Record, err error) error {
	var ce *ConfinementError
	if errors.As(err, &ce) {
		return sink.Poison(r, err)
	}
	return err
}
