package sink

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/eosink/eosink/internal/kafkaconf"
	"github.com/eosink/eosink/rebalance"
)

// InitialPosition says where a partition starts when the pipeline has no stored row for it.
type InitialPosition = rebalance.InitialPosition

// The initial position policies. See package rebalance for their exact meaning.
const (
	Earliest       = rebalance.Earliest
	Latest         = rebalance.Latest
	ErrorPosition  = rebalance.Error
	KafkaCommitted = rebalance.KafkaCommitted
)

// The defaults New applies to unset (zero) fields of Config; WithDefaults applies them too.
const (
	DefaultSchema                   = "eosink"
	DefaultKafkaCommitInterval      = time.Second
	DefaultMaxBatchRecords          = 500
	DefaultMaxBatchBytes            = 4 << 20 // 4 MiB
	DefaultMaxBatchWait             = 100 * time.Millisecond
	DefaultMaxBufferedBytes         = 8 << 20  // 8 MiB
	DefaultMaxTotalBufferedBytes    = 32 << 20 // 32 MiB
	DefaultIsolationLevel           = pgx.ReadCommitted
	DefaultLockTimeout              = 5 * time.Second
	DefaultIdleInTransactionTimeout = 30 * time.Second
	DefaultClaimTimeout             = 60 * time.Second
	DefaultRetryBackoff             = 100 * time.Millisecond
	DefaultMaxRetryBackoff          = 5 * time.Second
	DefaultRevokeTimeout            = 30 * time.Second
	DefaultShutdownTimeout          = 30 * time.Second
	DefaultMaxDeadLetterRatio       = 0.2
	DefaultDeadLetterWindow         = 1000
)

