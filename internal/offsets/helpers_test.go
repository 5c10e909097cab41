package offsets_test

import (
	"context"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// migrated returns the test bed and a new schema of its database with the framework's
// tables in it.
func migrated(t *testing.T) (testbed.Env, string) {
	t.Helper()
	e := testbed.Require(t)
	schema := testbed.Schema(t, e)
	if err := sink.Migrate(context.Background(), e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	return e, schema
}
