// Package outboxsink is the "outbox" sink plugin: it wraps another plugin and, for every record
// the wrapped plugin writes, adds one event to the transactional outbox (package outbox) in
// the same transaction. `eosink relay` then publishes the events to Kafka exactly once.
//
// Event ids are stable: by default derived from the source record (outbox.RecordEventID:
// "topic:partition:offset:0"), or from a business id in the record (event_id), so that a
// replay after `eosink offsets set` emits the same ids and the receiver's inbox drops them.
//
// Config file section:
//
//	sink:
//	  type: outbox
//	  topic: order-events      # required: the Kafka topic of the events
//	  key: key                 # source expression of the event key; defaults to the record's key as is
//	  value: value             # source expression of the event value; defaults to the record's value as is
//	  event_id: value.order_id # source expression of a business id; defaults to the record's coordinates
//	  event_id_prefix: "order-created:" # prepended to a business id; defaults to none
//	  schema: eosink           # the outbox table's schema; defaults to the pipeline's
//	  shards: 1                # must equal the relay's shards; defaults to 1
//	  key_format: string       # json|string|bytes|avro|protobuf|json_schema; defaults to string
//	  value_format: json       # the same; defaults to json
//	  inner:                   # the plugin that applies the records
//	    type: upsert
//	    ...
//
// The wrapped plugin decides what a record does to the database; the outbox plugin emits
// one event per record it passes on, including records the wrapped plugin skips (an inbox
// dropping a duplicate): their ids are the same as the first time, so receivers drop them.
package outboxsink

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

// Config configures the plugin.
type Config struct {
	// Topic is the Kafka topic of the events. Required.
	Topic string `yaml:"topic"`
	// Key, Value and EventID are source expressions (see the table plugin's columns): key,
	// value, key.<path>, value.<path>, header.<name>, topic, partition, offset. Key and Value
	// default to the record's key and value bytes as they are; EventID defaults to
	// outbox.RecordEventID of the record.
	Key     string `yaml:"key"`
	Value   string `yaml:"value"`
	EventID string `yaml:"event_id"`
	// EventIDPrefix is prepended to the id EventID reads. Defaults to none.
	EventIDPrefix string `yaml:"event_id_prefix"`
	// Schema of the outbox table. Defaults to the pipeline's schema.
	Schema string `yaml:"schema"`
	// Shards must equal the relay's. Defaults to outbox.DefaultShards.
	Shards int `yaml:"shards"`
	// KeyFormat and ValueFormat say how the record's key and value decode for the
	// expressions. Default to string and json.
	KeyFormat   string `yaml:"key_format"`
	ValueFormat string `yaml:"value_format"`
	// SchemaRegistry serves the schema'd formats; from a config file, the pipeline's.
	SchemaRegistry *plugin.SchemaRegistry `yaml:"-"`
}

// Outbox is the plugin.
type Outbox struct {
	inner  sink.Plugin
	ob     *outbox.Outbox
	topic  string
	prefix string
	key    *mapping.Source
	value  *mapping.Source
	id     *mapping.Source
	m      mapping.Mapping
}

type section = struct {
	Config `yaml:",inline"`
	Inner  map[string]any `yaml:"inner"`
}

func init() { plugin.RegisterConfig("outbox", fromConfig) }

func fromConfig(cfg plugin.Config, c section) (*Outbox, error) {
	innerCfg, err := cfg.Sub("inner")
	if err != nil {
		return nil, err
	}
	inner, err := plugin.Build(innerCfg)
	if err != nil {
		return nil, err
	}
	if c.Schema == "" {
		c.Schema = cfg.Schema
	}
	c.SchemaRegistry = cfg.SchemaRegistry
	return New(c.Config, inner)
}

