// Package cdc runs the cdc plugin end to end on the real services of the test bed: a
// source database captured by a real Debezium PostgreSQL connector (Avro through the real
// Apicurio registry, or Connect's JSON converter), the real Kafka broker, and `eosink run`
// with the cdc plugin writing replica tables. It needs KAFKA_BOOTSTRAP_SERVERS,
// DATABASE_URL and EOSINK_REGISTRY_URL and fails when they are missing.
package cdc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

var eosinkBin, cdcBin string

func TestMain(m *testing.M) {
	dir, cleanup := testbed.Build("github.com/eosink/eosink/cmd/eosink", "github.com/eosink/eosink/examples/cdc")
	eosinkBin, cdcBin = filepath.Join(dir, "eosink"), filepath.Join(dir, "cdc")
	code := m.Run()
	cleanup()
	os.Exit(code)
}
