package schemaformat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Records built to exhaust a decoder: each must be refused as malformed, naming what is
// wrong, before the decoder allocates what the record asks for.

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func parseAvro(t *testing.T, schema string) *avroSchema {
	t.Helper()
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	return &avroSchema{schema: s}
}

// zigzag is n as Avro's long.
func zigzag(n int64) []byte {
	return binary.AppendUvarint(nil, uint64(n<<1)^uint64(n>>63))
}

// wantRefused fails unless err matches ErrMalformed and says each of words, and the decode
// allocated less than 1 MiB.
func wantRefused(t *testing.T, what string, alloc uint64, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("%s: err = %v, want ErrMalformed", what, err)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
	if alloc > 1<<20 {
		t.Errorf("%s: allocated %d bytes before refusing", what, alloc)
	}
	t.Logf("%s: %v (%d bytes allocated)", what, err, alloc)
}

// Avro decimals: a scale of 3e8 (allowed by Avro for bytes, whose precision is unbounded)
// would build a 300 MB string; a scale past PostgreSQL's 16383, or an unscaled value
// longer than 64 KiB, is refused; the error names the field.
func TestAvroDecimalBounds(t *testing.T) {
	huge := parseAvro(t, `{"type":"record","name":"R","fields":[{"name":"amount","type":
		{"type":"bytes","logicalType":"decimal","precision":300000000,"scale":300000000}}]}`)
	var err error
	alloc := allocated(func() { _, err = huge.decode([]byte{2, 1}) })
	wantRefused(t, "scale 3e8", alloc, err, "field amount", "scale 300000000")

	over := parseAvro(t, `{"type":"bytes","logicalType":"decimal","precision":20000,"scale":16384}`)
	alloc = allocated(func() { _, err = over.decode([]byte{2, 1}) })
	wantRefused(t, "scale 16384", alloc, err, "scale 16384")
	at := parseAvro(t, `{"type":"bytes","logicalType":"decimal","precision":20000,"scale":16383}`)
	if v, err := at.decode([]byte{2, 1}); err != nil || len(v.(Decimal)) != 16385 {
		t.Errorf("scale 16383: %v", err)
	}

	long := parseAvro(t, `{"type":"bytes","logicalType":"decimal","precision":200000,"scale":2}`)
	alloc = allocated(func() { _, err = long.decode(append(zigzag(65537), make([]byte, 65537)...)) })
	wantRefused(t, "65537 bytes", alloc, err, "65537 bytes")
}

// Protobuf's confluent.type.Decimal carries its scale as an int32: 1e8 would build a 100 MB
// string, -1e8 as many zeros, -2^31 two gigabytes.
func TestProtobufDecimalBounds(t *testing.T) {
	fd := protoFile(t, `syntax = "proto3";
import "confluent/types/decimal.proto";
message Row { confluent.type.Decimal amount = 1; }`)
	row := fd.Messages().ByName("Row")
	amount := row.Fields().ByName("amount")
	for _, scale := range []int32{100_000_000, -100_000_000, 16384, -131073} {
		msg := dynamicpb.NewMessage(row)
		dec := dynamicpb.NewMessage(amount.Message())
		dec.Set(dec.Descriptor().Fields().ByName("value"), protoreflect.ValueOfBytes([]byte{1}))
		dec.Set(dec.Descriptor().Fields().ByName("scale"), protoreflect.ValueOfInt32(scale))
		msg.Set(amount, protoreflect.ValueOfMessage(dec))
		var err error
		alloc := allocated(func() { _, err = protoMessage(msg, 0) })
		wantRefused(t, fmt.Sprintf("scale %d", scale), alloc, err, "field amount", fmt.Sprintf("scale %d", scale))
	}
}

// reusedSchema is a record of levels nested records, each with two optional fields of the
// next one (named on its first use, referred to by name on the second), about 1.8 KB for 20
// levels: a walk that follows each use visits 2^levels nodes.
func reusedSchema(levels int) string {
	var b strings.Builder
	var open func(i int)
	open = func(i int) {
		if i == levels {
			b.WriteString(`{"type":"record","name":"L` + fmt.Sprint(i) + `","fields":[{"name":"v","type":{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}}]}`)
			return
		}
		fmt.Fprintf(&b, `{"type":"record","name":"L%d","fields":[{"name":"a","type":["null",`, i)
		open(i + 1)
		fmt.Fprintf(&b, `]},{"name":"b","type":["null","L%d"]}]}`, i+1)
	}
	open(0)
	return b.String()
}

