//go:build failpoints

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
