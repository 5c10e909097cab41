// Package multi is the "multi" sink plugin: it writes every record through several plugins,
// each with its own configuration (table, mapping, routes), in the batch's one transaction.
// The rows of all of them and the partition's next offset commit together, or none do.
//
// Config file section:
//
//	sink:
//	  type: multi
//	  sinks:                       # required: at least one plugin section, written in order
//	    - type: table
//	      table: inventory.history
//	      columns: {move_id: value.move_id, sku: value.sku, delta: value.delta}
//	    - type: upsert
//	      table: inventory.stock
//	      key: [sku, warehouse]
//	      merge: {qty: add}
//	      columns: {sku: value.sku, warehouse: value.warehouse, qty: value.delta}
//
// Each entry is a plugin section like the pipeline's sink section, so an entry may itself
// be an inbox, and an inbox may wrap the whole list (inner: {type: multi, sinks: [...]}).
// Errors in an entry name it: sink.sinks[1].merge.qty.
//
// # Writes and dead letters
//
// Write calls each plugin's Write in the order listed, with the same transaction and the
// same records. The first error ends the write and is returned with its kind, so the engine
// handles it as for one plugin: a transient error retries the batch, a poison error rolls
// the whole batch back and, with on_poison: dead-letter, isolates the bad records in
// savepoints. A savepoint holds the writes of every plugin for its part, so a record that
// is poison for any one of them is dead-lettered once, and none of its writes stays in any
// of them; the other records are written to all of them.
//
// A plugin that reports records skipped (sink.Skipped, as the inbox does for duplicates) is
// counted apart; the list reports the smallest count of any of its plugins, since a record
// one plugin skips is still applied by the others.
//
// # Lifecycle
//
// CheckTopic (sink.TopicRouter) asks every plugin: a topic is routed only when all of them
// route it, since every record goes to every plugin. Prepare, Migrations, Open and
// RouteSummary go to every plugin in order; Close goes to every plugin, also after an Open
// failed part way (like the engine, which calls Close after a failed Open), and joins their
// errors.
package multi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/plugin"
)

func init() { plugin.RegisterConfig("multi", fromConfig) }

// section is the multi plugin's config section.
type section = struct {
	Sinks []any `yaml:"sinks"`
}

