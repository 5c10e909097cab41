package rebalance

import "testing"

func TestParseInitialPosition(t *testing.T) {
	for _, s := range []string{"earliest", "latest", "error", "kafka-committed"} {
		p, err := ParseInitialPosition(s)
		if err != nil || p.String() != s {
			t.Errorf("%s: %v %v", s, p, err)
		}
	}
}
