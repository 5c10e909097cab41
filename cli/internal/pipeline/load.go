package pipeline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// loader collects the errors of one file.
type loader struct {
	file    string
	errs    Errors
	x       *expander
	secrets redactor
	broken  map[string]bool // sections that could not be decoded: their missing keys are not reported
	lines   map[string]int  // lines of the values read, by path, for errors found later

	sinkRaw    map[string]any    // the sink section given to the plugin
	warnings   Errors            // with Options.AllowUnset: the unset variables
	unresolved map[string]string // paths whose value had an unset variable, to the value as written
}

func (l *loader) warn(path string, line int, format string, args ...any) {
	l.warnings = append(l.warnings, &Error{File: l.file, Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// unresolvedWithin reports whether a value at path, or inside it, had an unset variable.
func (l *loader) unresolvedWithin(path string) bool {
	for p := range l.unresolved {
		if p == path || within(p, path) {
			return true
		}
	}
	return false
}

func (l *loader) fail(path string, line int, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// missing reports a required field, unless its value was reported already or its section
// could not be decoded.
func (l *loader) missing(path, section string, s scalar, msg string) {
	if s.failed || s.unresolved || l.broken[""] || l.broken[section] {
		return
	}
	if s.subst {
		msg += fmt.Sprintf(" (%s gives an empty value)", s.raw)
	}
	l.fail(path, s.line, "%s", msg)
}

func (l *loader) load(data []byte, logOut io.Writer) *Pipeline {
	var raw rawFile
	body := l.decodeRaw(data, &raw)
	if body == nil {
		return nil
	}
	var c sink.Config
	l.setFields(&raw, &c) // the values a config tag says how to convert

	// kafka
	k := &raw.Kafka
	brokers, brokersValue := l.brokers("kafka.brokers", &k.Brokers)
	c.Brokers = brokers
	if s, ok := l.value("kafka.group", &k.Group); ok {
		c.GroupID = s.val
	} else {
		l.missing("kafka.group", "kafka", s, "required: the Kafka consumer group")
	}
	c.Topics = l.topics("kafka.topics", &k.Topics)
	c.InitialPosition = sink.Earliest
	if s, ok := l.value("kafka.initial_position", &k.InitialPosition); ok {
		pos, err := sink.ParseInitialPosition(s.val)
		if err != nil {
			l.fail("kafka.initial_position", s.line, "%s is not earliest, latest, error or kafka-committed", describe(s))
		}
		c.InitialPosition = pos
	}
	props := l.properties("kafka.properties", &k.Properties)
	if len(props) > 0 {
		c.Kafka = kafka.ConfigMap{}
		for key, v := range props {
			c.Kafka[key] = v
		}
	}
	if c.Brokers == "" && props["bootstrap.servers"] == "" {
		l.missing("kafka.brokers", "kafka", brokersValue, "required: Kafka's bootstrap servers, for example 127.0.0.1:9092 or ${KAFKA_BOOTSTRAP_SERVERS}")
	}
	l.checkKafka(props, k.Properties.Line)
	if c.Brokers != "" && props["bootstrap.servers"] != "" {
		l.fail("kafka.properties[bootstrap.servers]", k.Properties.Line, "set kafka.brokers or this property, not both")
	}

	// database
	d := &raw.Database
	if s, ok := l.value("database.url", &d.URL); ok {
		c.DatabaseURL = s.val
		l.checkDatabaseURL("database.url", s)
	} else {
		l.missing("database.url", "database", s, "required: a PostgreSQL connection string, for example ${DATABASE_URL}")
	}
	if s, ok := l.value("database.isolation", &d.Isolation); ok {
		norm := strings.NewReplacer("_", " ", "-", " ").Replace(strings.ToLower(strings.TrimSpace(s.val)))
		switch lvl := pgx.TxIsoLevel(norm); lvl {
		case pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable:
			c.IsolationLevel = lvl
		default:
			l.fail("database.isolation", s.line, "%s is not read committed, repeatable read or serializable", describe(s))
		}
	}

	// on_poison
	if s, ok := l.value("on_poison", &raw.OnPoison); ok {
		policy, err := sink.ParsePoisonPolicy(s.val)
		if err != nil {
			l.fail("on_poison", s.line, "%s is not stop or dead-letter", describe(s))
		}
		c.OnPoison = policy
	}

	// http
	p := &Pipeline{File: l.file}
	p.HTTP, p.HTTPOptions = l.http(&raw.HTTP)

	// log
	format, level := "text", slog.LevelInfo
	if s, ok := l.value("log.format", &raw.Log.Format); ok {
		if s.val != "text" && s.val != "json" {
			l.fail("log.format", s.line, "%s is not text or json", describe(s))
		}
		format = s.val
	}
	if s, ok := l.value("log.level", &raw.Log.Level); ok {
		levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
		lv, known := levels[strings.ToLower(s.val)]
		if !known {
			l.fail("log.level", s.line, "%s is not debug, info, warn or error", describe(s))
		}
		level = lv
	}
	p.Progress = 30 * time.Second
	if s, ok := l.value("log.progress", &raw.Log.Progress); ok {
		d, err := time.ParseDuration(strings.TrimSpace(s.val))
		switch {
		case s.val == "0" || s.val == "off":
			p.Progress = 0
		case err != nil || d < 0:
			l.fail("log.progress", s.line, "%s is not a duration (such as 30s or 1m; 0 or off: no progress lines)", describe(s))
		default:
			p.Progress = d
		}
	}
	ho := &slog.HandlerOptions{Level: level}
	if format == "json" {
		p.Logger = slog.New(slog.NewJSONHandler(logOut, ho))
	} else {
		p.Logger = slog.New(slog.NewTextHandler(logOut, ho))
	}
	c.Logger = p.Logger

	// The defaults the plugin sees, and that the Config keeps.
	def := c.WithDefaults()
	c.Pipeline, c.Schema, c.IsolationLevel = def.Pipeline, def.Schema, def.IsolationLevel

	// schema_registry, for the plugin.
	p.SchemaRegistry = l.registry(&raw.Registry)

	// sink, last: the plugin gets the pipeline's name, schema, logger and registry.
	c.Plugin, p.PluginType = l.plugin(&raw.Sink, c.Pipeline, c.Schema, p.Logger, p.SchemaRegistry)
	if c.Plugin == nil {
		l.broken["sink"] = true // reported; sink's "exactly one of Handler and Plugin" is not
	}
	l.check(c)
	p.Config = c
	p.sinkRaw = l.sinkRaw
	return p
}

// check applies sink's own validation (sink.Config.Validate, with its rules between fields,
// the managed Kafka properties and the schema name) to the Config the file gives. Each
// problem is reported at the file's path and line of its field, unless the file's checks
// reported that value, or its section, already.
func (l *loader) check(c sink.Config) {
	err := c.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, err := range errs {
		var ce *sink.ConfigError
		if !errors.As(err, &ce) {
			l.fail("", 0, "%v", err)
			continue
		}
		path := fieldPath(ce.Field)
		if !l.reported(path) {
			l.fail(path, l.lines[path], "%s", fileReason(ce.Reason))
		}
	}
}

// reported reports whether an error was found at path, inside it or at a section holding it,
// or whether its section could not be decoded.
func (l *loader) reported(path string) bool {
	section, _, _ := strings.Cut(path, ".")
	section, _, _ = strings.Cut(section, "[")
	if l.broken[""] || l.broken[section] || l.unresolvedWithin(path) {
		return true
	}
	for _, e := range l.errs {
		if e.Path == path || within(e.Path, path) || within(path, e.Path) {
			return true
		}
	}
	return false
}

// within reports whether path is inside parent: "kafka.topics[1]" is inside "kafka.topics"
// and "kafka", and everything is inside "", the file.
func within(path, parent string) bool {
	return parent == "" || strings.HasPrefix(path, parent+".") || strings.HasPrefix(path, parent+"[")
}
