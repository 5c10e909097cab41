package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
)

// SQL is the sql plugin: it runs the configured statements for every record.
type SQL struct {
	m       mapping.Mapping
	targets []*target // the routes in order, then the default (Config.Statements) if any
	onTomb  string

	mu        sync.Mutex
	described bool
	byTopic   map[string]*target
}

// target is one route's statements, or the default's (topic "").
type target struct {
	topic string         // Route.Topic; "" for the default
	re    *regexp.Regexp // when topic is a pattern
	stmts []*statement
	tomb  []*statement // with on_tombstone: statements
}

// match reports whether t takes topic.
func (t *target) match(topic string) bool {
	switch {
	case t.re != nil:
		return t.re.MatchString(topic)
	case t.topic != "":
		return t.topic == topic
	}
	return true
}

// New returns the sql plugin for c. Errors are *sink.ConfigError values naming the field
// relative to the plugin's section: "statements[1]", "params.sku".
func New(c Config) (*SQL, error) {
	m, targets, onTomb, err := compile(c)
	if err != nil {
		return nil, err
	}
	return &SQL{m: m, targets: targets, onTomb: onTomb, byTopic: map[string]*target{}}, nil
}

// CheckTopic reports whether a route or the default statements take topic
// (sink.TopicRouter).
func (s *SQL) CheckTopic(topic string) error {
	_, err := s.target(topic)
	return err
}

// target returns the statements of topic.
func (s *SQL) target(topic string) (*target, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.byTopic[topic]; ok {
		return t, nil
	}
	for _, t := range s.targets {
		if t.match(topic) {
			s.byTopic[topic] = t
			return t, nil
		}
	}
	var names []string
	for _, t := range s.targets {
		names = append(names, t.topic)
	}
	return nil, &sink.NoRouteError{Topic: topic,
		Reason: fmt.Sprintf("it matches none of the sink's routes (%s) and the sink has no default statements", strings.Join(names, ", "))}
}

// ReplayNotes (sink.ReplayNoter): the statements decide what a replay does.
func (s *SQL) ReplayNotes() []string {
	return []string{"sql: a replay runs the statements again for every replayed record: what it rewrites or skips is theirs (ON CONFLICT ...)"}
}

