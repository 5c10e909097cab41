// Package pipeline loads a pipeline config file, the YAML document `eosink run -config`
// takes, into a sink.Config with its plugin. The format is documented in
// docs/pipeline-config.md.
//
// Loading does no I/O besides reading the file and the files its ${file:...} references
// name: everything is validated before anything connects, and every error names the field's
// path in the file. Errors and summaries never hold the database URL, Kafka property values,
// or anything read from a file.
package pipeline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink"
)

// Options tune Load and Parse.
type Options struct {
	// LogOutput receives the logs of the logger the file configures (its log section).
	// Defaults to os.Stderr.
	LogOutput io.Writer
	// LookupEnv reads the environment for ${NAME} references. Defaults to os.LookupEnv.
	LookupEnv func(name string) (string, bool)
}

// Pipeline is a loaded, valid pipeline config file.
type Pipeline struct {
	// File is the file's name as given to Load.
	File string
	// Config is ready for sink.New (see NewSink), with the plugin in Config.Plugin and the
	// logger in Config.Logger; Registerer is unset. Pipeline and Schema hold their defaults.
	Config sink.Config
	// Plugin is the sink section's plugin, the same as Config.Plugin.
	Plugin sink.Plugin
	// SinkType is the sink section's type.
	SinkType string
	// HTTP is the address to serve metrics and probes on; empty for none.
	HTTP string
	// Logger writes to Options.LogOutput in the file's log format and level.
	Logger *slog.Logger

	redact redactor
}

// Load reads the pipeline config file at path, expands its references, validates it and
// builds its plugin. An invalid file gives Errors, one per problem found.
func Load(path string, opts Options) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse is Load for a file's content; name names the file in errors, and relative
// ${file:...} paths are read from name's folder.
func Parse(name string, data []byte, opts Options) (*Pipeline, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	l := &loader{
		file:   name,
		x:      &expander{lookupEnv: opts.LookupEnv, readFile: os.ReadFile, dir: filepath.Dir(name)},
		broken: map[string]bool{},
	}
	p := l.load(data, opts.LogOutput)
	l.secrets.add(l.x.fromFiles...)
	if len(l.errs) > 0 {
		errs := l.errs.sorted()
		for _, e := range errs {
			e.Path, e.Msg = l.secrets.redact(e.Path), l.secrets.redact(e.Msg)
		}
		return nil, errs
	}
	p.redact = l.secrets
	return p, nil
}

// loader collects the errors of one file.
type loader struct {
	file    string
	errs    Errors
	x       *expander
	secrets redactor
	broken  map[string]bool // sections that could not be decoded: their missing keys are not reported
	lines   map[string]int  // lines of the sink section's paths, for the plugin's errors
}

