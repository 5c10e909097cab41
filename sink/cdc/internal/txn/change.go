package txn

import (
	"encoding/json"
	"strconv"
)

// Meta is what the assembler needs of one change event: its data collection, its
// transaction block and the last commit before it.
type Meta struct {
	Op string
	// Collection is "schema.table" from source, the name an END's data_collections uses.
	Collection string
	// Txn is false for a snapshot read (op r), which has no transaction block.
	Txn bool
	// ID, TotalOrder and CollectionOrder are the transaction block's id, total_order
	// (1-based, over the whole transaction) and data_collection_order (1-based, within
	// Collection).
	ID                          ID
	TotalOrder, CollectionOrder int64
	// PrevCommit is the first LSN of source.sequence: the commit LSN of the source
	// transaction committed before this change's, 0 when the connector sends null (the
	// first transaction it streams). It tells a change of a transaction already emitted
	// (PrevCommit below the watermark) from one of a later transaction.
	PrevCommit int64
}

// DecodeChangeJSON reads the Meta of a change event written by the JsonConverter, with
// schemas or without. A null record (a tombstone) gives a zero Meta and no error: it
// belongs to no transaction.
func DecodeChangeJSON(data []byte) (Meta, error) {
	p, err := payloadJSON(data)
	if err != nil {
		return Meta{}, err
	}
	if p == nil {
		return Meta{}, nil
	}
	return DecodeChange(p)
}

// DecodeChange reads the Meta of a change event's payload, already decoded into a tree
// (the JsonConverter's payload, an Avro value of sink/internal/schemaformat). A streamed
// change (any op but r) without a transaction block is ErrNoMetadata; a block that is not
// Debezium's is a *DecodeError.
func DecodeChange(payload any) (Meta, error) {
	m, ok := payload.(map[string]any)
	if !ok {
		return Meta{}, malformed("record", "is %s, want a change event object", kind(payload))
	}
	var mt Meta
	var err error
	if mt.Op, err = str(m["op"], "op"); err != nil {
		return Meta{}, err
	}
	src, ok := m["source"].(map[string]any)
	if !ok {
		return Meta{}, malformed("source", "is %s, want an object", kind(m["source"]))
	}
	schema, err := str(src["schema"], "source.schema")
	if err != nil {
		return Meta{}, err
	}
	table, err := str(src["table"], "source.table")
	if err != nil {
		return Meta{}, err
	}
	mt.Collection = schema + "." + table
	if len(mt.Collection) > MaxCollectionLength {
		return Meta{}, malformed("source.table", "schema.table is longer than %d bytes", MaxCollectionLength)
	}
	block := m["transaction"]
	if block == nil {
		if mt.Op == "r" {
			return mt, nil
		}
		return Meta{}, ErrNoMetadata
	}
	b, ok := block.(map[string]any)
	if !ok {
		return Meta{}, malformed("transaction", "is %s, want an object", kind(block))
	}
	id, err := str(b["id"], "transaction.id")
	if err != nil {
		return Meta{}, err
	}
	if mt.ID, err = ParseID(id, "transaction.id"); err != nil {
		return Meta{}, err
	}
	if mt.TotalOrder, err = order(b["total_order"], "transaction.total_order"); err != nil {
		return Meta{}, err
	}
	if mt.CollectionOrder, err = order(b["data_collection_order"], "transaction.data_collection_order"); err != nil {
		return Meta{}, err
	}
	if mt.CollectionOrder > mt.TotalOrder {
		return Meta{}, malformed("transaction.data_collection_order", "%d is above total_order %d", mt.CollectionOrder, mt.TotalOrder)
	}
	if mt.PrevCommit, err = prevCommit(src["sequence"]); err != nil {
		return Meta{}, err
	}
	mt.Txn = true
	return mt, nil
}

// order reads a 1-based order.
func order(v any, field string) (int64, error) {
	n, err := count(v, field)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, malformed(field, "0: orders start at 1")
	}
	return n, nil
}

// prevCommit reads the first LSN of source.sequence, `["<lsn>"|null,"<lsn>"]`.
func prevCommit(v any) (int64, error) {
	const field = "source.sequence"
	s, err := str(v, field)
	if err != nil {
		return 0, err
	}
	var pair []*string
	if json.Unmarshal([]byte(s), &pair) != nil || len(pair) != 2 {
		return 0, malformed(field, "%.80q is not a pair of LSNs", s)
	}
	if pair[0] == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(*pair[0], 10, 64)
	if err != nil || n < 0 {
		return 0, malformed(field, "%.80q: %.40q is not an LSN", s, *pair[0])
	}
	return n, nil
}