// Config configures a Sink. Zero values take the documented defaults (WithDefaults). New
// validates it once (Validate) and names the field of any error.
type Config struct {
	// Brokers is Kafka's bootstrap.servers, for example "127.0.0.1:9092". Required unless
	// Kafka contains bootstrap.servers.
	Brokers string
	// GroupID is the Kafka consumer group. Required.
	GroupID string
	// Topics to consume: names, and regular expressions starting with ^ (librdkafka's
	// syntax), which subscribe to every topic they match, including topics created later;
	// for example "^cdc\\.public\\..*". New topics are found at librdkafka's metadata refresh,
	// every topic.metadata.refresh.interval.ms (5 minutes unless set in Kafka). Write
	// patterns that Go's regexp and librdkafka's POSIX extended expressions read alike
	// (no \d, \w or (?...) groups): the sink matches them itself to check routes at start.
	// With a TopicRouter plugin every topic needs a route (see TopicRouter). Required.
	Topics []string
	// Pipeline names this pipeline's rows in the offsets table. Two pipelines with different
	// names keep separate positions. Defaults to GroupID.
	Pipeline string

	// DatabaseURL is a PostgreSQL connection string. Required unless Pool is set. Unless it
	// sets application_name, the sessions are named rebalance.SessionName(Pipeline). A sink
	// holds at most pool_max_conns + 1 sessions, whatever the partition count: its pool
	// (pool_max_conns, a parameter of the URL; pgxpool's default is the larger of 4 and the
	// number of CPUs), which the partitions' transactions share, and one connection taken
	// out of it to LISTEN for operator resets.
	DatabaseURL string
	// Pool, when set, is used instead of DatabaseURL. The caller keeps ownership and should
	// set idle_in_transaction_session_timeout on its sessions itself.
	Pool *pgxpool.Pool
	// Schema holds the offsets table. Defaults to "eosink" (DefaultSchema).
	Schema string
	// AutoMigrate applies the framework's migrations on start. Defaults to false: run
	// `eosink migrate up` or Migrate instead.
	AutoMigrate bool

	// Handler applies each batch. Exactly one of Handler and Plugin is required.
	Handler Handler
	// Plugin applies each batch, with a lifecycle per partition (see Plugin). Exactly one
	// of Handler and Plugin is required.
	Plugin Plugin
	// OnPoison says what happens to a poison record (a *PoisonError from the plugin, or a
	// data error: SQLSTATE class 22 or 23, or 54000): StopOnPoison stops the partition with
	// the batch rolled back; DeadLetter isolates the bad records in savepoints, writes them
	// to the dead_letters table in the same transaction as the rest of the batch and the
	// offset, and goes on. Defaults to StopOnPoison.
	OnPoison PoisonPolicy
	// MaxDeadLetterRatio is the dead-letter circuit breaker, with OnPoison DeadLetter: a
	// batch that would make more than this share of the partition's last DeadLetterWindow
	// records dead letters is rolled back and the partition stops with a
	// *TooManyDeadLettersError (ErrTooManyDeadLetters), so that a schema change that makes
	// every record poison stops the stream instead of emptying it into the dead-letter table.
	// The count is against the whole window from the start: a stream of nothing but poison
	// stops after MaxDeadLetterRatio x DeadLetterWindow dead letters per partition. Between 0
	// and 1; 1 turns the breaker off. Defaults to 0.2 (DefaultMaxDeadLetterRatio).
	MaxDeadLetterRatio float64
	// DeadLetterWindow is how many of a partition's last records MaxDeadLetterRatio applies
	// to. A claim (a start, a restart, a rebalance) rebuilds the window from the partition's
	// dead_letters rows among its last DeadLetterWindow offsets below the stored offset, so
	// restarts do not reset it; only open dead letters count (not those replayed, discarded
	// or applied later). Defaults to 1000 (DefaultDeadLetterWindow).
	DeadLetterWindow int

	// RedactErrorValues keeps record data out of the error texts the sink writes: to
	// dead_letters.error, to the offsets row of a stopped partition (stopped_error), to its
	// logs and to its spans. PostgreSQL quotes records in its errors: the DETAIL of a unique
	// or check violation (Key (id)=(42) already exists., Failing row contains (...)) and
	// the message of a bad value (invalid input syntax for type integer: "x"). With
	// false, error texts are PostgreSQL's message with its DETAIL. With true, they keep the
	// SQLSTATE, the message with each quoted value replaced by "…", the schema, table,
	// column, type and constraint names and the record's topic, partition and offset, and
	// leave out DETAIL, HINT and context (see ErrorText). The record itself stays in the
	// dead_letters row's key and value. Errors returned by Run and PartitionErrors are the
	// errors themselves: format them with ErrorText. Defaults to false.
	RedactErrorValues bool

	// Kafka holds any further librdkafka properties (security.protocol, sasl.*, ssl.*,
	// session.timeout.ms, partition.assignment.strategy, group.protocol, ...). eosink sets
	// enable.auto.commit=false and auto.offset.reset=error itself and refuses other values
	// for them; isolation.level defaults to read_committed and may be overridden.
	Kafka kafka.ConfigMap
	// InitialPosition applies when a partition has no stored row. Defaults to Earliest.
	InitialPosition InitialPosition
	// CommitToKafka also commits each stored offset to Kafka after the database commit, in
	// the background, so that standard lag tools see progress. Positions never come from
	// that value; it is read back only to warn when it diverges from the stored one. Defaults to false.
	CommitToKafka bool
	// KafkaCommitInterval is how often those advisory commits are sent. Defaults to 1s
	// (DefaultKafkaCommitInterval).
	KafkaCommitInterval time.Duration

	// MaxBatchRecords caps the records in one transaction. Defaults to the plugin's
	// (BatchDefaulter: the cdc plugin's is 5000), else 500 (DefaultMaxBatchRecords).
	MaxBatchRecords int
	// MaxBatchBytes caps the key and value bytes in one transaction. At most
	// MaxBufferedBytes. Defaults to the plugin's (BatchDefaulter; at most MaxBufferedBytes),
	// else 4 MiB (DefaultMaxBatchBytes).
	MaxBatchBytes int
	// MaxBatchWait is how long a batch waits for more records after its first one.
	// Defaults to 100ms (DefaultMaxBatchWait).
	MaxBatchWait time.Duration
	// MaxBufferedBytes caps the memory of fetched but not yet committed records held per
	// partition (key, value, headers and about 160 bytes of bookkeeping each); past it the
	// partition is paused until half of it is free. At least MaxBatchBytes. The sum over
	// partitions is capped by MaxTotalBufferedBytes. Defaults to 8 MiB
	// (DefaultMaxBufferedBytes), or to twice the plugin's default MaxBatchBytes
	// (BatchDefaulter) when MaxBatchBytes is unset and that is more (the cdc plugin's: 16
	// MiB): room for a batch in flight and the next one, so that a partition fetches while
	// it commits instead of pausing at every batch.
	MaxBufferedBytes int
	// MaxTotalBufferedBytes caps the same memory summed over every partition of the sink.
	// At the cap the sink stops taking records from the consumer until commits bring the
	// total under it; librdkafka keeps what it prefetched, in its own bounded queue. Only
	// when the total stays at the cap for a second (a partition stuck in a slow handler
	// holding it) does a partition that receives a record pause once it holds its fair share
	// (MaxTotalBufferedBytes over the assigned partitions), until the total is under half of
	// the cap or its own buffer under half of its share (and under half of
	// MaxBufferedBytes), so that the others go on; the total then stays under about twice
	// the cap. Pausing is the fallback because librdkafka drops a paused partition's
	// prefetched records and may take up to a second to fetch again after a resume. So the
	// sink's records in memory stay bounded whatever the partition count: librdkafka's
	// prefetch queue (one queue for the whole consumer, queued.max.messages.kbytes: a quarter
	// of MaxTotalBufferedBytes unless set in Kafka; PrefetchKiB) plus twice
	// MaxTotalBufferedBytes at most. At least MaxBatchBytes. Defaults to 32 MiB
	// (DefaultMaxTotalBufferedBytes).
	MaxTotalBufferedBytes int

	// IsolationLevel of each batch's transaction. The fence is correct at any level; choose
	// pgx.Serializable when the handler's own reads need it (serialization failures are then
	// retried). Defaults to pgx.ReadCommitted (DefaultIsolationLevel).
	IsolationLevel pgx.TxIsoLevel

	// LockTimeout is lock_timeout for claims, so that a stalled previous owner's row lock
	// delays a new owner by at most this long per try. Defaults to 5s (DefaultLockTimeout).
	LockTimeout time.Duration
	// IdleInTransactionTimeout is idle_in_transaction_session_timeout on the sink's database
	// sessions: a paused zombie's open transaction is ended by the server after it. Not
	// applied to a caller-provided Pool. Defaults to 30s (DefaultIdleInTransactionTimeout).
	IdleInTransactionTimeout time.Duration
	// ClaimTimeout bounds how long a claim retries transient database errors before Run
	// gives up; also how long a re-claim after an operator reset retries before the
	// partition is reported (ErrReclaimFailed), and how long a COMMIT of unknown outcome is
	// read back before the partition stops (ErrCommitUnsettled). Defaults to 60s
	// (DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// RetryBackoff is the first wait before retrying a batch after a transient error; it
	// doubles up to MaxRetryBackoff. Defaults to 100ms (DefaultRetryBackoff).
	RetryBackoff time.Duration
	// MaxRetryBackoff is the longest wait between retries. At least RetryBackoff. Defaults
	// to 5s (DefaultMaxRetryBackoff).
	MaxRetryBackoff time.Duration
	// RevokeTimeout bounds how long a revoke waits for in-flight batches to commit before
	// aborting them. Defaults to 30s (DefaultRevokeTimeout).
	RevokeTimeout time.Duration
	// ShutdownTimeout bounds the drain when Run's context is cancelled. Defaults to 30s
	// (DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// UnhealthyOnStoppedPartition makes Healthy (and /healthz) fail while a partition is
	// stopped on this instance (eosink_partition_stopped is 1), so that an orchestrator
	// restarts it. Off by default: a restart does not fix deleted records or a recreated
	// topic, and the other partitions go on meanwhile.
	UnhealthyOnStoppedPartition bool

	// InstanceID is written as owner on every claim, for operators, and names the instance
	// an operator's reset fenced, so that only that instance claims the partition again. It
	// must be unique among running sinks. Defaults to "<hostname>-<pid>-<n>", n counting the
	// Sinks of the process (assigned by New, not by WithDefaults).
	InstanceID string
	// Registerer, when set, receives the sink's Prometheus metrics (all named eosink_*, with
	// a pipeline label): records and bytes applied, batch sizes, commit latency, retries by
	// cause, fenced and unknown commits, claims, rebalance events, pauses, buffer-cap waits,
	// dead letters, and per-partition lag and buffered bytes. Serve them with promhttp. Defaults to nil: no metrics.
	Registerer prometheus.Registerer

	// TracerProvider, when set, receives OpenTelemetry spans per batch: eosink.batch with
	// eosink.fetch, eosink.write and eosink.commit children (see trace.go). Defaults to nil:
	// no spans.
	TracerProvider trace.TracerProvider

	// Logger receives structured logs. It never receives secrets. Defaults to slog.Default().
	Logger *slog.Logger
}

