package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

// TestMigrateUpReportsEachPlugin: migrate up -config says which migration sets ran, how many
// migrations each applied and the versions, or that a set was up to date, for each sink of a
// multi plugin in turn; a second run applies nothing and says so.
func TestMigrateUpReportsEachPlugin(t *testing.T) {
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	file := writeFile(t, fmt.Sprintf(`
kafka: {brokers: %q, group: g, topics: [t]}
database: {url: %q, schema: %s}
sink:
  type: multi
  sinks:
    - {type: table, table: history, columns: {id: value.id}}
    - {type: clitest}
    - {type: inbox, event_id: value.id, inner: {type: clitest}}
`, e.Brokers, e.DatabaseURL, schema))
	set := func(entry, name string) string {
		return fmt.Sprintf(`sink plugin "multi": %s: %s migrations in schema %q: `, entry, name, schema)
	}
	code, out, errOut := runCLI("migrate", "up", "-config", file)
	if code != 0 {
		t.Fatalf("migrate up: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`sink plugin "multi": sinks[0] (table): no migrations of its own` + "\n",
		set("sinks[1] (clitest)", "clitest") + "1 applied (version 0 -> 1)\n",
		set("sinks[2] (inbox)", "clitest") + "already up to date (version 1)\n", // the set sinks[1] migrated
	} {
		if !strings.Contains(out, want) {
			t.Errorf("first migrate up lacks %q:\n%s", want, out)
		}
	}
	if want := fmt.Sprintf("migrate eosink (schema %q): ", schema); !strings.Contains(errOut, want) {
		t.Errorf("the progress of eosink's own migrations lacks %q:\n%s", want, errOut)
	}
	_, inboxLine, _ := strings.Cut(out, set("sinks[2] (inbox)", "inbox"))
	if inboxLine, _, _ = strings.Cut(inboxLine, "\n"); !strings.Contains(inboxLine, " applied (version 0 -> ") {
		t.Errorf("the inbox's migrations ran, but: %q\n%s", inboxLine, out)
	}
	code, out, errOut = runCLI("migrate", "up", "-config", file)
	if code != 0 {
		t.Fatalf("second migrate up: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, " applied (") || strings.Count(out, "already up to date") != 4 {
		t.Errorf("second migrate up, want the eosink tables and 3 sets up to date, none applied:\n%s", out)
	}
}
