package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Converter names how Kafka Connect writes the change events' keys and values.
type Converter string

const (
	// JSONWithSchemas is Connect's JsonConverter with schemas.enable=true: every key and value
	// is {"schema":{...},"payload":{...}}.
	JSONWithSchemas Converter = "json"
	// JSONPlain is the JsonConverter with schemas.enable=false: the payload alone.
	JSONPlain Converter = "json-plain"
	// Avro is Apicurio's AvroConverter (io.apicurio:apicurio-registry-utils-converter) through
	// the test bed's registry: Confluent wire format (magic byte 0, 4-byte id), subjects
	// <topic>-key and <topic>-value.
	Avro Converter = "avro"
)

// DebeziumOptions configure one Debezium PostgreSQL source connector on its own Kafka Connect
// standalone worker.
type DebeziumOptions struct {
	Brokers   string // Kafka bootstrap servers (KAFKA_BOOTSTRAP_SERVERS)
	SourceURL string // postgres:// URL of the database to capture; its cluster needs wal_level=logical
	// Tables is table.include.list: schema.table names (regular expressions, as Debezium reads them).
	Tables []string
	// TopicPrefix is topic.prefix: the events of schema.table go to <TopicPrefix>.<schema>.<table>.
	// It also names the connector, and the slot and publication unless they are given.
	TopicPrefix string
	// Slot and Publication are the replication slot and publication names (slot.name,
	// publication.name). Default: dbz_<TopicPrefix>, made a valid PostgreSQL name. They must be
	// unique per test: two connectors on one slot fail.
	Slot, Publication string
	Converter         Converter // default JSONWithSchemas
	// RegistryURL is the registry for Avro: EOSINK_REGISTRY_URL (…/apis/ccompat/v7) or the
	// registry's base URL. The converter talks to Apicurio's v2 API on the same server.
	RegistryURL     string
	SnapshotMode    string // snapshot.mode; default "initial" (rows present at start arrive as op "r")
	Partitions      int    // topic.creation.default.partitions; default 1
	DecimalHandling string // decimal.handling.mode: "precise" (Debezium's default), "string" or "double"
	// Connector holds more connector properties; they override the ones above.
	Connector map[string]string
	// Worker holds more worker properties (producer.*, ...); they override the defaults.
	Worker      map[string]string
	RESTPort    int           // Connect REST API port on 127.0.0.1. Default: a free port
	Dir         string        // configs, offsets and connect.log. Default: a new temporary folder
	Java        string        // java binary. Default: EOSINK_DEBEZIUM_JAVA, else java on PATH (17+)
	Heap        string        // JVM -Xmx. Default: 512m
	StopTimeout time.Duration // wait after SIGTERM before SIGKILL. Default: 30s
	// StartTimeout bounds RunDebezium's start (StartDebezium's ctx). Default: 3 minutes.
	StartTimeout time.Duration
}

// Debezium is a running Kafka Connect standalone worker with one Debezium PostgreSQL source
// connector, started by StartDebezium.
type Debezium struct {
	Name        string // connector name
	Dir         string // worker.properties, connector.properties, connect.offsets, connect.log
	Log         string // the worker's stdout and stderr
	RESTURL     string // Connect REST API, http://127.0.0.1:<free port>
	Slot        string
	Publication string
	TopicPrefix string
	StartedIn   time.Duration // from launch to task RUNNING with the slot in place

	opts     DebeziumOptions
	tempDir  bool // Dir was made by StartDebezium
	cmd      *exec.Cmd
	logFile  *os.File
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
	killed   bool // Stop killed the worker after StopTimeout
}

// Topic returns the topic of a captured table, schemaTable being "schema.table".
func (d *Debezium) Topic(schemaTable string) string { return d.TopicPrefix + "." + schemaTable }

var (
	dbzJarsOnce sync.Once
	dbzJars     map[string]string
	dbzJarsErr  error
)

