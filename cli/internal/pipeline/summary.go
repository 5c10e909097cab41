package pipeline

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Summary writes what the pipeline does, without secrets: no database URL, no Kafka
// property values.
func (p *Pipeline) Summary(w io.Writer) error {
	c := p.Config.WithDefaults()
	db := "?"
	if _, ok := p.unresolved["database.url"]; ok {
		db = p.unsetText("database.url")
	} else if cfg, err := pgxpool.ParseConfig(c.DatabaseURL); err == nil {
		cc := cfg.ConnConfig
		db = fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
	}
	brokers := c.Brokers
	if brokers == "" {
		brokers = fmt.Sprint(c.Kafka["bootstrap.servers"])
	}
	if p.unresolvedWithin("kafka.brokers") || p.unresolvedWithin("kafka.properties[bootstrap.servers]") {
		brokers = p.unsetText("kafka.brokers")
	}
	props := sortedKeys(c.Kafka)
	for q := range p.unresolved { // a property with an unset variable is left out of c.Kafka
		if k, ok := strings.CutPrefix(q, "kafka.properties["); ok {
			props = append(props, strings.TrimSuffix(k, "]")+" (unset)")
		}
	}
	sort.Strings(props)
	if len(props) == 0 {
		props = []string{"none"}
	}
	http := p.HTTP
	if http == "" {
		http = "off"
	} else {
		o := p.HTTPOptions
		if o.TLSCertFile != "" {
			http += ", TLS"
		}
		switch {
		case o.BearerToken != "":
			http += ", bearer token on /metrics"
		case o.Username != "":
			http += ", basic auth on /metrics"
		}
		if o.Console {
			mode := "read-only"
			if p.Console.Mutations {
				mode = "mutations enabled"
			}
			http += ", the console at / (" + mode + ")"
		}
	}
	lines := [][2]string{
		{"pipeline", c.Pipeline},
		{"kafka", fmt.Sprintf("group %s, topics %s, brokers %s", c.GroupID, strings.Join(c.Topics, ", "), brokers)},
		{"", fmt.Sprintf("initial position %s, commit to kafka %t", c.InitialPosition, c.CommitToKafka)},
		{"", fmt.Sprintf("properties: %s (values not shown)", strings.Join(props, ", "))},
		{"database", fmt.Sprintf("%s, schema %s, isolation %s, auto_migrate %t", db, c.Schema, c.IsolationLevel, c.AutoMigrate)},
		{"sink", p.PluginType},
	}
	lines = append(lines, p.routeLines()...)
	lines = append(lines, [][2]string{
		{"on_poison", c.OnPoison.String()},
		{"errors", errorValuesText(c.RedactErrorValues)},
		{"batch", fmt.Sprintf("max %d records, %s, wait %s; %s buffered per partition, %s in all",
			c.MaxBatchRecords, sizeText(c.MaxBatchBytes), c.MaxBatchWait, sizeText(c.MaxBufferedBytes), sizeText(c.MaxTotalBufferedBytes))},
		{"http", http},
		{"tracing", p.tracingText()},
		{"progress", progressText(p.Progress)},
	}...)
	if r := p.SchemaRegistry; r != nil {
		auth := "no auth"
		switch {
		case r.BearerToken != "":
			auth = "bearer token"
		case r.Username != "":
			auth = "basic auth as " + r.Username
		}
		u := r.URL
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			pu.User = nil
			u = pu.String()
		}
		lines = append(lines, [2]string{"registry", fmt.Sprintf("%s, %s", u, auth)})
	}
	for _, l := range lines {
		label := ""
		if l[0] != "" {
			label = l[0] + ":"
		}
		if _, err := fmt.Fprintf(w, "%-11s%s\n", label, p.redact.Redact(l[1])); err != nil {
			return err
		}
	}
	return nil
}

