// Package failpoint lets tests make a sink process fail at a named point of the commit
// protocol: kill itself with SIGKILL, sleep, or exit. Failpoints are configured with the
// EOSINK_FAILPOINTS environment variable and cost one atomic load when none is set.
//
// Syntax: a comma-separated list of name=action, where action is one of
//
//	kill            SIGKILL this process
//	sleep(DUR)      sleep for a Go duration, for example sleep(30s)
//	exit(CODE)      exit with the code at once, without cleanup
//
// An action may be suffixed with @N to fire only on the Nth time the point is reached
// (1-based), for example after-commit=kill@3. Without @N it fires every time.
//
// Each time a failpoint fires it writes one line "failpoint fired: NAME ACTION" to stderr, so
// that a test can prove that the fault it meant to inject did happen.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The points the engine evaluates, in the order a batch passes them.
const (
	AfterFetch        = "after-fetch"         // batch collected, before BEGIN
	AfterOffsetUpdate = "after-offset-update" // conditional offset UPDATE done, before the handler
	InHandler         = "in-handler"          // handler returned, before COMMIT (its writes are in the open tx)
	AfterCommit       = "after-commit"        // COMMIT returned, before the in-memory position advances
	BeforeCommit      = "before-commit"       // just before COMMIT is sent (used to hold an open tx)
	MidWrite          = "mid-write"           // for handlers in this module: between two of their writes
)

// EnvVar is the environment variable read by Load.
const EnvVar = "EOSINK_FAILPOINTS"

type action struct {
	kind  string // kill, sleep, exit
	dur   time.Duration
	code  int
	nth   int64 // 0 = every time
	count atomic.Int64
}

var (
	mu     sync.Mutex
	points atomic.Pointer[map[string]*action]
)

func init() {
	if err := Load(os.Getenv(EnvVar)); err != nil {
		fmt.Fprintf(os.Stderr, "failpoint: ignoring %s: %v\n", EnvVar, err)
	}
}

// Load replaces the configured failpoints with the ones in spec. An empty spec disables all.
func Load(spec string) error {
	mu.Lock()
	defer mu.Unlock()
	spec = strings.TrimSpace(spec)
	if spec == "" {
		points.Store(nil)
		return nil
	}
	m := map[string]*action{}
	for _, part := range strings.Split(spec, ",") {
		name, act, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return fmt.Errorf("%q: want name=action", part)
		}
		a, err := parseAction(act)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m[name] = a
	}
	points.Store(&m)
	return nil
}

func parseAction(s string) (*action, error) {
	a := &action{}
	if body, nth, ok := strings.Cut(s, "@"); ok {
		n, err := strconv.ParseInt(nth, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad @N in %q", s)
		}
		a.nth, s = n, body
	}
	switch {
	case s == "kill":
		a.kind = "kill"
	case strings.HasPrefix(s, "sleep(") && strings.HasSuffix(s, ")"):
		d, err := time.ParseDuration(s[len("sleep(") : len(s)-1])
		if err != nil {
			return nil, err
		}
		a.kind, a.dur = "sleep", d
	case strings.HasPrefix(s, "exit(") && strings.HasSuffix(s, ")"):
		c, err := strconv.Atoi(s[len("exit(") : len(s)-1])
		if err != nil {
			return nil, err
		}
		a.kind, a.code = "exit", c
	default:
		return nil, fmt.Errorf("unknown action %q (want kill, sleep(DUR) or exit(CODE))", s)
	}
	return a, nil
}

// Eval runs the action configured for name, if any.
func Eval(name string) {
	m := points.Load()
	if m == nil {
		return
	}
	a := (*m)[name]
	if a == nil {
		return
	}
	n := a.count.Add(1)
	if a.nth != 0 && n != a.nth {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint fired: %s %s\n", name, a.kind)
	switch a.kind {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case "sleep":
		time.Sleep(a.dur)
	case "exit":
		os.Exit(a.code)
	}
}