func (l *loader) fail(path string, line int, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// missing reports a required field, unless its value was reported already or its section
// could not be decoded.
func (l *loader) missing(path, section string, s scalar, msg string) {
	if s.failed || l.broken[""] || l.broken[section] {
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
	c.CommitToKafka = l.boolean("kafka.commit_to_kafka", &k.CommitToKafka)
	c.KafkaCommitInterval = l.duration("kafka.commit_interval", &k.CommitInterval)
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
	if c.Brokers != "" && props["bootstrap.servers"] != "" {
		l.fail("kafka.properties[bootstrap.servers]", k.Properties.Line, "set kafka.brokers or this property, not both")
	}

	// pipeline, instance
	c.Pipeline = l.str("pipeline", &raw.Pipeline)
	if c.Pipeline == "" {
		c.Pipeline = c.GroupID
	}
	c.InstanceID = l.str("instance_id", &raw.InstanceID)

	// database
	d := &raw.Database
	if s, ok := l.value("database.url", &d.URL); ok {
		c.DatabaseURL = s.val
		l.checkDatabaseURL("database.url", s)
	} else {
		l.missing("database.url", "database", s, "required: a PostgreSQL connection string, for example ${DATABASE_URL}")
	}
	c.Schema = "eosink"
	if s, ok := l.value("database.schema", &d.Schema); ok {
		if strings.ContainsRune(s.val, 0) || len(s.val) > 63 {
			l.fail("database.schema", s.line, "%s is not a PostgreSQL identifier (at most 63 bytes, no NUL)", describe(s))
		}
		c.Schema = s.val
	}
	c.AutoMigrate = l.boolean("database.auto_migrate", &d.AutoMigrate)
	c.IsolationLevel = pgx.ReadCommitted
	if s, ok := l.value("database.isolation", &d.Isolation); ok {
		norm := strings.NewReplacer("_", " ", "-", " ").Replace(strings.ToLower(strings.TrimSpace(s.val)))
		switch lvl := pgx.TxIsoLevel(norm); lvl {
		case pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable:
			c.IsolationLevel = lvl
		default:
			l.fail("database.isolation", s.line, "%s is not read committed, repeatable read or serializable", describe(s))
		}
	}

	// batch, timeouts, retry
	b := &raw.Batch
	c.MaxBatchRecords = l.count("batch.max_records", &b.MaxRecords)
	c.MaxBatchBytes = l.size("batch.max_bytes", &b.MaxBytes)
	c.MaxBatchWait = l.duration("batch.max_wait", &b.MaxWait)
	c.MaxBufferedBytes = l.size("batch.max_buffered_bytes", &b.MaxBufferedBytes)
	if batchBytes, buffered := or(c.MaxBatchBytes, 4<<20), or(c.MaxBufferedBytes, 8<<20); buffered < batchBytes {
		what := fmt.Sprintf("%d bytes", buffered)
		if c.MaxBufferedBytes == 0 {
			what += " (the default)"
		}
		l.fail("batch.max_buffered_bytes", b.MaxBufferedBytes.Line, "%s is less than batch.max_bytes (%d bytes); set it at least as large",
			what, batchBytes)
	}
	t := &raw.Timeouts
	c.RevokeTimeout = l.duration("timeouts.revoke", &t.Revoke)
	c.ShutdownTimeout = l.duration("timeouts.shutdown", &t.Shutdown)
	c.LockTimeout = l.duration("timeouts.lock", &t.Lock)
	c.IdleInTransactionTimeout = l.duration("timeouts.idle_in_transaction", &t.IdleInTransaction)
	c.ClaimTimeout = l.duration("timeouts.claim", &t.Claim)
	c.RetryBackoff = l.duration("retry.backoff", &raw.Retry.Backoff)
	c.MaxRetryBackoff = l.duration("retry.max_backoff", &raw.Retry.MaxBackoff)
	if backoff, maxBackoff := or(c.RetryBackoff, 100*time.Millisecond), or(c.MaxRetryBackoff, 5*time.Second); maxBackoff < backoff {
		l.fail("retry.max_backoff", raw.Retry.MaxBackoff.Line, "%s is less than retry.backoff (%s)", maxBackoff, backoff)
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
	if s, ok := l.value("http", &raw.HTTP); ok {
		host, port, err := net.SplitHostPort(s.val)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			l.fail("http", s.line, "%s is not a listen address (host:port, for example 127.0.0.1:9464 or :9464)", describe(s))
		}
		p.HTTP = s.val
	}

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
	ho := &slog.HandlerOptions{Level: level}
	if format == "json" {
		p.Logger = slog.New(slog.NewJSONHandler(logOut, ho))
	} else {
		p.Logger = slog.New(slog.NewTextHandler(logOut, ho))
	}
	c.Logger = p.Logger

	// sink, last: the plugin gets the pipeline's name, schema and logger.
	p.Plugin, p.SinkType = l.plugin(&raw.Sink, c.Pipeline, c.Schema, p.Logger)
	c.Plugin = p.Plugin
	p.Config = c
	return p
}

// scalar is one expanded value of the file.
type scalar struct {
	val    string // after expansion
	raw    string // as written
	subst  bool   // raw held a reference (or $$)
	quoted bool   // raw was quoted: always a string
	failed bool   // the value was wrong, and reported
	line   int
}

// describe shows a value in a message: quoted as written, or, when it came from a
// reference, the reference and not its value.
func describe(s scalar) string {
	if s.subst {
		return "the value of " + strconv.Quote(s.raw)
	}
	return strconv.Quote(s.val)
}

// value expands the single value at n. ok is false when n is absent, null or empty after
// expansion (all three mean unset), or when it is wrong: not a single value, or a reference
// that does not resolve (reported, and s.failed is set).
func (l *loader) value(path string, n *yaml.Node) (s scalar, ok bool) {
	n = deref(n)
	if isNull(n) {
		return scalar{line: n.Line}, false
	}
	if n.Kind != yaml.ScalarNode {
		l.fail(path, n.Line, "must be a single value, not %s", kindName(n))
		return scalar{line: n.Line, failed: true}, false
	}
	v, subst, err := l.x.expand(n.Value)
	if err != nil {
		l.fail(path, n.Line, "%v", err)
		return scalar{line: n.Line, failed: true}, false
	}
	s = scalar{val: v, raw: n.Value, subst: subst, line: n.Line,
		quoted: n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0}
	return s, v != ""
}

func (l *loader) str(path string, n *yaml.Node) string {
	s, _ := l.value(path, n)
	return s.val
}

func (l *loader) boolean(path string, n *yaml.Node) bool {
	s, ok := l.value(path, n)
	if !ok {
		return false
	}
	switch s.val {
	case "true", "True", "TRUE":
		return true
	case "false", "False", "FALSE":
		return false
	}
	l.fail(path, s.line, "%s is not true or false", describe(s))
	return false
}

// count is a positive integer; 0 means unset.
func (l *loader) count(path string, n *yaml.Node) int {
	s, ok := l.value(path, n)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(strings.ReplaceAll(s.val, "_", ""))
	if err != nil || v <= 0 {
		l.fail(path, s.line, "%s is not a positive whole number", describe(s))
		return 0
	}
	return v
}

var sizeRE = regexp.MustCompile(`^([0-9][0-9_]*)\s*([KMG]i?B|B)?$`)

var sizeUnits = map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

// size is a positive number of bytes, with an optional unit (KB, MB, GB, KiB, MiB, GiB); 0
// means unset.
func (l *loader) size(path string, n *yaml.Node) int {
	s, ok := l.value(path, n)
	if !ok {
		return 0
	}
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s.val))
	if m != nil {
		v, err := strconv.ParseInt(strings.ReplaceAll(m[1], "_", ""), 10, 64)
		unit := sizeUnits[m[2]]
		if err == nil && v > 0 && v <= (1<<40)/unit {
			return int(v * unit)
		}
	}
	l.fail(path, s.line, "%s is not a positive size in bytes (a number, optionally with KB, MB, GB, KiB, MiB or GiB, at most 1 TiB)", describe(s))
	return 0
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

// duration is a positive Go duration ("100ms", "1m30s"); 0 means unset.
func (l *loader) duration(path string, n *yaml.Node) time.Duration {
	s, ok := l.value(path, n)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s.val))
	if err != nil {
		l.fail(path, s.line, "%s is not a duration; write Go syntax with a unit, such as 100ms, 30s or 1m30s", describe(s))
		return 0
	}
	if d <= 0 {
		l.fail(path, s.line, "%s must be positive", describe(s))
		return 0
	}
	return d
}

