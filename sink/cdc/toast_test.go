package cdc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
)

func TestPlaceholderForms(t *testing.T) {
	p := newPlaceholder("")
	ph := DefaultUnavailablePlaceholder
	var codes []any
	for _, c := range []byte(ph) {
		codes = append(codes, json.Number(string(rune('0'+c/100))+string(rune('0'+c/10%10))+string(rune('0'+c%10))))
	}
	for _, v := range []any{ph, base64.StdEncoding.EncodeToString([]byte(ph)), []byte(ph), []any{ph}, []any{[]byte(ph)}, codes} {
		if !p.is(v) {
			t.Errorf("%T %v: not the placeholder", v, v)
		}
	}
	for _, v := range []any{"x", ph + " ", []byte("x"), []any{}, []any{ph, ph}, []any{[]any{ph}}, codes[1:], json.Number("1")} {
		if p.is(v) {
			t.Errorf("%T %v: taken for the placeholder", v, v)
		}
	}
	if q := newPlaceholder("gone"); !q.is("gone") || q.is(ph) {
		t.Error("a configured placeholder is not the one detected")
	}
}

// TestFill: an unavailable column takes the key's latest earlier value in the batch by
// source position; after a delete it is refused; with no earlier change it stays flagged.
func TestFill(t *testing.T) {
	s := &stagedTable{t: &target{name: `"r"."t"`, cols: []string{"id", "a", "b"}}}
	s.changes = []prior{ // indexed by key at the first fill
		{key: "k", commit: 10, lsn: 10, row: []any{"1", "a10", "b10"}},
		{key: "x", commit: 28, lsn: 28, row: []any{"9", "x28", "x28"}},
		{key: "k", commit: 30, lsn: 30, row: []any{"1", "a30", nil}, unavail: []int{2}},
		{key: "k", commit: 20, lsn: 20, row: []any{"1", "a20", "b20"}},
	}
	row := []any{"1", nil, nil}
	left, err := s.fill("k", 25, 25, row, []int{1, 2})
	if err != nil || len(left) != 0 || row[1] != "a20" || row[2] != "b20" {
		t.Fatalf("fill at 25: %v %v %v, want a20 b20", row, left, err)
	}
	row = []any{"1", nil, nil}
	left, err = s.fill("k", 40, 40, row, []int{1, 2})
	if err != nil || len(left) != 1 || left[0] != 2 || row[1] != "a30" {
		t.Fatalf("fill at 40: %v %v %v, want a30 and b still unavailable", row, left, err)
	}
	if left, err = s.fill("other", 40, 40, []any{"2", nil, nil}, []int{1}); err != nil || len(left) != 1 {
		t.Fatalf("no earlier change: %v %v", left, err)
	}
	s.changes = append(s.changes, prior{key: "k", commit: 35, lsn: 35, del: true})
	s.priors["k"] = append(s.priors["k"], len(s.changes)-1)
	var ue *errUnavailable
	if _, err = s.fill("k", 40, 40, []any{"1", nil, nil}, []int{1}); !errors.As(err, &ue) || ue.cols[0] != "a" {
		t.Fatalf("after a delete: %v, want errUnavailable naming a", err)
	}
}
