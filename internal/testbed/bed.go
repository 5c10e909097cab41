package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Bed is a private PostgreSQL or Kafka broker started by one test with
// test/services/services.sh, on its own loopback ports, for faults that would disturb the
// other tests: restarts and kills. It is stopped and deleted when the test ends.
type Bed struct {
	Only string // "pg" or "kafka"
	Dir  string
	Env  Env // the private service's address; the other field is empty
	env  []string
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// StartBed starts a private service: only is "pg" or "kafka".
func StartBed(t testing.TB, only string) *Bed {
	t.Helper()
	root := repoRoot()
	beds := filepath.Join(root, ".services", "beds")
	if err := os.MkdirAll(beds, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &Bed{Only: only, Dir: filepath.Join(beds, Name(t, only))}
	kport, pport := freePortPair(t), freePortPair(t)
	b.env = append(os.Environ(), "EOSINK_SERVICES_DIR="+b.Dir, "EOSINK_SERVICES_ONLY="+only, "EOSINK_SECURE=0",
		"EOSINK_KAFKA_PORT="+strconv.Itoa(kport), "EOSINK_PG_PORT="+strconv.Itoa(pport))
	t.Cleanup(func() {
		if out, err := b.run("down"); err != nil {
			t.Logf("stopping private %s: %v\n%s", only, err, out)
		}
		_ = os.RemoveAll(b.Dir)
	})
	if out, err := b.run("up"); err != nil {
		t.Fatalf("private %s did not start: %v\n%s", only, err, out)
	}
	switch only {
	case "pg":
		b.Env.DatabaseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/eosink?sslmode=disable", pport)
	case "kafka":
		b.Env.Brokers = fmt.Sprintf("127.0.0.1:%d", kport)
	}
	return b
}

// Do runs a services.sh command on the bed (kafka-kill, kafka-start, pg-restart fast, ...).
func (b *Bed) Do(t testing.TB, args ...string) {
	t.Helper()
	if out, err := b.run(args...); err != nil {
		t.Fatalf("services.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (b *Bed) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(), "test", "services", "services.sh")}, args...)...)
	cmd.Env = b.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// freePortPair returns a loopback port p such that p and p+1 were both free.
func freePortPair(t testing.TB) int {
	t.Helper()
	p, err := freePortPairErr()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
