package pipeline

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/internal/suggest"
)

// rawFile is the file's layout. Leaves are yaml.Node values, so that the strict decode only
// checks keys and sections; each leaf is then expanded and converted with its path.
//
// A key that sets a sink.Config field names it in its config tag, with the conversion
// setFields applies (see fields.go): a new setting is one line here and its Config field.
// Keys without a conversion are converted by load. A required tag says, for the file, what
// a key that sink.Config.Validate requires holds.
type rawFile struct {
	Pipeline   yaml.Node     `yaml:"pipeline" config:"Pipeline,string"`
	InstanceID yaml.Node     `yaml:"instance_id" config:"InstanceID,string"`
	Kafka      rawKafka      `yaml:"kafka"`
	Database   rawDatabase   `yaml:"database"`
	Batch      rawBatch      `yaml:"batch"`
	Timeouts   rawTimeouts   `yaml:"timeouts"`
	Retry      rawRetry      `yaml:"retry"`
	OnPoison   yaml.Node     `yaml:"on_poison" config:"OnPoison"`
	DeadLetter rawDeadLetter `yaml:"dead_letter"`
	Sink       yaml.Node     `yaml:"sink" config:"Plugin"`
	Registry   rawRegistry   `yaml:"schema_registry"`
	HTTP       yaml.Node     `yaml:"http"`
	Console    yaml.Node     `yaml:"console"` // eosink console's settings (console.go)
	Tracing    yaml.Node     `yaml:"tracing"` // eosink run's OTLP export of spans (tracing.go)
	Log        rawLog        `yaml:"log" config:"Logger"`
	// unhealthy_on_stopped_partition: /healthz fails while a partition is stopped.
	UnhealthyOnStopped yaml.Node `yaml:"unhealthy_on_stopped_partition" config:"UnhealthyOnStoppedPartition,bool"`
	// redact_error_values: error texts in logs and dead_letters.error without record data.
	RedactErrorValues yaml.Node `yaml:"redact_error_values" config:"RedactErrorValues,bool"`
}

type rawKafka struct {
	Brokers         yaml.Node `yaml:"brokers" config:"Brokers" required:"Kafka's bootstrap servers, for example 127.0.0.1:9092 or ${KAFKA_BOOTSTRAP_SERVERS}"`
	Group           yaml.Node `yaml:"group" config:"GroupID,string" required:"the Kafka consumer group"`
	Topics          yaml.Node `yaml:"topics" config:"Topics"`
	InitialPosition yaml.Node `yaml:"initial_position" config:"InitialPosition"`
	CommitToKafka   yaml.Node `yaml:"commit_to_kafka" config:"CommitToKafka,bool"`
	CommitInterval  yaml.Node `yaml:"commit_interval" config:"KafkaCommitInterval,duration"`
	Properties      yaml.Node `yaml:"properties" config:"Kafka"`
}

type rawDatabase struct {
	URL         yaml.Node `yaml:"url" config:"DatabaseURL" required:"a PostgreSQL connection string, for example ${DATABASE_URL}"`
	Schema      yaml.Node `yaml:"schema" config:"Schema,string"`
	AutoMigrate yaml.Node `yaml:"auto_migrate" config:"AutoMigrate,bool"`
	Isolation   yaml.Node `yaml:"isolation" config:"IsolationLevel"`
}

type rawBatch struct {
	MaxRecords       yaml.Node `yaml:"max_records" config:"MaxBatchRecords,count"`
	MaxBytes         yaml.Node `yaml:"max_bytes" config:"MaxBatchBytes,size"`
	MaxWait          yaml.Node `yaml:"max_wait" config:"MaxBatchWait,duration"`
	MaxBufferedBytes yaml.Node `yaml:"max_buffered_bytes" config:"MaxBufferedBytes,size"`
	MaxTotalBuffered yaml.Node `yaml:"max_total_buffered_bytes" config:"MaxTotalBufferedBytes,size"`
}

type rawTimeouts struct {
	Revoke            yaml.Node `yaml:"revoke" config:"RevokeTimeout,duration"`
	Shutdown          yaml.Node `yaml:"shutdown" config:"ShutdownTimeout,duration"`
	Lock              yaml.Node `yaml:"lock" config:"LockTimeout,duration"`
	IdleInTransaction yaml.Node `yaml:"idle_in_transaction" config:"IdleInTransactionTimeout,duration"`
	Claim             yaml.Node `yaml:"claim" config:"ClaimTimeout,duration"`
}

type rawRetry struct {
	Backoff    yaml.Node `yaml:"backoff" config:"RetryBackoff,duration"`
	MaxBackoff yaml.Node `yaml:"max_backoff" config:"MaxRetryBackoff,duration"`
}

type rawDeadLetter struct {
	MaxRatio yaml.Node `yaml:"max_ratio" config:"MaxDeadLetterRatio,ratio"`
	Window   yaml.Node `yaml:"window" config:"DeadLetterWindow,count"`
}