// New returns the plugin writing through inner.
func New(c Config, inner sink.Plugin) (*Outbox, error) {
	if inner == nil {
		return nil, errors.New("inner: required")
	}
	if c.Topic == "" {
		return nil, errors.New("topic: required (the Kafka topic of the events)")
	}
	ob, err := outbox.New(outbox.Config{Schema: c.Schema, Shards: c.Shards})
	if err != nil {
		return nil, err
	}
	e := &Outbox{inner: inner, ob: ob, topic: c.Topic, prefix: c.EventIDPrefix, m: mapping.Mapping{Key: mapping.String, Value: mapping.JSON}}
	if c.KeyFormat != "" {
		if e.m.Key, err = mapping.ParseFormat(c.KeyFormat); err != nil {
			return nil, fmt.Errorf("key_format: %w", err)
		}
	}
	if c.ValueFormat != "" {
		if e.m.Value, err = mapping.ParseFormat(c.ValueFormat); err != nil {
			return nil, fmt.Errorf("value_format: %w", err)
		}
	}
	if err := e.m.SetDecoder(c.SchemaRegistry, "key_format", "value_format"); err != nil {
		return nil, err
	}
	var cols []mapping.Column
	for _, f := range []struct {
		name, expr string
		dst        **mapping.Source
	}{{"key", c.Key, &e.key}, {"value", c.Value, &e.value}, {"event_id", c.EventID, &e.id}} {
		if f.expr == "" {
			continue
		}
		src, err := mapping.ParseSource(f.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = &src
		cols = append(cols, mapping.Column{Name: f.name, From: src})
	}
	if len(cols) > 0 {
		probe := e.m
		probe.Columns = cols
		if err := probe.Validate(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Migrations returns the outbox's migrations and the wrapped plugin's.
func (e *Outbox) Migrations() []sink.Migrations {
	sets := []sink.Migrations{outbox.Migrations(e.ob.Schema())}
	if m, ok := e.inner.(sink.Migrator); ok {
		sets = append(sets, m.Migrations()...)
	}
	return sets
}

// Prepare checks that the outbox table exists, then lets the wrapped plugin check.
func (e *Outbox) Prepare(ctx context.Context, db sink.DB) error {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{e.ob.Schema(), "outbox"}.Sanitize()).Scan(&ok); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if !ok {
		return fmt.Errorf("outbox: table %s.outbox is missing: run `eosink migrate up -config FILE`", e.ob.Schema())
	}
	if p, ok := e.inner.(sink.Preparer); ok {
		return p.Prepare(ctx, db)
	}
	return nil
}

// CheckTopic asks the wrapped plugin (sink.TopicRouter).
func (e *Outbox) CheckTopic(topic string) error {
	if r, ok := e.inner.(sink.TopicRouter); ok {
		return r.CheckTopic(topic)
	}
	return nil
}

// RouteSummary is the wrapped plugin's, each line noting the events.
func (e *Outbox) RouteSummary() []string {
	r, ok := e.inner.(interface{ RouteSummary() []string })
	if !ok {
		return []string{"each record emits an event to " + e.topic}
	}
	lines := r.RouteSummary()
	for i := range lines {
		lines[i] += " (and an event to " + e.topic + " through the outbox)"
	}
	return lines
}

// ReplayNotes are the wrapped plugin's (sink.ReplayNoter), and the events emitted again.
func (e *Outbox) ReplayNotes() []string {
	return append(sink.ReplayNotes(e.inner), "outbox: each replayed record emits its event to "+e.topic+" again")
}

// Open opens the wrapped plugin.
func (e *Outbox) Open(ctx context.Context, p sink.Partition) error { return e.inner.Open(ctx, p) }

// Close closes the wrapped plugin.
func (e *Outbox) Close(ctx context.Context, p sink.Partition) error { return e.inner.Close(ctx, p) }

// Write applies the batch through the wrapped plugin, then adds one event per record to the
// outbox in the same transaction.
func (e *Outbox) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if err := e.inner.Write(ctx, tx, b); err != nil {
		return err
	}
	if len(b.Records) == 0 {
		return nil
	}
	events := make([]outbox.Event, 0, len(b.Records))
	for i := range b.Records {
		ev, err := e.event(&b.Records[i])
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	return e.ob.Add(ctx, tx, events...)
}

func (e *Outbox) event(r *sink.Record) (outbox.Event, error) {
	ev := outbox.Event{Topic: e.topic, Key: r.Key, Value: r.Value}
	var err error
	if e.key != nil {
		if ev.Key, err = e.bytes(r, *e.key); err != nil {
			return ev, err
		}
	}
	if e.value != nil {
		if ev.Value, err = e.bytes(r, *e.value); err != nil {
			return ev, err
		}
	}
	if e.id == nil {
		ev.EventID = outbox.RecordEventID(r.Topic, r.Partition, r.Offset, 0)
		return ev, nil
	}
	id, err := e.bytes(r, *e.id)
	if err != nil {
		return ev, err
	}
	if len(id) == 0 {
		return ev, sink.Poison(r, fmt.Errorf("outbox: no event id at %s", e.id))
	}
	ev.EventID = e.prefix + string(id)
	return ev, nil
}

// bytes extracts src from r as bytes; nil when absent. A decode error is poison.
func (e *Outbox) bytes(r *sink.Record, src mapping.Source) ([]byte, error) {
	v, err := e.m.Extract(r, src)
	if err != nil {
		if perr := mapping.RecordError(r, err); !errors.Is(perr, sink.ErrPoison) {
			return nil, perr
		}
		return nil, sink.Poison(r, fmt.Errorf("outbox: %w", err))
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return append([]byte(nil), x...), nil
	}
	return nil, sink.Poison(r, fmt.Errorf("outbox: %s: unexpected %T", src, v))
}
