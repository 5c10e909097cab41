package schemaformat

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func TestParseHeader(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		protobuf bool
		id       int
		indexes  []int
		body     string
		bad      bool
	}{
		{name: "avro", data: []byte{0, 0, 0, 1, 2, 'x', 'y'}, id: 258, body: "xy"},
		{name: "avro empty body", data: []byte{0, 0, 0, 0, 7}, id: 7, body: ""},
		{name: "max id", data: []byte{0, 0x7f, 0xff, 0xff, 0xff}, id: 1<<31 - 1},
		{name: "id above int32", data: []byte{0, 0x80, 0, 0, 0}, bad: true},
		{name: "empty", data: []byte{}, bad: true},
		{name: "short", data: []byte{0, 0, 0, 1}, bad: true},
		{name: "magic 1 (guid)", data: []byte{1, 0, 0, 0, 1, 0}, bad: true},
		{name: "plain JSON", data: []byte(`{"id":1}`), bad: true},
		{name: "protobuf first message", data: []byte{0, 0, 0, 0, 3, 0, 8, 1}, protobuf: true, id: 3, indexes: []int{0}, body: "\x08\x01"},
		// count 2 (zig-zag 4), indexes 1 (2) and 3 (6)
		{name: "protobuf nested", data: []byte{0, 0, 0, 0, 3, 4, 2, 6, 9}, protobuf: true, id: 3, indexes: []int{1, 3}, body: "\x09"},
		{name: "protobuf no indexes", data: []byte{0, 0, 0, 0, 3}, protobuf: true, bad: true},
		{name: "protobuf negative count", data: []byte{0, 0, 0, 0, 3, 1}, protobuf: true, bad: true},
		{name: "protobuf count beyond data", data: []byte{0, 0, 0, 0, 3, 6, 2}, protobuf: true, bad: true},
		{name: "protobuf negative index", data: []byte{0, 0, 0, 0, 3, 2, 1}, protobuf: true, bad: true},
		{name: "protobuf huge count", data: append([]byte{0, 0, 0, 0, 3}, binary.AppendVarint(nil, 1<<40)...), protobuf: true, bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, body, err := parseHeader(c.data, c.protobuf)
			if c.bad {
				if !errors.Is(err, ErrMalformed) || !IsPoison(err) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.schemaID != c.id || !slices.Equal(h.indexes, c.indexes) || string(body) != c.body {
				t.Fatalf("got id %d indexes %v body %q, want %d %v %q", h.schemaID, h.indexes, body, c.id, c.indexes, c.body)
			}
		})
	}
}

// FuzzParseHeader checks that any input gives a header or ErrMalformed, never a panic,
// and that a header re-encodes to the bytes it was read from.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3}, false)
	f.Add([]byte{0, 0, 0, 0, 3, 4, 2, 6, 9}, true)
	f.Add([]byte{0, 0, 0, 0, 3, 0}, true)
	f.Add([]byte{1}, true)
	f.Fuzz(func(t *testing.T, data []byte, protobuf bool) {
		h, body, err := parseHeader(data, protobuf)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		enc := []byte{0}
		enc = binary.BigEndian.AppendUint32(enc, uint32(h.schemaID))
		if protobuf {
			// [0] may be written as the single byte 0 or as count 1, index 0.
			if len(data) > 5 && data[5] == 0 {
				enc = append(enc, 0)
			} else {
				enc = binary.AppendVarint(enc, int64(len(h.indexes)))
				for _, i := range h.indexes {
					enc = binary.AppendVarint(enc, int64(i))
				}
			}
		}
		enc = append(enc, body...)
		if string(enc) != string(data) {
			// varints have several encodings (non-minimal ones); compare the parse instead
			h2, body2, err := parseHeader(enc, protobuf)
			if err != nil || h2.schemaID != h.schemaID || !slices.Equal(h2.indexes, h.indexes) || string(body2) != string(body) {
				t.Fatalf("re-encoding %x gives %x", data, enc)
			}
		}
	})
}
