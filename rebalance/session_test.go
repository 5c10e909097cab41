package rebalance

import (
	"strings"
	"testing"
)

// SessionName is what PostgreSQL keeps unchanged: ASCII and at most 63 bytes, and it keeps
// apart pipelines that differ only past the cut or only in non-ASCII characters.
func TestSessionNameSurvivesPostgres(t *testing.T) {
	long := "orders-für-" + strings.Repeat("x", 80)
	names := map[string]string{}
	for _, p := range []string{"orders", long, long + "y", "orders-fūr", "orders-für", ""} {
		n := SessionName(p)
		if len(n) > 63 {
			t.Errorf("SessionName(%q) = %q: %d bytes", p, n, len(n))
		}
		for i := 0; i < len(n); i++ {
			if n[i] < 0x20 || n[i] >= 0x7f {
				t.Errorf("SessionName(%q) = %q: byte %#x is not printable ASCII", p, n, n[i])
			}
		}
		if !strings.HasPrefix(n, "eosink:") {
			t.Errorf("SessionName(%q) = %q", p, n)
		}
		if q, ok := names[n]; ok {
			t.Errorf("pipelines %q and %q share the session name %q", q, p, n)
		}
		names[n] = p
	}
	if got := SessionName("orders"); !strings.HasSuffix(got, ":orders") || len(got) != len("eosink:12345678:orders") {
		t.Errorf("SessionName(orders) = %q, want eosink:HASH:orders", got)
	}
}
