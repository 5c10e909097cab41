package failpoint

// The points the engine evaluates, in the order a batch passes them.
const (
	AfterFetch        = "after-fetch"         // batch collected, before BEGIN
	AfterOffsetUpdate = "after-offset-update" // conditional offset UPDATE done, before the handler
	InHandler         = "in-handler"          // handler returned, before COMMIT (its writes are in the open tx)
	AfterCommit       = "after-commit"        // COMMIT returned, before the in-memory position advances
	BeforeCommit      = "before-commit"       // just before COMMIT is sent (used to hold an open tx)
	MidWrite          = "mid-write"           // for handlers in this module: between two of their writes
)

// The points the rebalance callback evaluates, in an assign callback with partitions.
const (
	InAssign    = "in-assign"    // the rows' epochs read, before the claims
	AfterAssign = "after-assign" // claims made and partitions assigned in Kafka, before the callback returns
)

// The points the outbox relay (outbox/relay) evaluates, in the order a Kafka transaction passes them.
const (
	RelayAfterRead      = "relay-after-read"      // outbox rows read, before BeginTransaction
	RelayMidTransaction = "relay-mid-transaction" // events and position produced, before CommitTransaction
	RelayAfterCommit    = "relay-after-commit"    // CommitTransaction returned, before the status row and cleanup
)

// EnvVar is the environment variable a build with the failpoints tag loads at start.
const EnvVar = "EOSINK_FAILPOINTS"
