package cdc

import (
	"slices"
	"strings"
	"testing"
)

func TestVerifyDiffRows(t *testing.T) {
	src := []keyRow{{[]string{"1"}, "a"}, {[]string{"2"}, "b"}, {[]string{"3"}, "c"}, {[]string{"5"}, "e"}}
	dst := []keyRow{{[]string{"1"}, "a"}, {[]string{"2"}, "x"}, {[]string{"4"}, "d"}, {[]string{"5"}, "e"}}
	d := diffRows(src, dst)
	var got []string
	for _, r := range d {
		got = append(got, strings.Join(r.key, ",")+"="+r.hash)
	}
	slices.Sort(got)
	// 2 differs (the source's hash kept), 3 is missing in the replica, 4 is extra ("").
	if want := []string{"2=b", "3=c", "4="}; !slices.Equal(got, want) {
		t.Fatalf("diffRows: %v, want %v", got, want)
	}
	if d := diffRows(src, src); len(d) != 0 {
		t.Fatalf("equal chunks differ: %v", d)
	}
}

func TestVerifyKeyIDKeepsCompositeKeysApart(t *testing.T) {
	// Joined naively, ("a,b", "c") and ("a", "b,c") would be the same key.
	if keyID([]string{"a,b", "c"}) == keyID([]string{"a", "b,c"}) || keyID([]string{"1:x"}) == keyID([]string{"1", "x"}) {
		t.Fatal("two different keys share an id")
	}
}

func TestVerifyRowHashComparesNumericsByValue(t *testing.T) {
	h := rowHash([]vcolumn{{"id", "bigint"}, {"amount", "numeric(12,3)"}, {"any", "numeric"}, {"note", "text"}})
	want := `md5(ARRAY["id"::text, trim_scale("amount")::text, trim_scale("any")::text, "note"::text]::text)`
	if h != want {
		t.Fatalf("rowHash:\n%s\nwant\n%s", h, want)
	}
	if p := params([]vcolumn{{"a", "integer"}, {"b", "text"}}, 3); p != "$3::text::integer, $4::text::text" {
		t.Fatalf("params: %s", p)
	}
}