// The Kafka Connect types of a schema that reuses named records are found in one walk per
// named type: 20 levels (2^20 paths) take a few dozen nodes walked and allocations, where
// following every use took seconds and millions of allocations.
func TestAvroReusedRecordsWalkedOnce(t *testing.T) {
	src := reusedSchema(20)
	t.Logf("schema of %d bytes", len(src))
	s, err := avro.ParseWithCache(src, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1, func() { connectTypes(s) })
	if allocs > 5000 {
		t.Errorf("the walk of %d levels took %.0f allocations, want it linear in the schema", 20, allocs)
	}
	root, walked := connectTypes(s)
	if walked > 20*6+10 {
		t.Errorf("%d nodes walked for 20 levels", walked)
	}
	// A deep path still finds its type, through the uses of the reused records.
	path := append(strings.Split(strings.Repeat("a,b,", 10), ",")[:20], "v")
	m := Message{connect: root}
	if ct, ok := m.Connect(path...); !ok || ct.Name != "io.debezium.time.MicroTimestamp" {
		t.Errorf("Connect(%v) = %v, %v", path, ct, ok)
	}
	t.Logf("%d nodes walked, %.0f allocations", walked, allocs)

	// A value of it decodes: a in every level, b null.
	body := []byte{}
	for range 20 {
		body = append(body, 2) // a: the record
	}
	body = append(body, 4)                   // v = 2
	body = append(body, make([]byte, 20)...) // b: null, from the innermost level out
	as := &avroSchema{schema: s, connect: root}
	if _, err := as.decode(body); err != nil {
		t.Fatal(err)
	}
}

// Every decoded value counts against the item budget, a record as the map it becomes: a
// 1 MiB body that held 1.1 M empty records (157 MiB decoded), or a million records of one
// boolean (340 MiB), is refused, naming the budget, having allocated a small part of that.
func TestAvroValueBudget(t *testing.T) {
	const pad = 1 << 20
	empty := parseAvro(t, `{"type":"record","name":"R","fields":[{"name":"pad","type":"bytes"},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}`)
	body := append(zigzag(pad), make([]byte, pad)...)
	body = append(append(body, zigzag(1_100_000)...), 0)
	t.Logf("body of %d bytes", len(body))
	var err error
	alloc := allocated(func() { _, err = empty.decode(body) })
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "item budget") || !strings.Contains(err.Error(), "field items") {
		t.Errorf("1.1 M empty records: err = %v, want ErrMalformed naming the item budget and the field", err)
	}
	if alloc > 64<<20 {
		t.Errorf("1.1 M empty records: allocated %d MiB before refusing", alloc>>20)
	}
	t.Logf("1.1 M empty records: %v (%d MiB allocated)", err, alloc>>20)

	bools := parseAvro(t, `{"type":"array","items":{"type":"record","name":"B","fields":[{"name":"b","type":"boolean"}]}}`)
	body = append(zigzag(1_000_000), make([]byte, 1_000_000)...)
	body = append(body, 0)
	alloc = allocated(func() { _, err = bools.decode(body) })
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "item budget") {
		t.Errorf("a million records of a boolean: err = %v, want ErrMalformed naming the item budget", err)
	}
	if alloc > 64<<20 {
		t.Errorf("a million records of a boolean: allocated %d MiB before refusing", alloc>>20)
	}
	t.Logf("a million records of a boolean: %v (%d MiB allocated)", err, alloc>>20)

	// Real shapes pass: 1000 records of two strings, 70,000 nulls in a union.
	pairs := parseAvro(t, `{"type":"array","items":{"type":"record","name":"P","fields":[{"name":"k","type":"string"},{"name":"v","type":"string"}]}}`)
	body = zigzag(1000)
	for range 1000 {
		body = append(body, 2, 'k', 2, 'v')
	}
	if v, err := pairs.decode(append(body, 0)); err != nil || len(v.([]any)) != 1000 {
		t.Errorf("1000 pairs: %v", err)
	}
	nulls := parseAvro(t, `{"type":"array","items":["null","long"]}`)
	body = append(zigzag(70_000), make([]byte, 70_000)...)
	if v, err := nulls.decode(append(body, 0)); err != nil || len(v.([]any)) != 70_000 {
		t.Errorf("70,000 nulls in a union: %v", err)
	}
}
