package offsets

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ResetOwnerPrefix starts the owner written by an operator who moved a position
// (`eosink offsets set`): "reset by OPERATOR (was INSTANCE)", where INSTANCE is the owner
// the change fenced. That change bumps the epoch; the sink whose InstanceID is INSTANCE,
// and only that one, claims the partition again at the new position.
const ResetOwnerPrefix = "reset by "

// ResetOwner returns the owner an operator's change writes over current.
func ResetOwner(operator, current string) string {
	if was, ok := ResetFrom(current); ok {
		current = was // several changes in a row still name the instance that owned it
	}
	return ResetOwnerPrefix + operator + " (was " + current + ")"
}

// ResetFrom returns the instance an operator's change fenced, if owner was written by one.
func ResetFrom(owner string) (instance string, ok bool) {
	if !strings.HasPrefix(owner, ResetOwnerPrefix) || !strings.HasSuffix(owner, ")") {
		return "", false
	}
	i := strings.LastIndex(owner, " (was ")
	if i < 0 {
		return "", false
	}
	return owner[i+len(" (was ") : len(owner)-1], true
}

// NotifyChannel is the PostgreSQL channel told of every operator change to a position, with
// the pipeline as payload, so that idle sinks notice it without a commit.
const NotifyChannel = "eosink_offsets"

// Listen makes conn receive the notices of NotifyChannel (pgx.Conn.WaitForNotification).
func Listen(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize())
	return err
}

// Notify tells NotifyChannel's listeners, when tx commits, that positions of pipeline moved.
func Notify(ctx context.Context, tx pgx.Tx, pipeline string) error {
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", NotifyChannel, pipeline)
	return err
}
