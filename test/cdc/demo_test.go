package cdc

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

// TestCDCDemo runs examples/cdc/demo.sh (`make cdc`) as a user would, with the binaries built
// for the tests: Debezium with Avro through the registry, `eosink run -config
// examples/cdc/pipeline.yaml` SIGKILLed mid-stream and restarted, then the row-by-row
// comparison, the lag and the refused table.
func TestCDCDemo(t *testing.T) {
	e := testbed.Require(t)
	registryURL := testbed.RequireRegistry(t)
	cmd := exec.Command("bash", "../../examples/cdc/demo.sh")
	cmd.Env = append(cmd.Environ(), "KAFKA_BOOTSTRAP_SERVERS="+e.Brokers, "DATABASE_URL="+e.DatabaseURL,
		"EOSINK_REGISTRY_URL="+registryURL, "EOSINK_BIN="+eosinkBin, "CDC_BIN="+cdcBin, "LOGDIR="+t.TempDir(), "STEPS=150",
		"CDC_RUN_ID="+testbed.Name(t, "t"))
	out, err := cmd.CombinedOutput()
	t.Logf("demo.sh:\n%s", out)
	if err != nil {
		t.Fatalf("demo.sh: %v", err)
	}
	for _, want := range []string{"accounts:\n  source rows: ", "lines:\n  source rows: ", "killed the sink with SIGKILL", "mid-stream",
		"\nlag: 0\n", "nopk: ", "has no primary key", "OK: replica equals source"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if n := strings.Count(string(out), "mismatches: 0\n"); n != 2 {
		t.Errorf("%d tables with mismatches: 0, want 2", n)
	}
}
