package schemaformat

import (
	"encoding/binary"
)

// The Confluent wire format: one magic byte 0, the schema id as 4 bytes big-endian, then
// (Protobuf only) the message-index array, then the encoded body.
const (
	magicByte  = 0
	headerSize = 5
	// maxMessageIndexes bounds the Protobuf message-index array: it is the path of nested
	// message types down to the record's type, never long in a real schema.
	maxMessageIndexes = 64
)

// header is what precedes the body of a record in the Confluent wire format.
type header struct {
	schemaID int
	// indexes is the Protobuf message-index array: the position of the record's message
	// type among the file's top-level messages, then among that message's nested ones, and
	// so on. An empty array on the wire (a single 0 byte) means [0].
	indexes []int
}

// parseHeader splits data into its header and body. With protobuf it also reads the
// message-index array. The error matches ErrMalformed.
func parseHeader(data []byte, protobuf bool) (header, []byte, error) {
	var h header
	if len(data) < headerSize {
		return h, nil, malformed("%d bytes, shorter than the 5-byte wire-format header", len(data))
	}
	if data[0] != magicByte {
		if data[0] == 1 {
			return h, nil, malformed("magic byte 1 (schema GUID) is not supported, want 0")
		}
		return h, nil, malformed("magic byte %d, want 0", data[0])
	}
	id := binary.BigEndian.Uint32(data[1:5])
	if id > 1<<31-1 {
		return h, nil, malformed("schema id %d out of range", id)
	}
	h.schemaID = int(id)
	body := data[headerSize:]
	if !protobuf {
		return h, body, nil
	}
	n, k := binary.Varint(body)
	if k <= 0 {
		return h, nil, malformed("bad Protobuf message-index count")
	}
	body = body[k:]
	switch {
	case n < 0 || n > maxMessageIndexes:
		return h, nil, malformed("Protobuf message-index count %d out of range", n)
	case n == 0:
		h.indexes = []int{0}
		return h, body, nil
	}
	h.indexes = make([]int, n)
	for i := range h.indexes {
		v, k := binary.Varint(body)
		if k <= 0 {
			return h, nil, malformed("bad Protobuf message index")
		}
		if v < 0 || v > 1<<31-1 {
			return h, nil, malformed("Protobuf message index %d out of range", v)
		}
		h.indexes[i] = int(v)
		body = body[k:]
	}
	return h, body, nil
}
