package mapping

import (
	"bytes"
	"testing"

	"github.com/eosink/eosink/sink"
)

// checkAppendCopy fails t unless AppendCopy appends what Row and AppendCopyRow append, or
// fails with the same error and leaves dst as it was, with no bytea column and with the
// first one bytea.
func checkAppendCopy(t *testing.T, m *Mapping, r *sink.Record) {
	t.Helper()
	for _, bytea := range [][]bool{nil, {true}} {
		prev := []byte("prev\n")
		row, werr := m.Row(r, nil)
		want := prev
		if werr == nil {
			want, werr = AppendCopyRow(append([]byte(nil), prev...), row, bytea)
		}
		var scratch []byte
		got, gerr := m.AppendCopy(append([]byte(nil), prev...), r, bytea, &scratch)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("bytea %v: AppendCopy error %v, Row and AppendCopyRow %v", bytea, gerr, werr)
		}
		if werr != nil {
			want = prev
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("bytea %v: AppendCopy = %q, Row and AppendCopyRow = %q", bytea, got, want)
		}
		// Again with the scratch grown, after another record: nothing carries over.
		got2, _ := m.AppendCopy(append([]byte(nil), prev...), r, bytea, &scratch)
		if !bytes.Equal(got2, got) {
			t.Fatalf("bytea %v: AppendCopy again = %q, first %q", bytea, got2, got)
		}
	}
}

func TestAppendCopyMatchesRow(t *testing.T) {
	big := `{"id":1,"note":"` + string(bytes.Repeat([]byte(`a\tb\"c`), 400)) + `","plain":"` + string(bytes.Repeat([]byte("x"), 2000)) + `"}`
	for _, v := range []string{benchValue, big, `{"id":null}`, `{"id":"\u0000"}`, `{"id":1,"user":{"name":"tab\there\\"}}`, `[`, `{}`} {
		m := benchMapping()
		m.Columns = append(m.Columns,
			Column{Name: "note", From: MustParseSource("value.note")},
			Column{Name: "plain", From: MustParseSource("value.plain")},
			Column{Name: "whole", From: MustParseSource("value")},
			Column{Name: "key", From: MustParseSource("key")},
			Column{Name: "ts", From: MustParseSource("timestamp")},
			Column{Name: "offset", From: MustParseSource("offset")})
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		r := benchRecord()
		r.Value = []byte(v)
		checkAppendCopy(t, m, r)
	}
}

// BenchmarkRowAndCopyDirect is BenchmarkRowAndCopy's work through AppendCopy.
func BenchmarkRowAndCopyDirect(b *testing.B) {
	m, r := benchMapping(), benchRecord()
	var buf, scratch []byte
	b.SetBytes(int64(len(r.Value)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = m.AppendCopy(buf[:0], r, nil, &scratch); err != nil {
			b.Fatal(err)
		}
	}
}
