package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a child process (a sink: examples/points) started by a test, its output kept.
type Process struct {
	t    testing.TB
	name string
	Cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

type lockedWriter struct{ c *Process }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(b)
}

// StartProcess runs bin with args and extra environment (failpoints). It is killed when the
// test ends, and its output is logged if the test failed.
func StartProcess(t testing.TB, bin, name string, args []string, env ...string) *Process {
	t.Helper()
	c := &Process{t: t, name: name, done: make(chan struct{})}
	c.Cmd = exec.Command(bin, args...)
	c.Cmd.Env = append(os.Environ(), env...)
	c.Cmd.Stdout, c.Cmd.Stderr = lockedWriter{c}, lockedWriter{c}
	if err := c.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = c.Cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.Exited() {
			_ = c.Cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", name, c.Output())
		}
	})
	return c
}

// Output returns what the process printed so far.
func (c *Process) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Contains reports whether the output contains s.
func (c *Process) Contains(s string) bool { return strings.Contains(c.Output(), s) }

// Exited reports whether the process has exited.
func (c *Process) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Signal sends sig unless the process has exited.
func (c *Process) Signal(sig syscall.Signal) {
	if !c.Exited() {
		_ = c.Cmd.Process.Signal(sig)
	}
}

// Wait waits for the process to exit and returns its error (nil for exit status 0). A process
// that does not exit in time gets SIGQUIT, so that a Go program prints its goroutines into the
// output the test logs (where it hangs), and the test fails.
func (c *Process) Wait(timeout time.Duration) error {
	c.t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		c.Dump()
		c.t.Fatalf("%s did not exit within %s (sent SIGQUIT: its goroutines are in its output)", c.name, timeout)
		return nil
	}
}

// Dump sends SIGQUIT, so that a Go program prints every goroutine's stack into the output
// the test logs when it fails, and waits up to 5 s for it to exit: for a process found hung.
func (c *Process) Dump() {
	c.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// KilledBySIGKILL reports whether err is the exit of a process killed by SIGKILL.
func KilledBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// StopClean sends SIGTERM and requires a clean exit.
func (c *Process) StopClean(timeout time.Duration) {
	c.t.Helper()
	c.Signal(syscall.SIGTERM)
	if err := c.Wait(timeout); err != nil {
		c.t.Fatalf("%s: exit after SIGTERM: %v", c.name, err)
	}
}

// WaitOutput waits until the child printed s.
func (c *Process) WaitOutput(s string, timeout time.Duration) {
	c.t.Helper()
	Eventually(c.t, timeout, fmt.Sprintf("%s to print %q", c.name, s), func() (bool, string) {
		return c.Contains(s), "not yet"
	})
}

// WaitFor waits at most timeout for the process to exit. exited is false if it still runs.
func (c *Process) WaitFor(timeout time.Duration) (err error, exited bool) {
	select {
	case <-c.done:
		return c.err, true
	case <-time.After(timeout):
		return nil, false
	}
}
