package cdc

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bigSchema is a JsonConverter envelope schema of about size bytes, unique for n: a table
// with many columns, each with a name and parameters.
func bigSchema(n, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"struct","name":"t%d.Envelope","fields":[{"type":"struct","optional":true,"field":"after","fields":[`, n)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"c%d_%d"}`, n, i)
	}
	b.WriteString(`]}]}`)
	return []byte(b.String())
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// The cache of parsed JsonConverter schemas is bounded in bytes: 40 unique schemas of
// 650 KB each (a producer sending a new schema with each record: 170 of them passed the
// chart's 512 MiB) leave it holding at most its byte bound, and the heap grows by far less
// than the 170 MiB that keeping them all takes.
func TestSchemaCacheBytes(t *testing.T) {
	c := &schemaCache{m: map[string]*jsonSchema{}}
	before := heapInUse()
	for n := range 40 {
		if _, err := c.get(bigSchema(n, 650<<10)); err != nil {
			t.Fatal(err)
		}
	}
	grown := int64(heapInUse()) - int64(before)
	var text int
	for k := range c.m {
		text += len(k)
	}
	t.Logf("%d schemas cached, %d bytes of text, heap grown by %d MiB", len(c.m), text, grown>>20)
	if text > 8<<20 { // maxSchemaBytes
		t.Errorf("the cache holds %d bytes of schema text, more than its bound %d", text, 8<<20)
	}
	if grown > 100<<20 {
		t.Errorf("the heap grew by %d MiB", grown>>20)
	}
	runtime.KeepAlive(c)
}