// sizeText writes n bytes in the largest binary unit that divides it.
func sizeText(n int) string {
	for _, u := range []struct {
		name string
		size int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func progressText(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return "every " + d.String()
}

// unsetText shows a value with an unset variable: the reference when it is the whole value,
// else only that a variable is unset (the rest may be a secret, such as a password in a URL).
func (p *Pipeline) unsetText(path string) string {
	if raw := p.unresolved[path]; wholeReference.MatchString(raw) {
		return raw + " (unset)"
	}
	return "(unset variable)"
}

var wholeReference = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

func (p *Pipeline) unresolvedWithin(path string) bool {
	for q := range p.unresolved {
		if q == path || within(q, path) {
			return true
		}
	}
	return false
}

// RouteSummarizer is implemented by a plugin that lists its routes for the summary of
// eosink run -validate, one line each ("orders -> public.orders"). The summary shows them
// under routes:. Every built-in plugin is one.
type RouteSummarizer interface{ RouteSummary() []string }

// mappedOf lists the values the plugins map from records, each with its source (or
// "expr <CEL>") and its notes (required, cast, default): the columns of table and upsert (the section's, which
// every route without columns of its own uses) when key is "columns", the parameters of sql
// when key is "params". It looks inside the plugins that wrap others: inbox's and outbox's
// inner section, and each of multi's sinks, whose lines start with the entry ("sinks[0]: "),
// as their routes do. The section is the one the plugin got, with YAML aliases expanded.
func mappedOf(key, plugin string, sec map[string]any) []string {
	switch plugin {
	case "inbox", "outbox":
		inner, _ := sec["inner"].(map[string]any)
		return mappedOf(key, str(inner["type"]), inner)
	case "multi":
		sinks, _ := sec["sinks"].([]any)
		var lines []string
		for i, s := range sinks {
			inner, _ := s.(map[string]any)
			for _, l := range mappedOf(key, str(inner["type"]), inner) {
				lines = append(lines, fmt.Sprintf("sinks[%d]: %s", i, l))
			}
		}
		return lines
	case "table", "upsert":
		if key == "conditions" {
			return conditionsOf(sec)
		}
		if key != "columns" {
			return nil
		}
	case "sql":
		if key != "params" {
			return nil
		}
	default:
		return nil
	}
	cols, _ := sec[key].(map[string]any)
	prefix := "" // a parameter is shown as the statements write it: @at
	if key == "params" {
		prefix = "@"
	}
	width := 0
	for name := range cols {
		width = max(width, len(prefix+name))
	}
	var lines []string
	for _, name := range sortedKeys(cols) {
		src := ""
		switch v := cols[name].(type) {
		case string:
			src = v
		case map[string]any:
			src = str(v["from"])
			if e := str(v["expr"]); e != "" && src == "" {
				src = "expr " + e
			}
			var notes []string
			if b, _ := v["required"].(bool); b {
				notes = append(notes, "required")
			}
			if c := str(v["cast"]); c != "" {
				notes = append(notes, "cast "+c)
			}
			if d, ok := v["default"]; ok && d != nil {
				notes = append(notes, fmt.Sprintf("default %q", str(d)))
			}
			if len(notes) > 0 {
				src += " (" + strings.Join(notes, ", ") + ")"
			}
		}
		lines = append(lines, fmt.Sprintf("%-*s <- %s", width, prefix+name, src))
	}
	return lines
}

// SinkEntryTypes returns the type of each entry of the multi plugin's sinks, in order; nil
// for another plugin.
func (p *Pipeline) SinkEntryTypes() []string {
	if p.PluginType != "multi" {
		return nil
	}
	sinks, _ := p.sinkRaw["sinks"].([]any)
	types := make([]string, len(sinks))
	for i, s := range sinks {
		inner, _ := s.(map[string]any)
		types[i] = str(inner["type"])
	}
	return types
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// routeLines are the summary's routes (the plugin's RouteSummary), columns, filters (where
// and check) and parameters.
func (p *Pipeline) routeLines() [][2]string {
	var routes []string
	if rs, ok := p.Config.Plugin.(RouteSummarizer); ok {
		routes = rs.RouteSummary()
	}
	lines := labelled("routes", routes)
	lines = append(lines, labelled("columns", mappedOf("columns", p.PluginType, p.sinkRaw))...)
	lines = append(lines, labelled("filters", mappedOf("conditions", p.PluginType, p.sinkRaw))...)
	return append(lines, labelled("params", mappedOf("params", p.PluginType, p.sinkRaw))...)
}

// conditionsOf lists a table or upsert section's where ("where <CEL>": the records it keeps)
// and checks ("check <CEL>: message": a record that fails one is poison with the message).
func conditionsOf(sec map[string]any) []string {
	var lines []string
	if w := str(sec["where"]); w != "" {
		lines = append(lines, "where "+w)
	}
	checks, _ := sec["check"].([]any)
	for _, c := range checks {
		switch v := c.(type) {
		case string:
			lines = append(lines, "check "+v)
		case map[string]any:
			line := "check " + str(v["expr"])
			if m := str(v["message"]); m != "" {
				line += fmt.Sprintf(" (message %q)", m)
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// labelled gives the first of texts the label.
func labelled(label string, texts []string) [][2]string {
	lines := make([][2]string, len(texts))
	for i, t := range texts {
		lines[i] = [2]string{"", t}
	}
	if len(lines) > 0 {
		lines[0][0] = label
	}
	return lines
}

// errorValuesText says whether error texts carry record data (redact_error_values).
func errorValuesText(redact bool) string {
	if redact {
		return "record values redacted from error texts (redact_error_values: true)"
	}
	return "error texts show record values (redact_error_values: false)"
}
