package sink

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrPanic matches every *PanicError.
var ErrPanic = errors.New("eosink: plugin panicked")

// PanicError is a panic in a Plugin's Write (its decoders included), recovered by the
// engine so that one record cannot kill the process (and the next instance the partition
// moves to). It is poison (it matches ErrPoison and ErrPanic): the batch is rolled back to
// where the Write began (its savepoint, or the whole transaction) and, under OnPoison
// DeadLetter, isolated like any poison, so that a record whose Write panics by itself is
// dead-lettered with the panic as its error and the rest of its batch commits; under
// OnPoison Stop the partition stops with a *HandlerError. The engine logs Stack once per
// batch, at ERROR ("plugin panicked"). A panic in a goroutine the plugin starts itself is
// not recovered.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack (debug.Stack)
}

func (e *PanicError) Error() string { return fmt.Sprintf("eosink: panic in plugin Write: %v", e.Value) }

// Is reports whether target is ErrPanic or ErrPoison.
func (e *PanicError) Is(target error) bool { return target == ErrPanic || target == ErrPoison }

// recovered turns a recovered panic value into a *PanicError.
func recovered(v any) error { return &PanicError{Value: v, Stack: debug.Stack()} }

// logPanic logs the stack of the first panic among errs at ERROR, once per batch (the
// isolation of its record meets the same panic again).
func (w *worker) logPanic(batch []Record, errs ...error) {
	for _, err := range errs {
		var pe *PanicError
		if !errors.As(err, &pe) || w.panicLogged == batch[0].Offset+1 {
			continue
		}
		w.panicLogged = batch[0].Offset + 1
		w.cfg.log.Error("plugin panicked", "topic", w.topic, "partition", w.partition,
			"first_offset", batch[0].Offset, "records", len(batch), "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		return
	}
}
