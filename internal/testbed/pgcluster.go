package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGCluster is a PostgreSQL cluster a test runs itself, with Debian's server binaries (as
// test/services/services.sh finds them), in the test bed's folder, on a free port of its
// own: a database that can fail over, or be restored from a base backup. As root, the
// binaries run as the postgres user.
type PGCluster struct {
	t    testing.TB
	Bin  string // /usr/lib/postgresql/N/bin
	Dir  string // data directory
	Port int
}

// PGBinDir returns the folder of the PostgreSQL server binaries, failing t without them.
func PGBinDir(t testing.TB) string {
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

// ClusterRoot makes a folder for test clusters, named prefix and a random suffix, under
// EOSINK_SERVICES_DIR (the test bed's), else the temporary folder, that the postgres user
// may write; it is removed at the end unless the test failed.
func ClusterRoot(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("EOSINK_SERVICES_DIR")
	if base == "" {
		base = os.TempDir()
	}
	root, err := os.MkdirTemp(base, prefix)
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

// FreePortNumber returns a TCP port free on the loopback interface now.
func FreePortNumber(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Run runs a server binary (initdb, pg_ctl, pg_basebackup, ...) as the cluster's owner,
// failing the test when it fails, and returns its output.
func (c *PGCluster) Run(name string, args ...string) string {
	c.t.Helper()
	bin := filepath.Join(c.Bin, name)
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

// NewPrimary initdb's a cluster named name under root with logical decoding on, starts it
// and stops it at the end.
func NewPrimary(t testing.TB, root, name string) *PGCluster {
	t.Helper()
	c := &PGCluster{t: t, Bin: PGBinDir(t), Dir: filepath.Join(root, name), Port: FreePortNumber(t)}
	c.Run("initdb", "-D", c.Dir, "-U", "postgres", "-A", "trust", "--no-sync")
	c.AppendConf(fmt.Sprintf(`port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
fsync = off
`, c.Port, root))
	c.Start()
	t.Cleanup(c.StopIfRunning)
	return c
}

// Standby makes a streaming standby of c with pg_basebackup -R, on its own port, starts it
// and stops it at the end.
func (c *PGCluster) Standby(name string) *PGCluster {
	c.t.Helper()
	s := &PGCluster{t: c.t, Bin: c.Bin, Dir: filepath.Join(filepath.Dir(c.Dir), name), Port: FreePortNumber(c.t)}
	c.Run("pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(c.Port), "-U", "postgres", "-D", s.Dir, "-R", "-X", "stream")
	s.AppendConf(fmt.Sprintf("port = %d\n", s.Port))
	s.Start()
	c.t.Cleanup(s.StopIfRunning)
	return s
}

// AppendConf appends text to the cluster's postgresql.conf.
func (c *PGCluster) AppendConf(text string) {
	c.t.Helper()
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		c.t.Fatal(err)
	}
}

// Start starts the server and waits until it accepts connections.
func (c *PGCluster) Start() {
	c.Run("pg_ctl", "-D", c.Dir, "-l", c.Dir+".log", "-w", "start")
}

// Stop stops the server (mode fast or immediate).
func (c *PGCluster) Stop(mode string) { c.Run("pg_ctl", "-D", c.Dir, "-m", mode, "-w", "stop") }

// Promote promotes a standby and waits until it is a primary.
func (c *PGCluster) Promote() { c.Run("pg_ctl", "-D", c.Dir, "-w", "promote") }

// StopIfRunning stops the server immediately when it runs.
func (c *PGCluster) StopIfRunning() {
	if _, err := os.Stat(filepath.Join(c.Dir, "postmaster.pid")); err == nil {
		c.Stop("immediate")
	}
}

// URL is the postgres URL of database db.
func (c *PGCluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// WaitReplayed waits until standby has replayed everything primary wrote so far.
func WaitReplayed(t testing.TB, primary *pgx.Conn, standby *PGCluster) {
	t.Helper()
	var target string
	if err := primary.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		t.Fatal(err)
	}
	s, err := pgx.Connect(context.Background(), standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	Eventually(t, 30*time.Second, "the standby replayed "+target, func() (bool, string) {
		var ok bool
		var at string
		err := s.QueryRow(context.Background(), `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_last_wal_replay_lsn()::text`, target).Scan(&ok, &at)
		return err == nil && ok, fmt.Sprint(at, err)
	})
}