// brokers is a comma-separated string or a list of host:port; s describes a single value,
// for messages.
func (l *loader) brokers(path string, n *yaml.Node) (string, scalar) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		s, _ := l.value(path, n)
		return strings.TrimSpace(s.val), s
	}
	var hosts []string
	failed := false
	for i, item := range n.Content {
		s, ok := l.value(fmt.Sprintf("%s[%d]", path, i), item)
		if ok {
			hosts = append(hosts, strings.TrimSpace(s.val))
		}
		failed = failed || s.failed
	}
	return strings.Join(hosts, ","), scalar{line: n.Line, failed: failed}
}

var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// topics is a list of topic names (or one name).
func (l *loader) topics(path string, n *yaml.Node) []string {
	const none = "at least one topic is required"
	n = deref(n)
	items, list := []*yaml.Node{n}, n.Kind == yaml.SequenceNode
	switch {
	case isNull(n):
		l.missing(path, "kafka", scalar{}, none)
		return nil
	case list && len(n.Content) == 0:
		l.fail(path, n.Line, "%s", none)
		return nil
	case list:
		items = n.Content
	}
	var topics []string
	seen := map[string]int{}
	for i, item := range items {
		p := path
		if list {
			p = fmt.Sprintf("%s[%d]", path, i)
		}
		s, ok := l.value(p, item)
		if !ok {
			if !list {
				l.missing(path, "kafka", s, none)
			} else if !s.failed {
				l.fail(p, s.line, "empty topic name")
			}
			continue
		}
		switch {
		case strings.HasPrefix(s.val, "^"):
			l.fail(p, s.line, "%s: topic patterns are not supported; list the topics", describe(s))
		case !topicRE.MatchString(s.val) || s.val == "." || s.val == "..":
			l.fail(p, s.line, "%s is not a Kafka topic name (letters, digits, '.', '_' and '-', at most 249)", describe(s))
		case seen[s.val] > 0:
			l.fail(p, s.line, "%s is listed twice (first at line %d)", describe(s), seen[s.val])
		default:
			seen[s.val] = s.line
			topics = append(topics, s.val)
		}
	}
	return topics
}

