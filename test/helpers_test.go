// Package test holds eosink's integration tests. They run against the real Kafka broker and
// PostgreSQL named by KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (`make test` starts both) and
// fail, never skip, when those are missing.
package test

import (
	"os"
	"testing"

	"github.com/eosink/eosink/internal/testbed"
)

var pointsBin string

func TestMain(m *testing.M) {
	bin, cleanup := testbed.BuildPoints()
	pointsBin = bin
	code := m.Run()
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
