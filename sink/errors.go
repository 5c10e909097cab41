package sink

import (
	"errors"
	"fmt"

	"github.com/eosink/eosink/rebalance"
)

// Errors to match with errors.Is. The fencing and position errors are defined in package
// rebalance, which owns partition ownership; they are repeated here so that users of sink
// need not import it.
var (
	// ErrFenced: a batch's commit found that another claim owns the partition. Nothing of the
	// batch was written; the partition stops on this instance.
	ErrFenced = rebalance.ErrFenced
	// ErrOffsetOutOfRange: the stored next offset is outside the log. The partition stops.
	ErrOffsetOutOfRange = rebalance.ErrOffsetOutOfRange
	// ErrTopicRecreated: the topic was deleted and created again. The partition stops.
	ErrTopicRecreated = rebalance.ErrTopicRecreated
	// ErrNoStoredPosition: no row and InitialPosition is Error. The partition stops.
	ErrNoStoredPosition = rebalance.ErrNoStoredPosition

	// ErrKafkaAuthentication: at start, the broker refused the sink's credentials (SASL). Run
	// returns it at once, wrapped with librdkafka's reason, instead of retrying.
	ErrKafkaAuthentication = errors.New("eosink: Kafka authentication failed")
	// ErrKafkaTLS: at start, the TLS handshake with the broker failed: its certificate is not
	// signed by a trusted CA or names another host, or it refused the client certificate. Run
	// returns it at once, wrapped with librdkafka's reason, instead of retrying.
	ErrKafkaTLS = errors.New("eosink: TLS handshake with Kafka failed")

	// ErrSourceRewound: a change event's source position is below what its partition already
	// applied while the source's commit time moved forward: the source database went back in
	// time (a failover to a standby that lagged, a restore from a backup), so positions of
	// the old timeline would refuse its changes. Plugins that keep source positions (cdc)
	// return errors that match it; the partition stops with reason source_rewound.
	ErrSourceRewound = errors.New("eosink: the source went back in time")

	// ErrDecimalAmbiguous: a decimal value reads as two different numbers under the encodings
	// its producer may have used, and the configuration does not say which (the cdc plugin's
	// decimal_handling unset, JSON without schemas). Plugins return errors that match it
	// rather than guess; the partition stops with reason decimal_ambiguous, whatever the
	// poison policy says: every later record could be misread too.
	ErrDecimalAmbiguous = errors.New("eosink: a decimal value is ambiguous under the configured encoding")

	// ErrClosed is returned by Run when called on a Sink that has already run.
	ErrClosed = errors.New("eosink: sink already ran; create a new one")
	// ErrTxOwned is returned by the Tx given to a Handler when it tries to Commit or Roll back:
	// the framework owns the transaction.
	ErrTxOwned = errors.New("eosink: the transaction is owned by the framework; return an error to roll back")
	// ErrTxFinished: the handler ended the transaction behind the framework's back (for
	// example with Exec("COMMIT")). The batch is treated as failed.
	ErrTxFinished = errors.New("eosink: the handler ended the transaction")
)

// FencedError is the typed error behind ErrFenced.
type FencedError = rebalance.FencedError

// PartitionError says why a partition stopped; Err wraps the cause.
type PartitionError = rebalance.PartitionError

// ConfigError names a Config field and what is wrong with it. New returns it for bad input.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("eosink: config %s: %s", e.Field, e.Reason) }

// HandlerError is a non-retryable error returned by the Handler. The batch was rolled back,
// the stored offset did not move, and the partition stops on this instance.
type HandlerError struct {
	Topic       string
	Partition   int32
	FirstOffset int64
	LastOffset  int64
	Err         error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("eosink: handler failed on %s[%d] offsets %d..%d: %v", e.Topic, e.Partition, e.FirstOffset, e.LastOffset, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// ErrPoison matches every *PoisonError.
var ErrPoison = errors.New("eosink: poison record")

// PoisonError says that one record cannot be applied, whatever is retried: it does not
// decode, lacks a required field, or breaks a rule of the plugin. Plugins return it through
// Poison. Config.OnPoison decides what happens: stop the partition, or dead-letter the
// record and commit the rest of its batch.
type PoisonError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

// Poison returns a *PoisonError for r.
func Poison(r *Record, err error) error {
	return &PoisonError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}
}

func (e *PoisonError) Error() string {
	return fmt.Sprintf("eosink: poison record %s[%d]@%d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *PoisonError) Unwrap() error { return e.Err }

// Is reports whether target is ErrPoison.
func (e *PoisonError) Is(target error) bool { return target == ErrPoison }

// ErrTransient matches every error made by Transient.
var ErrTransient = errors.New("eosink: transient error")

// transientError is an error a plugin marks as worth retrying.
type transientError struct{ err error }

// Transient marks err, returned by a Plugin's Write, as transient: something the plugin
// depends on is unavailable for now (a Schema Registry that does not answer, say), and the
// same batch will succeed later. The framework then rolls the batch back and retries it with
// backoff, like a lost database connection: nothing is skipped or dead-lettered. The retry
// is logged ("batch failed, retrying", with the error) and counted in
// eosink_batch_retries_total and in eosink_batch_retries_by_cause_total{cause="transient"}.
// An error that is not marked, and is neither a transient PostgreSQL error nor poison,
// stops the partition. Transient(nil) is nil; the result matches ErrTransient and unwraps
// to err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

func (e *transientError) Error() string        { return e.err.Error() }
func (e *transientError) Unwrap() error        { return e.err }
func (e *transientError) Is(target error) bool { return target == ErrTransient }
