// Package test holds eosink's integration tests. They run against the real Kafka broker and
// PostgreSQL named by KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (`make test` starts both) and
// fail, never skip, when those are missing.
package test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

// The binaries the tests run as processes.
var pointsBin, eosinkBin, ordersBin, ledgerBin, inventoryBin string

func TestMain(m *testing.M) {
	dir, cleanup := testbed.Build("github.com/eosink/eosink/examples/points", "github.com/eosink/eosink/cmd/eosink",
		"github.com/eosink/eosink/examples/orders", "github.com/eosink/eosink/examples/custom-sink/eosink-ledger",
		"github.com/eosink/eosink/examples/inventory")
	pointsBin, eosinkBin = filepath.Join(dir, "points"), filepath.Join(dir, "eosink")
	ordersBin, ledgerBin = filepath.Join(dir, "orders"), filepath.Join(dir, "eosink-ledger")
	inventoryBin = filepath.Join(dir, "inventory")
	code := m.Run()
	testbed.StopContainers()
	cleanup()
	os.Exit(code)
}

// pipeline is one test's isolated pipeline; the methods in this package's files add
// in-process helpers to testbed.Pipeline.
type pipeline struct{ *testbed.Pipeline }

func newPipeline(t *testing.T, partitions int) *pipeline {
	return &pipeline{testbed.NewPipeline(t, partitions)}
}

var classicTimeouts = testbed.ClassicTimeouts

func startChild(t *testing.T, name string, args []string, env ...string) *testbed.Process {
	t.Helper()
	return testbed.StartProcess(t, pointsBin, name, args, env...)
}

// syncBuffer is a log destination that a test reads while the sink writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