// DebeziumJars fetches the Connect and Debezium jars once per process with
// test/services/debezium.sh fetch (idempotent, fast when cached) and returns its
// EOSINK_DEBEZIUM_LIBS, EOSINK_DEBEZIUM_PLUGINS and EOSINK_DEBEZIUM_LOG4J.
func DebeziumJars() (libs, plugins, log4j string, err error) {
	dbzJarsOnce.Do(func() {
		script := filepath.Join(repoRoot(), "test", "services", "debezium.sh")
		cmd := exec.Command("bash", script, "fetch")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			dbzJarsErr = fmt.Errorf("%s fetch: %v\n%s", script, err, strings.TrimSpace(stderr.String()))
			return
		}
		dbzJars = map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				dbzJars[k] = v
			}
		}
		for _, k := range []string{"EOSINK_DEBEZIUM_LIBS", "EOSINK_DEBEZIUM_PLUGINS", "EOSINK_DEBEZIUM_LOG4J"} {
			if dbzJars[k] == "" {
				dbzJarsErr = fmt.Errorf("%s fetch printed no %s:\n%s", script, k, out)
				return
			}
		}
	})
	if dbzJarsErr != nil {
		return "", "", "", dbzJarsErr
	}
	return dbzJars["EOSINK_DEBEZIUM_LIBS"], dbzJars["EOSINK_DEBEZIUM_PLUGINS"], dbzJars["EOSINK_DEBEZIUM_LOG4J"], nil
}

var notPgName = regexp.MustCompile(`[^a-z0-9_]+`)

