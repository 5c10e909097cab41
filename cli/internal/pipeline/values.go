package pipeline

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/internal/pgerr"
)

// scalar is one expanded value of the file.
type scalar struct {
	val    string // after expansion
	raw    string // as written
	subst  bool   // raw held a reference (or $$)
	quoted bool   // raw was quoted: always a string
	failed bool   // the value was wrong, and reported
	line   int

	unresolved bool // with Options.AllowUnset: an environment variable was unset (a warning); the value is unset
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
	if n.Line > 0 {
		l.lines[path] = n.Line
	}
	if isNull(n) {
		return scalar{line: n.Line}, false
	}
	if n.Kind != yaml.ScalarNode {
		l.bad(path, n.Line, "must be a single value, not %s", kindName(n))
		return scalar{line: n.Line, failed: true}, false
	}
	v, subst, err := l.x.expand(n.Value)
	if err != nil {
		l.bad(path, n.Line, "%v", err)
		return scalar{line: n.Line, failed: true}, false
	}
	s = scalar{val: v, raw: n.Value, subst: subst, line: n.Line,
		quoted: n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0}
	if len(l.x.unset) > 0 {
		// Only the names: the rest of the value may be a secret.
		what := "environment variable " + l.x.unset[0] + " is"
		if len(l.x.unset) > 1 {
			what = "environment variables " + strings.Join(l.x.unset, ", ") + " are"
		}
		l.warn(path, n.Line, "%s not set; the field is not checked (run needs it)", what)
		l.unresolved[path] = n.Value
		l.dropped[path] = true
		return scalar{raw: n.Value, subst: true, line: n.Line, unresolved: true}, false
	}
	if strings.ContainsRune(v, 0) {
		// Not the value: it may be a secret. PostgreSQL text, identifiers and librdkafka's
		// C strings cannot hold NUL, and a name cut at it would name something else.
		l.bad(path, n.Line, "holds a NUL byte (\\x00), which no name, PostgreSQL text or Kafka property can hold")
		return scalar{raw: n.Value, subst: subst, line: n.Line, failed: true}, false
	}
	if v == "" && subst {
		l.emptyRef[path] = n.Value
	}
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
	l.bad(path, s.line, "%s is not true or false", describe(s))
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
		l.bad(path, s.line, "%s is not a positive whole number", describe(s))
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
	l.bad(path, s.line, "%s is not a positive size in bytes (a number, optionally with KB, MB, GB, KiB, MiB or GiB, at most 1 TiB)", describe(s))
	return 0
}

// ratio is a positive share, as a number (0.2) or a percentage (20%); 0 means unset. Its
// upper bound is the field's rule (sink.Config.Validate).
func (l *loader) ratio(path string, n *yaml.Node) float64 {
	s, ok := l.value(path, n)
	if !ok {
		return 0
	}
	v := strings.TrimSpace(s.val)
	scale := 1.0
	if p, found := strings.CutSuffix(v, "%"); found {
		v, scale = strings.TrimSpace(p), 100
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f/scale > 0) {
		l.bad(path, s.line, "%s is not a share more than 0 (a number such as 0.2, or a percentage such as 20%%)", describe(s))
		return 0
	}
	return f / scale
}

// duration is a positive Go duration ("100ms", "1m30s"); 0 means unset.
func (l *loader) duration(path string, n *yaml.Node) time.Duration {
	s, ok := l.value(path, n)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s.val))
	if err != nil {
		l.bad(path, s.line, "%s is not a duration; write Go syntax with a unit, such as 100ms, 30s or 1m30s", describe(s))
		return 0
	}
	if d <= 0 {
		l.bad(path, s.line, "%s must be positive", describe(s))
		return 0
	}
	return d
}

// brokers is a comma-separated string or a list of host:port.
func (l *loader) brokers(path string, n *yaml.Node) string {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		s, _ := l.value(path, n)
		return strings.TrimSpace(s.val)
	}
	if n.Line > 0 {
		l.lines[path] = n.Line
	}
	var hosts []string
	for i, item := range n.Content {
		if s, ok := l.value(fmt.Sprintf("%s[%d]", path, i), item); ok {
			hosts = append(hosts, strings.TrimSpace(s.val))
		}
	}
	return strings.Join(hosts, ",")
}