// managedProperties are set by eosink; the file may only repeat their value.
var managedProperties = map[string]string{"enable.auto.commit": "false", "auto.offset.reset": "error"}

// secretProperty reports whether a Kafka property's value is a secret (redacted from
// messages as a precaution; no value of any property is ever printed).
func secretProperty(key string) bool {
	for _, w := range []string{"password", "secret", "jaas", "token", "key", "credential"} {
		if strings.Contains(strings.ToLower(key), w) {
			return true
		}
	}
	return false
}

// properties are librdkafka properties: a mapping of names to single values, passed on as
// strings.
func (l *loader) properties(path string, n *yaml.Node) map[string]string {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.fail(path, n.Line, "must be a mapping of librdkafka property names to values, not %s", kindName(n))
		return nil
	}
	props := map[string]string{}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := deref(n.Content[i]), deref(n.Content[i+1])
		key := kn.Value
		p := path + "[" + key + "]"
		if kn.Kind != yaml.ScalarNode || key == "" {
			l.fail(path, kn.Line, "property names must be single values")
			continue
		}
		if line, dup := first[key]; dup {
			l.fail(p, kn.Line, "duplicate key (first at line %d)", line)
			continue
		}
		first[key] = kn.Line
		s, ok := l.value(p, vn)
		if !ok {
			if !s.failed {
				l.fail(p, kn.Line, "needs a value")
			}
			continue
		}
		if secretProperty(key) {
			l.secrets.add(s.val)
		}
		switch want, managed := managedProperties[key]; {
		case managed && s.val != want:
			l.fail(p, kn.Line, "is managed by eosink and must be %s (positions come from the database); leave it out", want)
		case key == "group.id":
			l.fail(p, kn.Line, "set kafka.group instead")
		case strings.HasPrefix(key, "go."):
			l.fail(p, kn.Line, "go.* properties configure the Go client, which eosink manages")
		}
		props[key] = s.val
	}
	return props
}

// checkDatabaseURL parses the connection string without connecting, and remembers its
// password for redaction.
func (l *loader) checkDatabaseURL(path string, s scalar) {
	l.secrets.add(s.val)
	for _, m := range passwordRE.FindAllStringSubmatch(s.val, -1) {
		l.secrets.add(m[1], m[2], strings.Trim(m[2], "'"))
	}
	cfg, err := pgxpool.ParseConfig(s.val)
	if err != nil {
		// pgx masks the password in its messages; redact catches anything else.
		l.fail(path, s.line, "not a PostgreSQL connection string: %s", l.secrets.redact(err.Error()))
		return
	}
	l.secrets.add(cfg.ConnConfig.Password)
}

// passwordRE finds passwords in connection strings that do not parse: the URL form's
// user:password@ and the key/value form's password=.
var passwordRE = regexp.MustCompile(`://[^:/@]*:([^@/]*)@|password\s*=\s*('[^']*'|\S+)`)

