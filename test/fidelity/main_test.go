// Package fidelity is the replica fidelity suite (issue 22): a randomized workload on a real
// source database, the real Debezium PostgreSQL connector (the JsonConverter with and
// without schemas, each decimal mode, Avro through the registry), `eosink run` with the cdc
// plugin, and a comparison of every row of every table, per type, converter and replica
// identity. `make fidelity` runs the full form (FIDELITY=full); `go test ./...` (so
// `make test`) runs the short form. It needs KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and
// EOSINK_REGISTRY_URL (. test/services/use.sh) and fails when they are missing.
package fidelity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

var eosinkBin string

func TestMain(m *testing.M) {
	dir, cleanup := testbed.Build("github.com/eosink/eosink/cmd/eosink")
	eosinkBin = filepath.Join(dir, "eosink")
	code := m.Run()
	cleanup()
	os.Exit(code)
}