// pgName makes s a valid slot or publication name: lower case letters, digits and _, at most
// 63 bytes.
func pgName(s string) string {
	s = notPgName.ReplaceAllString(strings.ToLower(s), "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// RegistryV2URL turns the registry URL of the test bed (EOSINK_REGISTRY_URL,
// http://host:port/apis/ccompat/v7) or a base URL into Apicurio's v2 API URL, which its Kafka
// Connect converter uses.
func RegistryV2URL(registryURL string) string {
	u := strings.TrimRight(registryURL, "/")
	if i := strings.Index(u, "/apis/"); i >= 0 {
		u = u[:i]
	}
	return u + "/apis/registry/v2"
}

// StartDebezium writes worker.properties and connector.properties, runs
// java -cp 'libs/*' org.apache.kafka.connect.cli.ConnectStandalone as a child process (its
// output in Dir/connect.log) and returns once the connector's task is RUNNING and the
// replication slot and publication exist, so that every change committed afterwards is
// captured. ctx bounds the start (give it a minute or two). Call Stop to end it.
func StartDebezium(ctx context.Context, o DebeziumOptions) (*Debezium, error) {
	if o.Brokers == "" || o.SourceURL == "" || o.TopicPrefix == "" || len(o.Tables) == 0 {
		return nil, errors.New("debezium: Brokers, SourceURL, TopicPrefix and Tables are required")
	}
	if o.Converter == "" {
		o.Converter = JSONWithSchemas
	}
	if o.Converter == Avro && o.RegistryURL == "" {
		return nil, errors.New("debezium: the Avro converter needs RegistryURL (EOSINK_REGISTRY_URL)")
	}
	if o.Slot == "" {
		o.Slot = pgName("dbz_" + o.TopicPrefix)
	}
	if o.Publication == "" {
		o.Publication = pgName("dbz_" + o.TopicPrefix)
	}
	if o.SnapshotMode == "" {
		o.SnapshotMode = "initial"
	}
	if o.Partitions <= 0 {
		o.Partitions = 1
	}
	if o.Heap == "" {
		o.Heap = "512m"
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.Java == "" {
		o.Java = os.Getenv("EOSINK_DEBEZIUM_JAVA")
	}
	if o.Java == "" {
		o.Java = "java"
	}
	src, err := pgx.ParseConfig(o.SourceURL)
	if err != nil {
		return nil, fmt.Errorf("debezium: source URL: %v", err)
	}
	libs, plugins, log4j, err := DebeziumJars()
	if err != nil {
		return nil, fmt.Errorf("debezium: jars: %v", err)
	}
	tempDir := o.Dir == ""
	if tempDir {
		if o.Dir, err = os.MkdirTemp("", "debezium-"+pgName(o.TopicPrefix)+"-"); err != nil {
			return nil, err
		}
	}
	port := o.RESTPort
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	d := &Debezium{
		Name: "dbz-" + o.TopicPrefix, Dir: o.Dir, Log: filepath.Join(o.Dir, "connect.log"),
		RESTURL: "http://127.0.0.1:" + strconv.Itoa(port), Slot: o.Slot, Publication: o.Publication,
		TopicPrefix: o.TopicPrefix, opts: o, tempDir: tempDir, done: make(chan struct{}),
	}

	worker := map[string]string{
		"bootstrap.servers":            o.Brokers,
		"offset.storage.file.filename": filepath.Join(o.Dir, "connect.offsets"),
		"offset.flush.interval.ms":     "1000",
		"listeners":                    d.RESTURL,
		"rest.advertised.host.name":    "127.0.0.1",
		"rest.advertised.port":         strconv.Itoa(port),
		// Everything is on the classpath and the connector ships a ServiceLoader manifest.
		"plugin.discovery": "service_load",
	}
	switch o.Converter {
	case JSONWithSchemas, JSONPlain:
		schemas := strconv.FormatBool(o.Converter == JSONWithSchemas)
		for _, side := range []string{"key", "value"} {
			worker[side+".converter"] = "org.apache.kafka.connect.json.JsonConverter"
			worker[side+".converter.schemas.enable"] = schemas
		}
	case Avro:
		// The Apicurio converter lives in plugin.path. It ships no ServiceLoader manifest;
		// debezium.sh adds one when it can, else Connect must scan the jars (slower).
		worker["plugin.path"] = plugins
		if _, err := os.Stat(filepath.Join(plugins, "apicurio-converter", "eosink-converter-service-manifest.jar")); err != nil {
			worker["plugin.discovery"] = "hybrid_warn"
		}
		for _, side := range []string{"key", "value"} {
			p := side + ".converter"
			worker[p] = "io.apicurio.registry.utils.converter.AvroConverter"
			worker[p+".apicurio.registry.url"] = RegistryV2URL(o.RegistryURL)
			worker[p+".apicurio.registry.auto-register"] = "true"
			worker[p+".apicurio.registry.find-latest"] = "true"
			worker[p+".apicurio.registry.as-confluent"] = "true"
			worker[p+".apicurio.registry.use-id"] = "contentId"
			worker[p+".apicurio.registry.headers.enabled"] = "false"
		}
	default:
		return nil, fmt.Errorf("debezium: unknown converter %q", o.Converter)
	}
	for k, v := range o.Worker {
		worker[k] = v
	}
	host, dbPort := src.Host, src.Port
	if host == "" || strings.HasPrefix(host, "/") {
		host = "127.0.0.1"
	}
	conn := map[string]string{
		"name":                        d.Name,
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                   "1",
		"plugin.name":                 "pgoutput",
		"database.hostname":           host,
		"database.port":               strconv.Itoa(int(dbPort)),
		"database.user":               src.User,
		"database.dbname":             src.Database,
		"topic.prefix":                o.TopicPrefix,
		"table.include.list":          strings.Join(o.Tables, ","),
		"slot.name":                   o.Slot,
		"publication.name":            o.Publication,
		"publication.autocreate.mode": "filtered",
		"snapshot.mode":               o.SnapshotMode,
		// The broker has auto.create.topics.enable=false: Connect creates the topics.
		"topic.creation.default.replication.factor": "1",
		"topic.creation.default.partitions":         strconv.Itoa(o.Partitions),
	}
	if src.Password != "" {
		conn["database.password"] = src.Password
	}
	if o.DecimalHandling != "" {
		conn["decimal.handling.mode"] = o.DecimalHandling
	}
	for k, v := range o.Connector {
		conn[k] = v
	}
	workerPath, connPath := filepath.Join(o.Dir, "worker.properties"), filepath.Join(o.Dir, "connector.properties")
	if err := writeProperties(workerPath, worker); err != nil {
		return nil, err
	}
	if err := writeProperties(connPath, conn); err != nil {
		return nil, err
	}

	if d.logFile, err = os.Create(d.Log); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(o.Java, "-Xmx"+o.Heap, "-Djava.awt.headless=true", "-Dlog4j2.configurationFile="+log4j,
		"-cp", filepath.Join(libs, "*"), "org.apache.kafka.connect.cli.ConnectStandalone", workerPath, connPath)
	d.cmd.Dir = o.Dir
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	t0 := time.Now()
	if err := d.cmd.Start(); err != nil {
		d.logFile.Close()
		return nil, fmt.Errorf("debezium: start %s: %v", o.Java, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		d.logFile.Close()
		close(d.done)
	}()
	if err := d.waitRunning(ctx); err != nil {
		if serr := d.Stop(); serr != nil {
			err = fmt.Errorf("%v; and stopping it: %v", err, serr)
		}
		return nil, err
	}
	d.StartedIn = time.Since(t0)
	return d, nil
}

func writeProperties(path string, m map[string]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := strings.ReplaceAll(m[k], `\`, `\\`)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// RunDebezium starts Debezium for a test (StartDebezium, at most StartTimeout) and stops it,
// dropping its slot, when the test ends. Register it after the source database's cleanup, so
// that it runs first. The worker's log is shown when the test failed; its folder is removed
// when the test passed, unless EOSINK_DEBEZIUM_KEEP is set.
func RunDebezium(t testing.TB, o DebeziumOptions) *Debezium {
	t.Helper()
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d, err := StartDebezium(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("%v", err)
		}
		if d.Killed() {
			t.Logf("debezium: Kafka Connect ignored SIGTERM for %s and was killed; see %s", d.opts.StopTimeout, d.Log)
		}
		if t.Failed() {
			t.Logf("---- last lines of %s ----\n%s", d.Log, d.LogTail(60))
		} else if d.tempDir && os.Getenv("EOSINK_DEBEZIUM_KEEP") == "" {
			_ = os.RemoveAll(d.Dir)
		}
	})
	return d
}

// SourceDatabase creates a database named <prefix>_<random> in the cluster of DATABASE_URL,
// to be captured by Debezium, and drops it (WITH FORCE) when the test ends. It returns the
// database's URL. The cluster of the test bed has wal_level=logical.
func SourceDatabase(t testing.TB, e Env, prefix string) (dbURL, name string) {
	t.Helper()
	name = pgName(fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, counter.Add(1)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := adminConn(t, ctx, e)
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatalf("SHOW wal_level: %v", err)
	}
	if level != "logical" {
		t.Fatalf("testbed: the PostgreSQL cluster at DATABASE_URL has wal_level=%s; a CDC source needs logical "+
			"(test/services/services.sh up turns it on, restarting a cluster made by an older version)", level)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn := adminConn(t, ctx, e)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, e.DatabaseURL, name), name
}

func adminConn(t testing.TB, ctx context.Context, e Env) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to DATABASE_URL: %v", err)
	}
	return c
}

// withDatabase returns the postgres:// URL dbURL naming database db instead.
func withDatabase(t testing.TB, dbURL, db string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testbed: DATABASE_URL must be a postgres:// URL to derive a source database's URL from it (got %q)", dbURL)
	}
	u.Path = "/" + db
	u.RawPath = ""
	return u.String()
}