// fromConfig builds each entry of sinks with plugin.Build, as sinks[i].
func fromConfig(cfg plugin.Config, c section) (*Multi, error) {
	if len(c.Sinks) == 0 {
		return nil, &sink.ConfigError{Field: cfg.Path + ".sinks", Reason: "required: a list of at least one plugin section, each with a type"}
	}
	plugins := make([]sink.Plugin, 0, len(c.Sinks))
	var errs []error
	for i, v := range c.Sinks {
		sub := cfg
		sub.Path = fmt.Sprintf("%s.sinks[%d]", cfg.Path, i)
		raw, ok := v.(map[string]any)
		if !ok {
			errs = append(errs, &sink.ConfigError{Field: sub.Path, Reason: "must be a plugin section: a mapping with a type"})
			continue
		}
		sub.Raw = raw
		p, err := plugin.Build(sub)
		if err != nil {
			errs = append(errs, fieldPath(err, sub.Path))
			continue
		}
		plugins = append(plugins, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return New(plugins...)
}

// leadingField matches a message that starts with the field it is about: "merge.qty: ...".
var leadingField = regexp.MustCompile(`^([A-Za-z_]\w*(?:\[\d+\])?(?:\.\w+(?:\[\d+\])?)*): (.+)$`)

// fieldPath moves the field a plugin's one-line error starts with into the
// *sink.ConfigError's Field, so that the error names it in full: sink.sinks[1].merge.qty.
func fieldPath(err error, path string) error {
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || ce.Field != path || strings.Contains(ce.Reason, "\n") {
		return err
	}
	m := leadingField.FindStringSubmatch(ce.Reason)
	if m == nil {
		return err
	}
	return &sink.ConfigError{Field: path + "." + m[1], Reason: m[2]}
}

// Multi writes each batch through several plugins in one transaction.
type Multi struct {
	sinks []sink.Plugin
}

// New returns a plugin writing through each of plugins, in order. At least one is required.
func New(plugins ...sink.Plugin) (*Multi, error) {
	if len(plugins) == 0 {
		return nil, errors.New("sinks: at least one plugin is required")
	}
	for i, p := range plugins {
		if p == nil {
			return nil, fmt.Errorf("sinks[%d]: nil plugin", i)
		}
	}
	return &Multi{sinks: plugins}, nil
}

// Sinks returns the plugins, in the order they write.
func (m *Multi) Sinks() []sink.Plugin { return append([]sink.Plugin(nil), m.sinks...) }

// CheckTopic reports whether every plugin that routes by topic takes topic
// (sink.TopicRouter); the first refusal is returned, naming its entry.
func (m *Multi) CheckTopic(topic string) error {
	for i, p := range m.sinks {
		r, ok := p.(sink.TopicRouter)
		if !ok {
			continue
		}
		if err := r.CheckTopic(topic); err != nil {
			var nr *sink.NoRouteError
			if errors.As(err, &nr) {
				c := *nr
				c.Reason = fmt.Sprintf("sinks[%d]: %s", i, nr.Reason)
				return &c
			}
			return fmt.Errorf("sinks[%d]: %w", i, err)
		}
	}
	return nil
}

// RouteSummary lists each plugin's routes, each line prefixed with its entry: "sinks[0]: ".
func (m *Multi) RouteSummary() []string {
	var lines []string
	for i, p := range m.sinks {
		r, ok := p.(interface{ RouteSummary() []string })
		if !ok {
			continue
		}
		for _, l := range r.RouteSummary() {
			lines = append(lines, fmt.Sprintf("sinks[%d]: %s", i, l))
		}
	}
	return lines
}

// ReplayNotes lists each plugin's replay notes (sink.ReplayNoter), prefixed with its
// entry: "sinks[0]: ".
func (m *Multi) ReplayNotes() []string {
	var notes []string
	for i, p := range m.sinks {
		for _, n := range sink.ReplayNotes(p) {
			notes = append(notes, fmt.Sprintf("sinks[%d]: %s", i, n))
		}
	}
	return notes
}

// Migrations returns the migration sets of every plugin, each set once (two inboxes in the
// same schema share theirs).
func (m *Multi) Migrations() []sink.Migrations {
	var sets []sink.Migrations
	seen := map[[2]string]bool{}
	for _, p := range m.sinks {
		mg, ok := p.(sink.Migrator)
		if !ok {
			continue
		}
		for _, s := range mg.Migrations() {
			k := [2]string{s.Schema, s.Table}
			if !seen[k] {
				seen[k] = true
				sets = append(sets, s)
			}
		}
	}
	return sets
}

// Prepare lets each plugin check the database, in order; the first error stops.
func (m *Multi) Prepare(ctx context.Context, db sink.DB) error {
	for i, p := range m.sinks {
		if pr, ok := p.(sink.Preparer); ok {
			if err := pr.Prepare(ctx, db); err != nil {
				return fmt.Errorf("sinks[%d]: %w", i, err)
			}
		}
	}
	return nil
}

// Open opens each plugin for p, in order; the first error stops.
func (m *Multi) Open(ctx context.Context, p sink.Partition) error {
	for i, s := range m.sinks {
		if err := s.Open(ctx, p); err != nil {
			return fmt.Errorf("sinks[%d]: %w", i, err)
		}
	}
	return nil
}

// Close closes every plugin for p and joins their errors.
func (m *Multi) Close(ctx context.Context, p sink.Partition) error {
	var errs []error
	for i, s := range m.sinks {
		if err := s.Close(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("sinks[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Write writes the batch through each plugin in order, in tx. The first error is returned,
// wrapped with its entry ("sinks[1]: ...") and keeping its kind (transient, poison, fatal:
// errors.Is and errors.As see through), and the engine rolls back what the plugins before
// it wrote.
func (m *Multi) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	least := -1
	for i, s := range m.sinks {
		sctx, skipped := engine.CountSkipped(ctx)
		if err := s.Write(sctx, tx, b); err != nil {
			return fmt.Errorf("sinks[%d]: %w", i, err)
		}
		if least < 0 || *skipped < least {
			least = *skipped
		}
	}
	if least > 0 {
		sink.Skipped(ctx, least)
	}
	return nil
}
