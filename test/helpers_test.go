// Package test holds eosink's integration tests. They run against the real Kafka broker and
// PostgreSQL named by KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (`make test` starts both) and
// fail, never skip, when those are missing.
package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

var pointsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "eosink-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pointsBin = filepath.Join(dir, "points")
	build := exec.Command("go", "build", "-o", pointsBin, "github.com/eosink/eosink/examples/points")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building examples/points:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pipeline is one test's isolated pipeline: its own topic, group, and schemas.
type pipeline struct {
	env           testbed.Env
	topic, group  string
	schema        string // the example's tables
	offsetsSchema string // eosink's offsets table
}

func newPipeline(t *testing.T, partitions int) *pipeline {
	t.Helper()
	e := testbed.Require(t)
	p := &pipeline{env: e, topic: testbed.Topic(t, e, partitions), group: testbed.Name(t, "g"),
		schema: testbed.Schema(t, e), offsetsSchema: testbed.Schema(t, e)}
	ctx := context.Background()
	if err := sink.Migrate(ctx, e.DatabaseURL, p.offsetsSchema); err != nil {
		t.Fatalf("migrate offsets: %v", err)
	}
	if err := app.Migrate(ctx, e.DatabaseURL, p.schema); err != nil {
		t.Fatalf("migrate example: %v", err)
	}
	return p
}

func (p *pipeline) produce(t *testing.T, events int, seed uint64) {
	t.Helper()
	n, err := app.Produce(context.Background(), app.ProduceOptions{Brokers: p.env.Brokers, Topic: p.topic, Events: events, Accounts: 37, Seed: seed})
	if err != nil || n != events {
		t.Fatalf("produce: %d of %d: %v", n, events, err)
	}
}

func (p *pipeline) verify(t *testing.T) app.Report {
	t.Helper()
	rep, err := app.Verify(context.Background(), app.VerifyOptions{Brokers: p.env.Brokers, Topic: p.topic,
		DatabaseURL: p.env.DatabaseURL, Schema: p.schema, Pipeline: p.group, OffsetsSchema: p.offsetsSchema})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// waitCaughtUp waits until every produced event is applied and the stored offsets reach the
// log end, then checks that nothing was applied twice.
func (p *pipeline) waitCaughtUp(t *testing.T, timeout time.Duration) app.Report {
	t.Helper()
	var rep app.Report
	testbed.Eventually(t, timeout, "the sink to catch up", func() (bool, string) {
		rep = p.verify(t)
		return rep.Lag == 0 && rep.Applied == rep.Produced, fmt.Sprintf("%+v", rep)
	})
	if !rep.OK() {
		t.Fatalf("exactly-once violated: %+v", rep)
	}
	return rep
}

// classicTimeouts make a dead member of a classic-protocol group leave within seconds
// instead of the 45s default, so that a restarted sink is assigned quickly.
var classicTimeouts = []string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000"}

// args are the points run flags for this pipeline, with classicTimeouts.
func (p *pipeline) args(extra ...string) []string {
	return p.rawArgs(append(append([]string{}, classicTimeouts...), extra...)...)
}

// rawArgs are the points run flags for this pipeline and nothing else.
func (p *pipeline) rawArgs(extra ...string) []string {
	return append([]string{"run", "-brokers", p.env.Brokers, "-database-url", p.env.DatabaseURL, "-topic", p.topic,
		"-group", p.group, "-schema", p.schema, "-offsets-schema", p.offsetsSchema, "-migrate=false"}, extra...)
}

// child is a sink process (examples/points) started by a test.
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

type lockedWriter struct{ c *child }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(b)
}

// startChild runs examples/points with args and extra environment (failpoints).
func startChild(t *testing.T, name string, args []string, env ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, done: make(chan struct{})}
	c.cmd = exec.Command(pointsBin, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = lockedWriter{c}, lockedWriter{c}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", name, c.output())
		}
	})
	return c
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *child) contains(s string) bool { return strings.Contains(c.output(), s) }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) signal(sig syscall.Signal) {
	if !c.exited() {
		_ = c.cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit and returns its error (nil for exit status 0).
func (c *child) wait(timeout time.Duration) error {
	c.t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		c.t.Fatalf("%s did not exit within %s", c.name, timeout)
		return nil
	}
}

// killedBySIGKILL reports whether err is the exit of a process killed by SIGKILL.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// stopClean sends SIGTERM and requires a clean exit.
func (c *child) stopClean(timeout time.Duration) {
	c.t.Helper()
	c.signal(syscall.SIGTERM)
	if err := c.wait(timeout); err != nil {
		c.t.Fatalf("%s: exit after SIGTERM: %v", c.name, err)
	}
}

// waitOutput waits until the child printed s.
func (c *child) waitOutput(s string, timeout time.Duration) {
	c.t.Helper()
	testbed.Eventually(c.t, timeout, fmt.Sprintf("%s to print %q", c.name, s), func() (bool, string) {
		return c.contains(s), "not yet"
	})
}