// plugin builds the sink section's plugin.
func (l *loader) plugin(n *yaml.Node, pipelineName, schema string, logger *slog.Logger) (sink.Plugin, string) {
	n = deref(n)
	if isNull(n) {
		if !l.broken[""] {
			l.fail("sink", 0, "required: the plugin section, with a type (registered: %s)", strings.Join(sink.Plugins(), ", "))
		}
		return nil, ""
	}
	if n.Kind != yaml.MappingNode {
		l.fail("sink", n.Line, "must be a mapping with a type (registered: %s), not %s", strings.Join(sink.Plugins(), ", "), kindName(n))
		return nil, ""
	}
	before := len(l.errs)
	l.lines = map[string]int{"sink": n.Line}
	v, _ := l.anyValue("sink", n, 0)
	if len(l.errs) > before {
		return nil, "" // the plugin would only see a partial section
	}
	cfg := sink.PluginConfig{Path: "sink", Pipeline: pipelineName, Schema: schema, Raw: v.(map[string]any), Logger: logger}
	plugin, err := sink.BuildPlugin(cfg)
	if err != nil {
		var ce *sink.ConfigError
		if errors.As(err, &ce) {
			// yaml's decode errors quote the start of the value (`hunter2...`): drop it.
			l.fail(ce.Field, l.lineOf(ce.Field), "%s", backquotedRE.ReplaceAllString(ce.Reason, "(value not shown)"))
		} else {
			l.fail("sink", n.Line, "%v", err)
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

// anyValue converts a node of the sink section into strings, numbers, booleans, nil, []any
// and map[string]any. Values with references are strings, except that a plain (unquoted)
// one whose whole value is a canonical number or true/false takes that type, as if written
// literally; quote it to keep a string.
func (l *loader) anyValue(path string, n *yaml.Node, depth int) (any, bool) {
	n = deref(n)
	if depth > 50 {
		l.fail(path, n.Line, "nested too deeply")
		return nil, false
	}
	l.lines[path] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		first := map[string]int{}
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := deref(n.Content[i]), n.Content[i+1]
			if kn.Kind != yaml.ScalarNode {
				l.fail(path, kn.Line, "keys must be single values, not %s", kindName(kn))
				continue
			}
			if kn.ShortTag() == "!!merge" {
				merges = append(merges, deref(vn))
				continue
			}
			key := kn.Value
			if line, dup := first[key]; dup {
				l.fail(join(path, key), kn.Line, "duplicate key (first at line %d)", line)
				continue
			}
			first[key] = kn.Line
			if v, ok := l.anyValue(join(path, key), vn, depth+1); ok {
				m[key] = v
			}
		}
		// YAML merge keys (<<: *base): explicit keys win.
		for _, mn := range merges {
			sources := []*yaml.Node{mn}
			if mn.Kind == yaml.SequenceNode {
				sources = mn.Content
			}
			for _, src := range sources {
				mv, ok := l.anyValue(path, src, depth+1)
				mm, isMap := mv.(map[string]any)
				if !ok || !isMap {
					if ok {
						l.fail(path, src.Line, "a merge (<<) needs a mapping")
					}
					continue
				}
				for k, v := range mm {
					if _, set := m[k]; !set {
						m[k] = v
					}
				}
			}
		}
		return m, true
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			if v, ok := l.anyValue(fmt.Sprintf("%s[%d]", path, i), item, depth+1); ok {
				list = append(list, v)
			}
		}
		return list, true
	case yaml.ScalarNode:
		if isNull(n) {
			return nil, true
		}
		s, _ := l.value(path, n)
		if s.failed {
			return nil, false
		}
		if s.subst {
			if s.quoted {
				return s.val, true
			}
			return canonical(s.val), true
		}
		var v any
		if err := n.Decode(&v); err != nil {
			l.fail(path, n.Line, "cannot decode this value")
			return nil, false
		}
		switch v.(type) {
		case string, int, int64, uint64, float64, bool, nil:
			return v, true
		}
		return n.Value, true // timestamps, binary: as written
	}
	return nil, true
}

