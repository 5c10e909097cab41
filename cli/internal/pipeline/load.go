package pipeline

import (
	"errors"
	"fmt"
	"io"
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
	secrets Redactor
	broken  map[string]bool // sections that could not be decoded: their missing keys are not reported
	lines   map[string]int  // lines of the values read, by path, for errors found later
	// dropped are the paths whose values the Config lacks because they were wrong (and
	// reported) or unset (with Options.AllowUnset); emptyRef those whose reference gave an
	// empty value, to the value as written. Both for sink.Config.Validate's errors (check).
	dropped  map[string]bool
	emptyRef map[string]string
	// topicPaths are the file's paths of Config.Topics, which leaves out the wrong ones.
	topicPaths []string

	sinkRaw    map[string]any    // the sink section given to the plugin
	warnings   Errors            // with Options.AllowUnset: the unset variables
	unresolved map[string]string // paths whose value had an unset variable, to the value as written
}

func newLoader(file string, x *expander) *loader {
	return &loader{file: file, x: x, broken: map[string]bool{}, lines: map[string]int{}, unresolved: map[string]string{},
		dropped: map[string]bool{}, emptyRef: map[string]string{}}
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

// bad reports a value that cannot be read (its syntax, unit or type is wrong): the Config
// goes without it.
func (l *loader) bad(path string, line int, format string, args ...any) {
	l.fail(path, line, format, args...)
	l.dropped[path] = true
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
	c.Brokers = l.brokers("kafka.brokers", &k.Brokers)
	c.Topics, l.topicPaths = l.topics("kafka.topics", &k.Topics)
	c.InitialPosition = sink.Earliest
	if s, ok := l.value("kafka.initial_position", &k.InitialPosition); ok {
		pos, err := sink.ParseInitialPosition(s.val)
		if err != nil {
			l.bad("kafka.initial_position", s.line, "%s is not earliest, latest, error or kafka-committed", describe(s))
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

	// database
	d := &raw.Database
	if s, ok := l.value("database.url", &d.URL); ok {
		c.DatabaseURL = s.val
		l.secrets.AddDatabaseURL(s.val)
	}
	if s, ok := l.value("database.isolation", &d.Isolation); ok {
		// As SQL spells it, or with _ or - for the spaces, in any case.
		c.IsolationLevel = pgx.TxIsoLevel(strings.NewReplacer("_", " ", "-", " ").Replace(strings.ToLower(strings.TrimSpace(s.val))))
	}

	// on_poison
	if s, ok := l.value("on_poison", &raw.OnPoison); ok {
		policy, err := sink.ParsePoisonPolicy(s.val)
		if err != nil {
			l.bad("on_poison", s.line, "%s is not stop or dead-letter", describe(s))
		}
		c.OnPoison = policy
	}

	// http
	p := &Pipeline{File: l.file}
	p.HTTP, p.HTTPOptions = l.http(&raw.HTTP)
	p.Console = l.console(&raw.Console)
	p.Tracing = l.tracing(&raw.Tracing)

	// log
	p.Logger = l.logSection(&raw.Log.Format, &raw.Log.Level, logOut)
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
	refused := l.check(c)
	l.checkKafka(props, k.Properties.Line, refused)
	p.Config = c
	p.sinkRaw, p.topicPaths = l.sinkRaw, l.topicPaths
	return p
}

// check applies sink's validation (sink.Config.Validate: which values are valid, alone and
// together) to the Config the file gives, and reports each problem at the file's path and
// line of its field, in the file's words. It returns the paths of the problems. A problem
// about a value the Config lacks because the file's was wrong or unset (unknown) is left
// out: it is about the default or the empty value that stands in.
func (l *loader) check(c sink.Config) (refused map[string]bool) {
	refused = map[string]bool{}
	err := c.Validate()
	if err == nil {
		return refused
	}
	for _, err := range unjoin(err) {
		var ce *sink.ConfigError
		if !errors.As(err, &ce) {
			l.fail("", 0, "%v", err)
			continue
		}
		path := pathOf(ce.Field, l.topicPaths)
		refused[path] = true
		if l.unknown(path) {
			continue
		}
		reason := ce.Reason
		if text := requiredText[ce.Field]; text != "" && strings.HasPrefix(reason, "required") {
			reason = "required: " + text
		}
		reason = fileText(reason, l.topicPaths)
		if ref, ok := l.emptyRef[path]; ok {
			reason += fmt.Sprintf(" (%s gives an empty value)", ref)
		}
		l.fail(path, l.lines[path], "%s", reason)
	}
	return refused
}

// unknown reports whether the Config lacks the file's value at path, inside it or at a
// section holding it: the value was wrong (reported) or unset (with Options.AllowUnset), or
// its section could not be decoded.
func (l *loader) unknown(path string) bool {
	section, _, _ := strings.Cut(path, ".")
	section, _, _ = strings.Cut(section, "[")
	if l.broken[""] || l.broken[section] {
		return true
	}
	for p := range l.dropped {
		if p == path || within(p, path) || within(path, p) {
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
