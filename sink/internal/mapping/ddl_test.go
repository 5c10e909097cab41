package mapping

import (
	"errors"
	"slices"
	"testing"

	"github.com/eosink/eosink/sink"
)

func TestColumnTypesWithoutRegistry(t *testing.T) {
	src := func(s string) Source {
		x, err := ParseSource(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	m := Mapping{Key: String, Value: JSON}
	for _, s := range []string{"topic", "partition", "offset", "timestamp", "header.h", "key", "value"} {
		m.Columns = append(m.Columns, Column{Name: s, From: src(s)})
	}
	r := &sink.Record{Key: []byte("k"), Value: []byte(`{}`)}
	got, err := m.ColumnTypes(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"text", "integer", "bigint", "timestamptz", "text", "text", "jsonb"}; !slices.Equal(got, want) {
		t.Errorf("types %v, want %v", got, want)
	}
	m.Key = Bytes
	if got, _ := m.ColumnTypes(r); got[5] != "bytea" {
		t.Errorf("bytes key: %s", got[5])
	}
	m.Columns = append(m.Columns, Column{Name: "x", From: src("value.x")})
	var fe *FieldError
	if _, err := m.ColumnTypes(r); !errors.Is(err, ErrUntyped) || !errors.As(err, &fe) || fe.Column != "x" {
		t.Errorf("a json path: %v, want ErrUntyped for column x", err)
	}
}