type rawLog struct {
	Format   yaml.Node `yaml:"format"`
	Level    yaml.Node `yaml:"level"`
	Progress yaml.Node `yaml:"progress"` // eosink run's progress line: interval, 0 or off for none
}

// decodeRaw parses data into the document's top-level mapping and, strictly, into raw. Every
// problem is reported to l with the path of the key concerned.
func (l *loader) decodeRaw(data []byte, raw *rawFile) (body *yaml.Node) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.fail("", 0, "the file is empty")
		} else {
			line, msg := yamlMessage(err.Error())
			l.fail("", line, "%s", msg)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			line, msg := yamlMessage(err.Error())
			l.fail("", line, "%s", msg)
		} else {
			l.fail("", extra.Line, "holds more than one YAML document (one file is one pipeline)")
		}
		return nil
	}
	body = deref(doc.Content[0])
	if body.Kind != yaml.MappingNode {
		l.fail("", body.Line, "must be a mapping of keys (%s), not %s", strings.Join(knownKeys[""], ", "), kindName(body))
		return nil
	}
	// Sections that are not mappings: reported here with their path; the decoder's messages
	// about them are dropped below.
	for i := 0; i+1 < len(body.Content); i += 2 {
		k, v := body.Content[i], deref(body.Content[i+1])
		if _, section := knownKeys[k.Value]; !section || isNull(v) || v.Kind == yaml.MappingNode {
			continue
		}
		l.fail(k.Value, v.Line, "must be a mapping of keys (%s), not %s", strings.Join(knownKeys[k.Value], ", "), kindName(v))
		l.broken[k.Value] = true
	}

	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err := strict.Decode(raw)
	if err == nil {
		return body
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		line, msg := yamlMessage(err.Error())
		l.fail("", line, "%s", msg)
		l.broken[""] = true
		return body
	}
	for _, msg := range te.Errors {
		l.strictError(body, msg)
	}
	return body
}

var (
	lineRE        = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	notFoundRE    = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	definedRE     = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	alreadySetRE  = regexp.MustCompile(`^field (.+) already set in type \S+$`)
	backquotedRE  = regexp.MustCompile("`[^`]*`")
	unmarshalText = "cannot unmarshal"
)

// strictError turns one message of the strict decoder into an error with a path.
func (l *loader) strictError(body *yaml.Node, msg string) {
	line, msg := yamlMessage(msg)
	if m := notFoundRE.FindStringSubmatch(msg); m != nil {
		key := m[1]
		parent := parentOf(body, line, key)
		known := knownKeys[parent]
		where := "the top level"
		if parent != "" {
			where = parent
		}
		l.fail(join(parent, key), line, "%s", suggest.UnknownKey(where, key, known))
		return
	}
	if m := definedRE.FindStringSubmatch(msg); m != nil {
		key, _ := strconv.Unquote(m[1])
		parent := parentOf(body, line, key)
		l.fail(join(parent, key), line, "duplicate key (first at line %s)", m[2])
		l.broken[parent] = true
		return
	}
	if m := alreadySetRE.FindStringSubmatch(msg); m != nil {
		parent := parentOf(body, line, m[1])
		l.fail(join(parent, m[1]), line, "duplicate key (also set by a merge)")
		return
	}
	if strings.Contains(msg, unmarshalText) && len(l.broken) > 0 {
		return // a section of the wrong kind, reported with its path already
	}
	// Never print the decoder's quotes of values: they may be secrets.
	l.fail("", line, "%s", backquotedRE.ReplaceAllString(msg, "(value not shown)"))
	l.broken[""] = true
}

// yamlMessage splits "yaml: line N: message" into N and the message.
func yamlMessage(s string) (int, string) {
	s = strings.TrimPrefix(s, "yaml: ")
	if m := lineRE.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, m[2]
	}
	return 0, s
}

// parentOf returns the path of the section holding key at line, "" for the top level.
func parentOf(body *yaml.Node, line int, key string) string {
	var find func(n *yaml.Node, path string) (string, bool)
	find = func(n *yaml.Node, path string) (string, bool) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			// Aliases are not followed: their keys are found where they are anchored, and
			// following them could take exponential time.
			k, v := n.Content[i], n.Content[i+1]
			if k.Line == line && k.Value == key {
				return path, true
			}
			if v.Kind == yaml.MappingNode {
				if p, ok := find(v, join(path, k.Value)); ok {
					return p, true
				}
			}
		}
		return "", false
	}
	p, _ := find(body, "")
	return p
}

// deref follows aliases; it returns an empty node for nil.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{}
	}
	return n
}

// isNull reports whether n is absent or an explicit null (`key:`, `key: ~`, `key: null`).
func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "empty"
}

// join appends a key to a path: "kafka" + "group" is "kafka.group"; a key that is not a plain
// name is bracketed: "kafka.properties[sasl.password]".
func join(path, key string) string {
	if path == "" {
		return key
	}
	if plainKey.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + key + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// sortedKeys returns m's keys in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