// RouteSummary lists the statements, one line each, for `eosink run -validate`: every topic
// runs them all.
func (s *SQL) RouteSummary() []string {
	var lines []string
	for _, t := range s.targets {
		from := t.topic
		if from == "" {
			from = "(any other topic)"
			if len(s.targets) == 1 {
				from = "(every topic)"
			}
		}
		for _, st := range t.stmts {
			lines = append(lines, fmt.Sprintf("%s -> %s: %s", from, st.path, oneLine(st.text)))
		}
		for _, st := range t.tomb {
			lines = append(lines, fmt.Sprintf("%s (tombstones) -> %s: %s", from, st.path, oneLine(st.text)))
		}
	}
	if s.onTomb != TombstoneStatements {
		lines = append(lines, "(tombstones) -> "+s.onTomb)
	}
	return lines
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// beginner is what Prepare needs of its database: *pgxpool.Pool, *pgx.Conn and pgx.Tx.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Prepare has PostgreSQL parse and describe every statement, in a transaction that is
// rolled back, so that a syntax error, a missing table or column, or a parameter whose type
// cannot be inferred fails at start, naming the statement: "statements[1]: ERROR: ...". It
// also learns the parameters' types (see Write).
func (s *SQL) Prepare(ctx context.Context, db sink.DB) error {
	b, ok := db.(beginner)
	if !ok {
		return errors.New("sql: Prepare needs a database that can begin a transaction")
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	return s.describe(ctx, tx)
}

// describe describes each statement on tx's connection, once per plugin.
func (s *SQL) describe(ctx context.Context, tx pgx.Tx) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.described {
		return nil
	}
	switch mode := tx.Conn().Config().DefaultQueryExecMode; mode {
	case pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec:
		// simple_protocol would put the values into the SQL text (escaped, but text), and
		// both would type the parameters from the Go values rather than from the statement.
		return fmt.Errorf("sql: the database connection uses the %s query exec mode (default_query_exec_mode); the sql plugin needs PostgreSQL to bind and type the parameters (cache_statement, the default, cache_describe or describe_exec)", mode)
	}
	var all []*statement
	for _, t := range s.targets {
		all = append(append(all, t.stmts...), t.tomb...)
	}
	bytea := make([][]bool, len(all))
	for i, st := range all {
		// The unnamed statement: parsed and described, never executed.
		d, err := tx.Conn().PgConn().Prepare(ctx, "", st.sql, nil)
		if err != nil {
			return fmt.Errorf("sql: %s: %w", st.path, err)
		}
		bytea[i] = make([]bool, len(d.ParamOIDs))
		for j, oid := range d.ParamOIDs {
			bytea[i][j] = oid == pgtype.ByteaOID
		}
	}
	for i, st := range all {
		st.bytea = bytea[i]
	}
	s.described = true
	return nil
}

// Open does nothing: the plugin keeps no per-partition state.
func (s *SQL) Open(context.Context, sink.Partition) error { return nil }

// Close does nothing.
func (s *SQL) Close(context.Context, sink.Partition) error { return nil }

// errTombstone is the poison of a tombstone with on_tombstone: poison.
var errTombstone = errors.New("tombstone (null value) and on_tombstone is poison")

// Write maps every record's parameters, then sends one pipelined batch holding each
// record's statements, in record order, and reads the results in the same order. A record
// that does not map is poison before anything is sent. A statement that fails with a data
// error (SQLSTATE class 22 or 23, or 54000) makes its record poison (sink.Poison), naming
// the statement; any other error is returned as it is (wrapped with %w), for the engine to
// retry or stop.
func (s *SQL) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if len(b.Records) == 0 {
		return nil
	}
	t, err := s.target(b.Topic)
	if err != nil {
		return err
	}
	if err := s.describe(ctx, tx); err != nil {
		return err
	}
	type queued struct {
		rec  int
		stmt *statement
	}
	var batch pgx.Batch
	order := make([]queued, 0, len(b.Records)*len(t.stmts))
	skipped := 0
	for i := range b.Records {
		r := &b.Records[i]
		stmts := t.stmts
		if r.Value == nil {
			switch s.onTomb {
			case TombstonePoison:
				return sink.Poison(r, errTombstone)
			case TombstoneSkip:
				skipped++
				continue
			default:
				stmts = t.tomb
			}
		}
		// A row per record: the batch keeps the values until it is sent.
		row, err := s.m.Row(r, nil)
		if err != nil {
			return mapping.RecordError(r, paramError(err))
		}
		for _, st := range stmts {
			args := make([]any, len(st.args))
			for j, k := range st.args {
				args[j] = bind(row[k], st.bytea[j])
			}
			batch.Queue(st.sql, args...)
			order = append(order, queued{rec: i, stmt: st})
		}
	}
	if skipped > 0 {
		sink.Skipped(ctx, skipped)
	}
	if len(order) == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &batch)
	for _, q := range order {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			r := &b.Records[q.rec]
			if pgerr.Classify(err) == pgerr.Data {
				return sink.Poison(r, fmt.Errorf("sql: %s: %w", q.stmt.path, err))
			}
			return fmt.Errorf("sql: %s (record at offset %d): %w", q.stmt.path, r.Offset, err)
		}
	}
	return br.Close()
}

// paramErr is the poison of a record whose parameter cannot be mapped: a required value
// missing, a value its cast refuses, text PostgreSQL cannot store. Its text names the
// parameter and its source expression: `sql: parameter @at (value.at): cast rfc3339:
// "yesterday" is not an RFC 3339 timestamp`. It unwraps to the mapping's error.
type paramErr struct{ fe *mapping.FieldError }

func (e *paramErr) Error() string {
	return "sql: parameter @" + e.fe.Column + " (" + e.fe.Source + "): " + e.fe.Err.Error()
}

func (e *paramErr) Unwrap() error { return e.fe }

// paramError names the parameter of a Row error about one parameter's value; any other (a
// side that is not JSON, a schema registry's error) is returned as it is.
func paramError(err error) error {
	var fe *mapping.FieldError
	if errors.As(err, &fe) && fe.Column != "" {
		return &paramErr{fe}
	}
	return err
}

// bind returns the argument for a mapped value: strings go in PostgreSQL's text format, so
// that the server parses them into the type it inferred for the parameter; bytes go as they
// are to a bytea parameter, and as text to any other.
func bind(v any, bytea bool) any {
	switch v := v.(type) {
	case string:
		if bytea {
			return []byte(v)
		}
		return v
	case []byte:
		if bytea {
			return v
		}
		return string(v)
	}
	return v // nil
}
