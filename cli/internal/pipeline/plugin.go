package pipeline

import (
	"errors"
	"log/slog"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

// plugin builds the sink section's plugin.
func (l *loader) plugin(n *yaml.Node, pipelineName, schema string, logger *slog.Logger, reg *plugin.SchemaRegistry) (sink.Plugin, string) {
	n = deref(n)
	if isNull(n) {
		if !l.broken[""] {
			l.fail("sink", 0, "required: the plugin section, with a type (registered: %s)", strings.Join(plugin.Names(), ", "))
		}
		return nil, ""
	}
	if n.Kind != yaml.MappingNode {
		l.fail("sink", n.Line, "must be a mapping with a type (registered: %s), not %s", strings.Join(plugin.Names(), ", "), kindName(n))
		return nil, ""
	}
	// anyValue expands aliases: a few lines of anchors can stand for billions of values
	// ("billion laughs"). The section's size after expansion is counted first, in time
	// linear in the file, and bounded.
	if size := expandedSize(n, maxSinkNodes, map[*yaml.Node]int{}); size > maxSinkNodes {
		l.fail("sink", n.Line, "expands to more than %d values: its aliases (*name) repeat anchored values too often; "+
			"write the section out, or use fewer aliases", maxSinkNodes)
		return nil, ""
	}
	before := len(l.errs)
	l.lines["sink"] = n.Line
	v, _ := l.anyValue("sink", n, 0)
	if len(l.errs) > before {
		return nil, "" // the plugin would only see a partial section
	}
	cfg := plugin.Config{Path: "sink", Pipeline: pipelineName, Schema: schema, Raw: v.(map[string]any), Logger: logger, SchemaRegistry: reg}
	l.sinkRaw = cfg.Raw
	plugin, err := plugin.Build(cfg)
	if err != nil && l.unresolvedWithin("sink") {
		// The plugin saw the section without the values of unset variables: its complaint
		// may be about them. A warning, like them; run checks it with the values.
		var msgs []string
		for _, err := range unjoin(err) {
			msg := err.Error()
			var ce *sink.ConfigError
			if errors.As(err, &ce) {
				msg = ce.Reason
				if field, ok := strings.CutPrefix(ce.Field, "sink."); ok {
					msg = field + ": " + msg
				}
			}
			msgs = append(msgs, msg)
		}
		msg := strings.Join(msgs, "; ")
		l.warn("sink", n.Line, "the plugin was not built without the unset variables: %s",
			l.secrets.Redact(backquotedRE.ReplaceAllString(msg, "(value not shown)")))
		return nil, cfg.Type()
	}
	if err != nil {
		// Every problem the plugin found, each at its field (joined with errors.Join).
		for _, err := range unjoin(err) {
			var ce *sink.ConfigError
			if errors.As(err, &ce) {
				// yaml's decode errors quote the start of the value (`hunter2...`): drop it.
				l.fail(ce.Field, l.lineOf(ce.Field), "%s", l.secrets.Redact(backquotedRE.ReplaceAllString(ce.Reason, "(value not shown)")))
			} else {
				l.fail("sink", n.Line, "%v", l.secrets.Redact(err.Error()))
			}
		}
		return nil, cfg.Type()
	}
	return plugin, cfg.Type()
}

// lineOf returns the line of a path in the sink section, or of its nearest parent there.
func (l *loader) lineOf(path string) int {
	for path != "" {
		if line, ok := l.lines[path]; ok {
			return line
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
	return 0
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	return []error{err}
}
