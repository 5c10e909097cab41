package offsets_test

import (
	"context"
	"os"
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

// TestMain removes the containers the test bed started when no services were given (the
// container path of make test-docker), as package test's TestMain does.
func TestMain(m *testing.M) {
	code := m.Run()
	testbed.StopContainers()
	os.Exit(code)
}
