package sink

import "testing"

func TestDivergences(t *testing.T) {
	a, b, c := partitionKey{"t", 0}, partitionKey{"t", 1}, partitionKey{"t", 2}
	sent := map[partitionKey]int64{a: 10, b: 20, c: 30}
	warned := map[partitionKey]int64{}
	got := divergences(sent, map[partitionKey]int64{a: 10, b: 15}, warned)
	if len(got) != 2 {
		t.Fatalf("first check: %+v, want b (15 vs 20) and c (none vs 30)", got)
	}
	for _, d := range got {
		if (d.key == b && (d.kafka != 15 || d.stored != 20)) || (d.key == c && d.kafka != -1) || d.key == a {
			t.Fatalf("wrong divergence %+v", d)
		}
	}
	if got := divergences(sent, map[partitionKey]int64{a: 10, b: 15}, warned); len(got) != 0 {
		t.Fatalf("same values again: %+v, want no repeated warning", got)
	}
	if got := divergences(sent, map[partitionKey]int64{a: 10, b: 20, c: 12}, warned); len(got) != 1 || got[0].key != c {
		t.Fatalf("b healed, c changed: %+v, want only c", got)
	}
	if _, ok := warned[b]; ok {
		t.Fatalf("a healed partition stays in warned")
	}
}
