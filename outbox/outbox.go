// Package outbox is eosink's transactional outbox: a handler or a plugin writes events into
// an outbox table in the same PostgreSQL transaction as its business rows, and `eosink relay`
// (package outbox/relay) publishes them to Kafka exactly once. A receiver deduplicates by the
// event id (eosink's inbox plugin), which closes the chain Kafka → PostgreSQL → Kafka →
// PostgreSQL with nothing applied twice and nothing lost.
//
// # Writing events
//
// Inside an eosink handler, use the batch's transaction:
//
//	func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
//		for _, r := range b.Records {
//			// ... business writes through tx ...
//			if err := outbox.Add(ctx, tx, outbox.Event{
//				Topic:   "order-events",
//				Key:     r.Key,
//				Value:   payload,
//				EventID: outbox.RecordEventID(r.Topic, r.Partition, r.Offset, 0),
//			}); err != nil {
//				return err
//			}
//		}
//		return nil
//	}
//
// Add uses the default outbox (schema "eosink", DefaultShards shards); New gives one for
// another schema or shard count, which the relay's configuration must repeat.
//
// # Stable event ids
//
// An event id must be the same every time the same effect is computed, so that a receiver
// can drop a repeat: RecordEventID derives it from the source record's coordinates (a replay
// after `eosink offsets set` reads the same records at the same offsets and yields the same
// ids), BusinessEventID from a business key. Never use a random id or a timestamp.
//
// # The table
//
// The migration (Migrate, or `eosink migrate up -config` for a pipeline whose sink is the
// outbox plugin) creates <schema>.outbox and <schema>.outbox_relays. Each row records the
// writing transaction's id (xid8) so that the relay can tell when no transaction still in
// flight can add a row before it; see docs/outbox.md.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/migrator"
)

// DefaultSchema is the schema of the default outbox.
const DefaultSchema = "eosink"

// DefaultShards is the default number of shards: one relay transaction stream, one order.
const DefaultShards = 1

// EventIDHeader is the Kafka header in which the relay sends each event's id.
const EventIDHeader = "eosink-event-id"

// ErrInvalidEvent is wrapped by the *EventError Add returns for an event it refuses.
var ErrInvalidEvent = errors.New("outbox: invalid event")

// EventError names the refused event (its index in the call) and why.
type EventError struct {
	Index  int
	Field  string
	Reason string
}

func (e *EventError) Error() string {
	return fmt.Sprintf("outbox: event %d: %s: %s", e.Index, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidEvent.
func (e *EventError) Unwrap() error { return ErrInvalidEvent }

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Event is one record to publish.
type Event struct {
	Topic   string // required
	Key     []byte // nil for no key; the shard is a hash of the key (of EventID without one)
	Value   []byte // nil for a tombstone
	Headers []Header
	// EventID identifies the event for receivers; required, and stable across replays (see
	// RecordEventID and BusinessEventID). The relay adds it as the EventIDHeader header.
	EventID string
}

// Config configures an Outbox.
type Config struct {
	// Schema holds the outbox table. Defaults to DefaultSchema.
	Schema string
	// Shards is the number of shards events are spread over by key hash; the relay's
	// shards setting must be the same. Defaults to DefaultShards.
	Shards int
}

// Outbox writes events into one schema's outbox table.
type Outbox struct {
	schema string
	shards int
	insert string
}

// New returns the outbox of c.Schema.
func New(c Config) (*Outbox, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if err := migrator.CheckSchemaName(c.Schema); err != nil {
		return nil, err
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Shards < 0 || c.Shards > 1<<16 {
		return nil, fmt.Errorf("outbox: shards: %d is not between 1 and 65536", c.Shards)
	}
	return &Outbox{schema: c.Schema, shards: c.Shards,
		insert: `INSERT INTO ` + pgx.Identifier{c.Schema, "outbox"}.Sanitize() +
			` (shard, topic, key, value, header_keys, header_values, event_id) VALUES ($1, $2, $3, $4, $5, $6, $7)`}, nil
}

// Schema returns the outbox's schema.
func (o *Outbox) Schema() string { return o.schema }

// Shards returns the outbox's shard count.
func (o *Outbox) Shards() int { return o.shards }

var defaultOutbox, _ = New(Config{})

// Add writes events into the default outbox (schema "eosink", DefaultShards) inside tx. See
// Outbox.Add.
func Add(ctx context.Context, tx pgx.Tx, events ...Event) error {
	return defaultOutbox.Add(ctx, tx, events...)
}

// Add writes events into the outbox inside tx, in order: they are published after tx
// commits, and not at all if it rolls back. An invalid event is an *EventError (errors.Is
// ErrInvalidEvent) and nothing is written; a database error is returned as it is (a missing
// table is SQLSTATE 42P01: run Migrate).
func (o *Outbox) Add(ctx context.Context, tx pgx.Tx, events ...Event) error {
	for i := range events {
		if err := check(i, &events[i]); err != nil {
			return err
		}
	}
	if len(events) == 1 {
		_, err := tx.Exec(ctx, o.insert, o.args(&events[0])...)
		return wrapDB(err)
	}
	var b pgx.Batch
	for i := range events {
		b.Queue(o.insert, o.args(&events[i])...)
	}
	return wrapDB(tx.SendBatch(ctx, &b).Close())
}

func wrapDB(err error) error {
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	return nil
}

func (o *Outbox) args(e *Event) []any {
	keys := make([]string, len(e.Headers))
	values := make([][]byte, len(e.Headers))
	for i, h := range e.Headers {
		keys[i], values[i] = h.Key, h.Value
	}
	return []any{Shard(e.Key, e.EventID, o.shards), e.Topic, e.Key, e.Value, keys, values, e.EventID}
}

func check(i int, e *Event) error {
	text := func(field, s string) error {
		switch {
		case s == "":
			return &EventError{i, field, "required"}
		case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
			return &EventError{i, field, "must be UTF-8 text without NUL bytes"}
		}
		return nil
	}
	if err := text("Topic", e.Topic); err != nil {
		return err
	}
	if err := text("EventID", e.EventID); err != nil {
		return err
	}
	for _, h := range e.Headers {
		if err := text("Headers.Key", h.Key); err != nil {
			return err
		}
		if h.Key == EventIDHeader {
			return &EventError{i, "Headers.Key", EventIDHeader + " is the relay's (it carries EventID)"}
		}
	}
	return nil
}

// Shard returns the shard of an event: the FNV-1a hash of key (of eventID when key is nil)
// modulo shards. Events with the same key land in the same shard and keep their order.
func Shard(key []byte, eventID string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	if key != nil {
		h.Write(key)
	} else {
		h.Write([]byte(eventID))
	}
	return int(h.Sum32() % uint32(shards))
}

// RecordEventID derives an event id from the source record a handler is applying and the
// event's index n among those it emits for that record: "topic:partition:offset:n". The
// same record yields the same ids however often it is applied, so a receiver drops the
// events of a replay after `eosink offsets set`. A topic deleted and created again starts
// its offsets over; prefer BusinessEventID where a business key exists.
func RecordEventID(topic string, partition int32, offset int64, n int) string {
	return topic + ":" + strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(offset, 10) + ":" + strconv.Itoa(n)
}

// BusinessEventID derives an event id from a business key: kind + ":" + id, for example
// BusinessEventID("order-created", "o-1042").
func BusinessEventID(kind, id string) string { return kind + ":" + id }