// canonical types a substituted value: an integer or decimal written canonically, or true or
// false; anything else stays a string, so that no value changes when typed.
func canonical(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(i, 10) == s {
		return int(i)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && strconv.FormatFloat(f, 'f', -1, 64) == s {
		return f
	}
	if s == "true" || s == "false" {
		return s == "true"
	}
	return s
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// NewSink creates the sink (sink.New) with reg as its Registerer (nil: no metrics). A
// *sink.ConfigError, which names a Config field, becomes an Error naming the file's field.
func (p *Pipeline) NewSink(reg prometheus.Registerer) (*sink.Sink, error) {
	cfg := p.Config
	cfg.Registerer = reg
	s, err := sink.New(cfg)
	if err == nil {
		return s, nil
	}
	var ce *sink.ConfigError
	if errors.As(err, &ce) {
		return nil, &Error{File: p.File, Path: fieldPath(ce.Field), Msg: p.redact.redact(ce.Reason)}
	}
	return nil, errors.New(p.redact.redact(err.Error()))
}

// Redact removes the file's secrets (database password, secret Kafka properties, values read
// from files) from s, for messages written by others.
func (p *Pipeline) Redact(s string) string { return p.redact.redact(s) }

// configFields maps sink.Config fields to the file's paths.
var configFields = map[string]string{
	"Brokers": "kafka.brokers", "GroupID": "kafka.group", "Topics": "kafka.topics", "Pipeline": "pipeline",
	"DatabaseURL": "database.url", "Pool": "database.url", "Schema": "database.schema", "AutoMigrate": "database.auto_migrate",
	"Handler": "sink", "Plugin": "sink", "OnPoison": "on_poison", "Kafka": "kafka.properties",
	"InitialPosition": "kafka.initial_position", "CommitToKafka": "kafka.commit_to_kafka", "KafkaCommitInterval": "kafka.commit_interval",
	"MaxBatchRecords": "batch.max_records", "MaxBatchBytes": "batch.max_bytes", "MaxBatchWait": "batch.max_wait",
	"MaxBufferedBytes": "batch.max_buffered_bytes", "IsolationLevel": "database.isolation",
	"LockTimeout": "timeouts.lock", "IdleInTransactionTimeout": "timeouts.idle_in_transaction", "ClaimTimeout": "timeouts.claim",
	"RetryBackoff": "retry.backoff", "MaxRetryBackoff": "retry.max_backoff", "RevokeTimeout": "timeouts.revoke",
	"ShutdownTimeout": "timeouts.shutdown", "InstanceID": "instance_id", "Registerer": "(metrics)", "Logger": "log",
}

// fieldPath maps a sink.Config field name, perhaps with an index ("Topics[0]",
// "Kafka[sasl.mechanism]"), to the file's path.
func fieldPath(field string) string {
	name, index, _ := strings.Cut(field, "[")
	path, ok := configFields[name]
	if !ok {
		return "Config." + field
	}
	if index != "" {
		path += "[" + index
	}
	return path
}

// Summary writes what the pipeline does, without secrets: no database URL, no Kafka
// property values.
func (p *Pipeline) Summary(w io.Writer) error {
	c := p.Config
	db := "?"
	if cfg, err := pgxpool.ParseConfig(c.DatabaseURL); err == nil {
		cc := cfg.ConnConfig
		db = fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
	}
	brokers := c.Brokers
	if brokers == "" {
		brokers = fmt.Sprint(c.Kafka["bootstrap.servers"])
	}
	props := sortedKeys(c.Kafka)
	if len(props) == 0 {
		props = []string{"none"}
	}
	http := p.HTTP
	if http == "" {
		http = "off"
	}
	lines := [][2]string{
		{"pipeline", c.Pipeline},
		{"kafka", fmt.Sprintf("group %s, topics %s, brokers %s", c.GroupID, strings.Join(c.Topics, ", "), brokers)},
		{"", fmt.Sprintf("initial position %s, commit to kafka %t", c.InitialPosition, c.CommitToKafka)},
		{"", fmt.Sprintf("properties: %s (values not shown)", strings.Join(props, ", "))},
		{"database", fmt.Sprintf("%s, schema %s, isolation %s, auto_migrate %t", db, c.Schema, c.IsolationLevel, c.AutoMigrate)},
		{"sink", p.SinkType},
		{"on_poison", c.OnPoison.String()},
		{"batch", fmt.Sprintf("max %d records, %s, wait %s; %s buffered per partition",
			or(c.MaxBatchRecords, 500), sizeText(or(c.MaxBatchBytes, 4<<20)), or(c.MaxBatchWait, 100*time.Millisecond), sizeText(or(c.MaxBufferedBytes, 8<<20)))},
		{"http", http},
	}
	for _, l := range lines {
		label := ""
		if l[0] != "" {
			label = l[0] + ":"
		}
		if _, err := fmt.Fprintf(w, "%-11s%s\n", label, p.redact.redact(l[1])); err != nil {
			return err
		}
	}
	return nil
}
