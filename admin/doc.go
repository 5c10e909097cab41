// Package admin is the operator API of eosink, for Go programs: it reads the positions a
// sink has stored and their lag, moves those positions while sinks run, and lists, replays
// and discards dead letters. The eosink command's offsets, lag, status and dlq commands are
// built on it, as kadm is built on kgo in franz-go.
//
// A sink keeps its positions in PostgreSQL, in the offsets table of its schema (see package
// sink), not in Kafka. Kafka's own tools therefore cannot move them, and show a lag that is
// only advisory; this package works on the table itself.
//
// # Connecting
//
// New takes a pgx pool, the schema of the eosink tables ("eosink" unless sink.Config.Schema
// says otherwise) and the librdkafka configuration for reading the brokers:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil {
//		return err
//	}
//	defer pool.Close()
//	c := admin.New(pool, "eosink", kafka.ConfigMap{"bootstrap.servers": "localhost:9092"})
//
//	positions, err := c.List(ctx, "orders") // one pipeline; "" for all
//	if err != nil {
//		return err
//	}
//	for _, p := range positions {
//		fmt.Printf("%s[%d] next %d, lag %d\n", p.Topic, p.Partition, p.NextOffset, p.Lag)
//	}
//
//	// Replay partition 3 of orders from the first record of 06:00, while the sinks run.
//	changes, err := c.Reset(ctx,
//		admin.Selector{Pipeline: "orders", Topic: "orders", Partition: new(int32(3))},
//		admin.Time(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)),
//		"alice", "replay after bug 123", 5)
//
// The Client opens Kafka clients for the duration of a call only; it never joins the
// pipeline's consumer group and never commits offsets to Kafka.
//
// # Positions and lag
//
// List returns one Position per stored row, with the partition's log start and end. The log
// end is the last stable offset, as a read_committed consumer sees it, and Lag counts the
// committed records between the stored next offset and that end: a partition whose remaining
// offsets hold only transaction markers or aborted records has no lag. Position.Diverged
// tells when the consumer group's committed offset in Kafka, which a sink writes only as
// advice (sink.Config.CommitToKafka), differs from the stored position. LagSeconds is the
// age of the first committed record at the stored position, from its Kafka timestamp
// (lagtime.go). Unowned is set on a partition that no running sink instance holds, with
// why and what to do (unowned.go): its owner was killed and the group waits for its session
// to time out, or no instance runs; SetGroupSettings tells List the groups' session timeout
// and whether they use static membership.
//
// # Moving positions
//
// Plan computes the moves for a Selector (a pipeline, one of its topics, or one partition)
// and a Target (Earliest, Latest, Offset, Time, or ParseTarget's text) without writing
// anything, and refuses a target outside a partition's log. Apply makes planned moves in one
// transaction: it locks each row, bumps its epoch, which fences the owner's next commit,
// has the offsets table's trigger (migration 7) write one row per move to the offsets_audit
// table with the operator and the reason (and, recorded by the server, the session's
// database role and client address), and
// notifies the running sinks, which claim the partition again at its new position without a
// restart. A row that a sink created after Plan is moved like any other. Reset is Plan then
// Apply, planning again on ErrMoved (a planned row was deleted, or a sink created one while
// Apply was creating it).
//
// MoveAudit returns the rows of offsets_audit, newest first: who declared each move (operator,
// reason), what changed (offsets, epochs) and what the server recorded (role, address,
// time). Plan, Apply and Reset return an *InputError, naming the argument, for a request
// that cannot be done as asked (a missing reason, a topic or partition that does not exist,
// a target outside the log); ShowDeadLetter an error matching ErrNotFound.
//
// # Dead letters
//
// A sink whose poison policy is sink.DeadLetter writes each record it refuses to the
// dead_letters table, one row per record coordinates, open until it is resolved (replayed,
// discarded, or applied by a later batch of the sink). DeadLetters lists the open ones (and
// with DeadLetterFilter.Resolved the others) and CountDeadLetters counts the open ones per
// pipeline; ShowDeadLetter returns one with its record and its edit. EditDeadLetter stores a
// corrected key or value beside the original. Replay (ReplayWith) sends open ones through a
// plugin again, their edited key and value when edited, each in the transaction that
// resolves its dead letter, so a record is applied at most once however many replays run at
// the same time; ReplayHandler does the same through the Handler of a pipeline written in
// Go, which `eosink dlq replay` cannot build. DiscardDeadLetters resolves them as discarded.
// Edits, replays and discards are audited (DeadLetterAudit).
//
// docs/operations.md describes the same operations from the command line, docs/console.md
// as the JSON API of `eosink console` (package internal/console).
package admin
