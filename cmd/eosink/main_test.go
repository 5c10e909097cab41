package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

func TestMigrateCommand(t *testing.T) {
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	ctx := context.Background()
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "version"}, 0, "no migrations applied"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "up"}, 0, "version 1 (latest available: 1)"},
		{[]string{"migrate", "up", "-database-url", e.DatabaseURL, "-schema", schema}, 0, "version 1"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "down"}, 2, "add -yes to confirm"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "-yes", "down"}, 0, "no migrations applied"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "force", "1"}, 0, "version 1"},
		{[]string{"migrate", "-database-url", e.DatabaseURL, "-schema", schema, "sideways"}, 2, "unknown subcommand"},
		{[]string{"migrate", "-database-url", "postgres://u:pw-secret@127.0.0.1:1/x?connect_timeout=2", "up"}, 1, "cannot connect to PostgreSQL"},
		{[]string{"migrate", "-database-url", "", "up"}, 2, "no database"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	}
	for _, s := range steps {
		code, out := cli(s.args...)
		if code != s.code || !strings.Contains(out, s.want) {
			t.Fatalf("eosink %v: exit %d, output %q; want exit %d and %q", s.args, code, out, s.code, s.want)
		}
		if strings.Contains(out, "pw-secret") {
			t.Fatalf("output leaks the password: %q", out)
		}
	}
}
