package admin

import "errors"

// ErrNotFound is what errors.Is finds in the error of a call whose subject does not exist:
// ShowDeadLetter's dead letter.
var ErrNotFound = errors.New("not found")

// notFound is an error that says what is missing and matches ErrNotFound.
type notFound struct{ msg string }

func (e *notFound) Error() string        { return e.msg }
func (e *notFound) Is(target error) bool { return target == ErrNotFound }

// InputError is a request that cannot be done as asked, whatever the state of the database
// and the cluster lets it: a required argument is missing, the topic or partition does not
// exist, or the target is outside the log (Plan, Apply, Reset). Field names the argument: a
// Selector's pipeline, topic or partition, to (the Target), operator or reason.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }
