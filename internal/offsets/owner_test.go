package offsets

import "testing"

func TestResetOwnerNamesTheFencedInstance(t *testing.T) {
	first := ResetOwner("alice", "host-1-1")
	if first != "reset by alice (was host-1-1)" {
		t.Fatalf("first = %q", first)
	}
	// A second change before the sink noticed still names the instance that owned it.
	second := ResetOwner("bob", first)
	if was, ok := ResetFrom(second); !ok || was != "host-1-1" {
		t.Fatalf("ResetFrom(%q) = %q, %v", second, was, ok)
	}
	for _, owner := range []string{"host-1-1", "", "reset by carol", "reset by x (was y"} {
		if was, ok := ResetFrom(owner); ok {
			t.Errorf("ResetFrom(%q) = %q, want not a reset", owner, was)
		}
	}
}
