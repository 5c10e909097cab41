package sink

import "time"

// The engine's fixed tunables: timings that are not settings (Config has the settings and
// their defaults). Each says what it bounds; none changes what is committed.

// The poll loop (poller.go, capgate.go).
const (
	// pollTimeoutMs is Poll's timeout while no partition is paused.
	pollTimeoutMs = 100
	// pausedPollMs is Poll's timeout while any partition is paused: how soon a partition whose
	// buffer has drained fetches again. Paused partitions resume from the poll loop
	// (resumeDrained), after Poll returns; with every partition paused no record ends a Poll
	// early, so a drained partition would otherwise sit idle for the whole pollTimeoutMs.
	pausedPollMs = 5
	// capGrace is how long the poll loop holds off at MaxTotalBufferedBytes before it falls
	// back to pausing partitions on their fair share: longer than a batch takes to form and
	// commit, so that only a partition stuck in a slow handler, holding the total, makes it
	// pause.
	capGrace = time.Second
	// capWait is how long the poll loop sleeps between checks while it holds off.
	capWait = 2 * time.Millisecond
)

// Stopping workers (poller_assign.go, poller_reset.go).

// stopGrace is how long a worker aborted after its timeout still gets before it is left
// behind (its later commits are fenced). A variable for tests.
var stopGrace = 5 * time.Second

// Checks while running (poller_ranges.go, kafka_commit.go, poller_contest.go, poller_reset.go).

// rangeCheckInterval is how often running partitions are checked against the log. A
// variable for tests.
var rangeCheckInterval = 5 * time.Second

const (
	// brokerQueryTimeout bounds each broker query of the checks: watermarks and topic ids
	// (range checks), the group's committed offsets (divergence check).
	brokerQueryTimeout = 5 * time.Second
	// divergenceCheckEvery is how often the group's committed offsets in Kafka are read back
	// and compared with what was sent (CommitToKafka).
	divergenceCheckEvery = 30 * time.Second
	// defaultSessionTimeoutMs is librdkafka's default session.timeout.ms, and the broker's
	// default for group.protocol=consumer: a contested partition's grace period when the
	// Kafka properties do not set one.
	defaultSessionTimeoutMs = 45000
	// contestLookDelay is how long after a contest's grace period its partition's row is
	// read again, so that the look comes after the period has passed.
	contestLookDelay = 100 * time.Millisecond
	// recheckQueueLen is how many single-partition recheck requests wait for the poll
	// goroutine; past it, every partition is looked at.
	recheckQueueLen = 256
)

// The persistence goroutine (stops.go, heartbeat.go).

// heartbeatInterval is how often the sink writes its heartbeat and retries pending writes of
// stop states. A variable for tests.
var heartbeatInterval = 3 * time.Second

// dbCallTimeout bounds each of the engine's own short statements outside a batch: a stop
// state, the heartbeat, the epoch check, a rollback.
const dbCallTimeout = 5 * time.Second
