package txn

import (
	"strconv"
	"unicode/utf8"
)

// Status is a marker's status.
type Status uint8

const (
	Begin Status = iota + 1
	End
)

func (s Status) String() string {
	switch s {
	case Begin:
		return "BEGIN"
	case End:
		return "END"
	}
	return "?"
}

// Bounds of an END's data_collections.
const (
	MaxCollections      = 1 << 16 // entries in one END
	MaxCollectionLength = 1024    // bytes of one data_collection name ("schema.table")
)

// Marker is a record of the <topic.prefix>.transaction topic: Debezium's BEGIN or END of
// one source transaction.
type Marker struct {
	Status Status
	ID     ID
	TsMs   int64 // ts_ms, the source's commit time
	// EventCount and Collections are the END's: the transaction's changes in all and per
	// data collection ("schema.table"), in the END's order. A BEGIN has neither.
	EventCount  int64
	Collections []Collection
}

// Collection is one entry of an END's data_collections.
type Collection struct {
	Name       string
	EventCount int64
}

// DecodeMarkerJSON decodes a transaction topic record written by Kafka Connect's
// JsonConverter, with schemas ({"schema":...,"payload":...}) or without.
func DecodeMarkerJSON(data []byte) (Marker, error) {
	p, err := payloadJSON(data)
	if err != nil {
		return Marker{}, err
	}
	return DecodeMarker(p)
}

// DecodeMarker decodes a transaction topic record's payload, already decoded into a tree:
// the JsonConverter's payload (DecodeMarkerJSON) or the value of an Avro record decoded by
// sink/internal/schemaformat. It checks every field against what Debezium writes; any
// difference is a *DecodeError.
func DecodeMarker(payload any) (Marker, error) {
	m, ok := payload.(map[string]any)
	if !ok {
		return Marker{}, malformed("record", "is %s, want a transaction marker object", kind(payload))
	}
	var mk Marker
	s, err := str(m["status"], "status")
	if err != nil {
		return Marker{}, err
	}
	switch s {
	case "BEGIN":
		mk.Status = Begin
	case "END":
		mk.Status = End
	default:
		return Marker{}, malformed("status", "%.40q is neither BEGIN nor END", s)
	}
	id, err := str(m["id"], "id")
	if err != nil {
		return Marker{}, err
	}
	if mk.ID, err = ParseID(id, "id"); err != nil {
		return Marker{}, err
	}
	if mk.TsMs, err = integer(m["ts_ms"], "ts_ms"); err != nil {
		return Marker{}, err
	}
	if mk.Status == Begin {
		if m["event_count"] != nil || m["data_collections"] != nil {
			return Marker{}, malformed("event_count", "a BEGIN carries neither event_count nor data_collections")
		}
		return mk, nil
	}
	if mk.EventCount, err = count(m["event_count"], "event_count"); err != nil {
		return Marker{}, err
	}
	if mk.Collections, err = collections(m["data_collections"], mk.EventCount); err != nil {
		return Marker{}, err
	}
	return mk, nil
}

// collections reads an END's data_collections: distinct names, counts that add up to the
// END's event_count.
func collections(v any, total int64) ([]Collection, error) {
	const field = "data_collections"
	list, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil, malformed(field, "missing")
		}
		return nil, malformed(field, "is %s, want an array", kind(v))
	}
	if len(list) > MaxCollections {
		return nil, malformed(field, "%d entries, more than %d", len(list), MaxCollections)
	}
	out := make([]Collection, 0, len(list))
	seen := make(map[string]bool, len(list))
	var sum int64
	for i, e := range list {
		at := func(f string) string { return field + "[" + strconv.Itoa(i) + "]" + f }
		em, ok := e.(map[string]any)
		if !ok {
			return nil, malformed(at(""), "is %s, want an object", kind(e))
		}
		name, err := str(em["data_collection"], at(".data_collection"))
		if err != nil {
			return nil, err
		}
		if name == "" || len(name) > MaxCollectionLength || !utf8.ValidString(name) {
			return nil, malformed(at(".data_collection"), "not a name of 1 to %d bytes of UTF-8", MaxCollectionLength)
		}
		if seen[name] {
			return nil, malformed(at(".data_collection"), "%q listed twice", name)
		}
		seen[name] = true
		n, err := count(em["event_count"], at(".event_count"))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, malformed(at(".event_count"), "0: Debezium lists only the collections a transaction changed")
		}
		sum += n // at most MaxCollections × MaxEventCount: no overflow
		out = append(out, Collection{Name: name, EventCount: n})
	}
	if sum != total {
		return nil, malformed(field, "the counts add up to %d, event_count is %d", sum, total)
	}
	return out, nil
}
