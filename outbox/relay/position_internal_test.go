package relay

import "testing"

// TestPositionRecordCarriesTheGeneration: a position record round-trips its generation, and
// one an older relay wrote (no generation field) still decodes, with none.
func TestPositionRecordCarriesTheGeneration(t *testing.T) {
	b, err := encodePosition(position{Xid: 18446744073709551000, ID: 42}, "0f1e", "r", 0, 1, "me")
	if err != nil {
		t.Fatal(err)
	}
	pos, gen, err := decodePosition(b)
	if err != nil || pos != (position{Xid: 18446744073709551000, ID: 42}) || gen != "0f1e" {
		t.Fatalf("decoded %v %q %v from %s", pos, gen, err, b)
	}
	pos, gen, err = decodePosition([]byte(`{"xid": "735", "id": 20, "relay": "r", "shard": 0, "shards": 1, "owner": "old", "at": "2026-11-30T00:00:00Z"}`))
	if err != nil || pos != (position{Xid: 735, ID: 20}) || gen != "" {
		t.Fatalf("an older relay's record decoded as %v %q %v", pos, gen, err)
	}
	if (generation{}).covers(position{}) {
		t.Errorf("no generation covers a position")
	}
	if g := (generation{name: "x", horizon: 10}); !g.covers(position{Xid: 9, ID: 1 << 62}) || g.covers(position{Xid: 10}) {
		t.Errorf("a generation covers exactly the positions below its horizon")
	}
}