// managedKafkaKeys are set by eosink and may not be overridden (kafkaconf.ManagedProperties).
var managedKafkaKeys = kafkaconf.ManagedProperties()

// WithDefaults returns c with its defaults in the fields left unset (zero): the Default*
// constants, Pipeline from GroupID and Logger from slog.Default(). It leaves InstanceID
// alone: New assigns one per Sink.
func (c Config) WithDefaults() Config {
	d := c
	if d.Pipeline == "" {
		d.Pipeline = d.GroupID
	}
	if d.Schema == "" {
		d.Schema = DefaultSchema
	}
	if d.IsolationLevel == "" {
		d.IsolationLevel = DefaultIsolationLevel
	}
	pluginBytes := false
	if bd, ok := d.Plugin.(BatchDefaulter); ok {
		records, bytes := bd.BatchDefaults()
		orDefault(&d.MaxBatchRecords, max(records, 0))
		pluginBytes = d.MaxBatchBytes == 0 && bytes > 0
		orDefault(&d.MaxBatchBytes, max(bytes, 0))
	}
	if pluginBytes && d.MaxBufferedBytes == 0 {
		// Room for the batch in flight and the next one: a partition whose buffer is no
		// larger than its batch pauses at every batch and fetches nothing while it commits.
		d.MaxBufferedBytes = max(DefaultMaxBufferedBytes, 2*d.MaxBatchBytes)
	}
	for p, def := range map[*int]int{
		&d.MaxBatchRecords: DefaultMaxBatchRecords, &d.MaxBatchBytes: DefaultMaxBatchBytes, &d.MaxBufferedBytes: DefaultMaxBufferedBytes,
		&d.MaxTotalBufferedBytes: DefaultMaxTotalBufferedBytes,
		&d.DeadLetterWindow:      DefaultDeadLetterWindow,
	} {
		orDefault(p, def)
	}
	for p, def := range map[*time.Duration]time.Duration{
		&d.MaxBatchWait: DefaultMaxBatchWait, &d.KafkaCommitInterval: DefaultKafkaCommitInterval, &d.LockTimeout: DefaultLockTimeout,
		&d.IdleInTransactionTimeout: DefaultIdleInTransactionTimeout, &d.ClaimTimeout: DefaultClaimTimeout,
		&d.RetryBackoff: DefaultRetryBackoff, &d.MaxRetryBackoff: DefaultMaxRetryBackoff,
		&d.RevokeTimeout: DefaultRevokeTimeout, &d.ShutdownTimeout: DefaultShutdownTimeout,
	} {
		orDefault(p, def)
	}
	if pluginBytes && d.MaxBatchBytes > d.MaxBufferedBytes {
		d.MaxBatchBytes = d.MaxBufferedBytes // a plugin's default never breaks the configured buffer's bound
	}
	if d.MaxDeadLetterRatio == 0 {
		d.MaxDeadLetterRatio = DefaultMaxDeadLetterRatio
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

func orDefault[T int | time.Duration](p *T, def T) {
	if *p == 0 {
		*p = def
	}
}

// PrefetchKiB is the queued.max.messages.kbytes the sink gives librdkafka unless Config.Kafka
// sets it: a quarter of MaxTotalBufferedBytes, in KiB, at least 1 MiB (8 MiB at the default
// 32 MiB). The queue's bound counts the records' bytes; librdkafka holds several times that
// for small records (each message's own bookkeeping, and the fetch responses they point
// into): at 16 MiB with 150-byte records on 256 partitions its heap reached about 97 MiB, the
// largest part of eosink run's 290 MiB peak (docs/benchmarks.md, issue 26).
func PrefetchKiB(maxTotalBufferedBytes int) int {
	return max(1024, maxTotalBufferedBytes/4/1024)
}

// kafkaConfig builds the librdkafka configuration.
func (c *Config) kafkaConfig() kafka.ConfigMap {
	m := kafka.ConfigMap{
		"isolation.level":        "read_committed",
		"enable.partition.eof":   true, // the end of a partition moves its position past trailing markers (poller_ranges.go)
		"go.logs.channel.enable": false,
		// librdkafka's prefetch queue: with the high-level consumer one queue for the whole
		// consumer, whatever the partition count (librdkafka's CONFIGURATION.md); the records
		// the sink holds past it are bounded by MaxTotalBufferedBytes. Sized from that bound
		// (PrefetchKiB), with fetch.queue.backoff.ms short (below): a larger queue delivers
		// small records no faster and costs memory; with librdkafka's default backoff, a small
		// queue starves the sink of small records.
		"queued.max.messages.kbytes": PrefetchKiB(c.MaxTotalBufferedBytes),
		// librdkafka waits this long before fetching again for a partition whose queue is over
		// its thresholds: its default of 1s leaves the consumer idle between bursts, and 0
		// makes its broker thread spin while the sink holds off at MaxTotalBufferedBytes
		// (capgate.go). The thresholds still bound memory.
		"fetch.queue.backoff.ms": 10,
	}
	for k, v := range c.Kafka {
		m[k] = v
	}
	if c.Brokers != "" {
		m["bootstrap.servers"] = c.Brokers
	}
	m["group.id"] = c.GroupID
	for k, v := range managedKafkaKeys {
		m[k] = v
	}
	if _, ok := m["client.id"]; !ok {
		m["client.id"] = "eosink-" + c.InstanceID
	}
	if _, ok := m["fetch.max.bytes"]; !ok {
		if n, ok := fetchMaxBytes(m); ok {
			m["fetch.max.bytes"] = n
		}
	}
	return m
}

// fetchMaxBytes is the fetch.max.bytes the sink gives librdkafka unless Config.Kafka sets
// it: twice the prefetch queue (16 MiB at the defaults), at most receive.message.max.bytes
// less 512. ok is false when that is under message.max.bytes (librdkafka refuses a
// fetch.max.bytes below it; a prefetch queue under half a megabyte, say): librdkafka's own
// default then stands. Left unset, librdkafka caps a fetch response at the prefetch queue
// (8 MiB), and the broker fills a response with the partitions in the order the request
// lists them: at 1 MiB a partition (max.partition.fetch.bytes), eight partitions took every
// response of a 12-partition backlog and the other four waited until they were done, so an
// initial load ended on four partitions at half its rate (docs/benchmarks.md, issue 26).
func fetchMaxBytes(m kafka.ConfigMap) (int, bool) {
	n := 2 * 1024 * configInt(m["queued.max.messages.kbytes"], 0) // kafkaConfig always sets it
	if r := configInt(m["receive.message.max.bytes"], 0); r > 0 {
		n = min(n, r-512)
	}
	return n, n >= configInt(m["message.max.bytes"], 1000000) // librdkafka's default
}

// configInt reads a librdkafka property set as a number or its text; def when it is
// neither (librdkafka then reports the value).
func configInt(v kafka.ConfigValue, def int) int {
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n
		}
	}
	return def
}
