package cdc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pgCluster is a PostgreSQL cluster a test runs itself, with Debian's server binaries (as
// test/services/services.sh finds them), in the test bed's folder, on a free port of its
// own: a source that can fail over. As root, the binaries run as the postgres user.
type pgCluster struct {
	t    *testing.T
	bin  string // /usr/lib/postgresql/N/bin
	dir  string // data directory
	port int
}

func pgBinDir(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	t.Fatal("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (test/services/services.sh installs them)")
	return ""
}

// clusterRoot makes a folder for test clusters under EOSINK_SERVICES_DIR (the test bed's),
// else the temporary folder, that the postgres user may write; it is removed at the end.
func clusterRoot(t *testing.T) string {
	t.Helper()
	base := os.Getenv("EOSINK_SERVICES_DIR")
	if base == "" {
		base = os.TempDir()
	}
	root, err := os.MkdirTemp(base, "cdc-failover-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(root)
		}
	})
	return root
}

func freePortNumber(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pgRun runs a server binary as the cluster's owner.
func (c *pgCluster) run(name string, args ...string) string {
	c.t.Helper()
	bin := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newPrimary initdb's a cluster with logical decoding on, starts it and stops it at the end.
func newPrimary(t *testing.T, root, name string) *pgCluster {
	t.Helper()
	c := &pgCluster{t: t, bin: pgBinDir(t), dir: filepath.Join(root, name), port: freePortNumber(t)}
	c.run("initdb", "-D", c.dir, "-U", "postgres", "-A", "trust", "--no-sync")
	c.appendConf(fmt.Sprintf(`port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
fsync = off
`, c.port, root))
	c.start()
	t.Cleanup(c.stopIfRunning)
	return c
}

// standby makes a streaming standby of c with pg_basebackup -R, on its own port, starts it
// and stops it at the end.
func (c *pgCluster) standby(name string) *pgCluster {
	c.t.Helper()
	s := &pgCluster{t: c.t, bin: c.bin, dir: filepath.Join(filepath.Dir(c.dir), name), port: freePortNumber(c.t)}
	c.run("pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", "postgres", "-D", s.dir, "-R", "-X", "stream")
	s.appendConf(fmt.Sprintf("port = %d\n", s.port))
	s.start()
	c.t.Cleanup(s.stopIfRunning)
	return s
}

func (c *pgCluster) appendConf(text string) {
	c.t.Helper()
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		c.t.Fatal(err)
	}
}

func (c *pgCluster) start() {
	c.run("pg_ctl", "-D", c.dir, "-l", c.dir+".log", "-w", "start")
}

// stop stops the server (mode fast or immediate).
func (c *pgCluster) stop(mode string) { c.run("pg_ctl", "-D", c.dir, "-m", mode, "-w", "stop") }

func (c *pgCluster) promote() { c.run("pg_ctl", "-D", c.dir, "-w", "promote") }

func (c *pgCluster) stopIfRunning() {
	if _, err := os.Stat(filepath.Join(c.dir, "postmaster.pid")); err == nil {
		c.stop("immediate")
	}
}

// url is the postgres URL of database db.
func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}