// topics is a list of topic names and patterns (^regex), or one of them. Which names are
// valid is sink.Config.Validate's rule; paths are the file's path of each topic returned,
// for its errors.
func (l *loader) topics(path string, n *yaml.Node) (topics, paths []string) {
	n = deref(n)
	if n.Line > 0 {
		l.lines[path] = n.Line
	}
	if n.Kind != yaml.SequenceNode {
		if s, ok := l.value(path, n); ok {
			return []string{s.val}, []string{path}
		}
		return nil, nil
	}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		if s, _ := l.value(p, item); !s.failed && !s.unresolved {
			topics, paths = append(topics, s.val), append(paths, p) // "" too: an empty name in the list
		}
	}
	return topics, paths
}

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
// strings. sink.Config.Validate refuses the properties eosink manages, and checkKafka has
// librdkafka check the others.
func (l *loader) properties(path string, n *yaml.Node) map[string]string {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.bad(path, n.Line, "must be a mapping of librdkafka property names to values, not %s", kindName(n))
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
			l.dropped[path+"[]"] = true
			continue
		}
		if strings.ContainsRune(key, 0) {
			l.fail(path, kn.Line, "a property name holds a NUL byte (\\x00)")
			l.dropped[path+"[]"] = true
			continue
		}
		if line, dup := first[key]; dup {
			l.bad(p, kn.Line, "duplicate key (first at line %d)", line)
			continue
		}
		first[key] = kn.Line
		s, ok := l.value(p, vn)
		l.lines[p] = kn.Line
		if !ok {
			if !s.failed && !s.unresolved {
				l.bad(p, kn.Line, "needs a value")
			}
			continue
		}
		if secretProperty(key) {
			l.secrets.Add(s.val)
		}
		props[key] = s.val
	}
	return props
}

// AddDatabaseURL remembers a PostgreSQL connection string and its passwords, in every libpq
// form, whether it parses or not (that is sink.Config.Validate's rule).
func (r *Redactor) AddDatabaseURL(url string) {
	r.Add(url)
	r.Add(pgerr.ConnStringSecrets(url)...) // parsed, in every libpq form
	for _, m := range passwordRE.FindAllStringSubmatch(url, -1) {
		r.Add(m[1], m[2], strings.Trim(m[2], "'"))
	}
	if cfg, err := pgxpool.ParseConfig(url); err == nil {
		r.Add(cfg.ConnConfig.Password)
	}
}

// passwordRE finds passwords in connection strings that do not parse: the URL form's
// user:password@ and the key/value form's password=.
var passwordRE = regexp.MustCompile(`://[^:/@]*:([^@/]*)@|password\s*=\s*('[^']*'|\S+)`)

// expandedSize returns the number of nodes n stands for with its aliases expanded, counting
// each distinct node once per use but visiting it only once (memo): linear in the file's
// size, however much the aliases multiply. It stops counting past limit.
func expandedSize(n *yaml.Node, limit int, memo map[*yaml.Node]int) int {
	n = deref(n)
	if c, ok := memo[n]; ok {
		return c
	}
	memo[n] = limit + 1 // a cycle (which the parser refuses anyway) counts as too large
	c := 1
	for _, child := range n.Content {
		if c += expandedSize(child, limit, memo); c > limit {
			c = limit + 1
			break
		}
	}
	memo[n] = c
	return c
}

// maxSinkNodes bounds the values of the sink section after its aliases are expanded: far
// more than any sink needs (a hundred tables of a hundred columns take about 50,000), far
// fewer than an exponential expansion gives.
const maxSinkNodes = 200_000

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
			if strings.ContainsRune(key, 0) {
				l.fail(path, kn.Line, "a key holds a NUL byte (\\x00), which no name can hold")
				continue
			}
			if line, dup := first[key]; dup {
				l.fail(join(path, key), kn.Line, "duplicate key (first at line %d)", line)
				continue
			}
			first[key] = kn.Line
			if v, ok := l.anyValue(join(path, key), vn, depth+1); ok {
				m[key] = v
			}
			// An error about the field is at its key's line: a block mapping's own line is
			// that of its first key, below.
			l.lines[join(path, key)] = kn.Line
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
		if s.failed || s.unresolved {
			return nil, false // unresolved: left out, the plugin sees its default (a warning says so)
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
