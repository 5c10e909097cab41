package sink

import (
	"errors"
	"fmt"
	"testing"
)

func TestTransient(t *testing.T) {
	if Transient(nil) != nil {
		t.Error("Transient(nil) is not nil")
	}
	cause := errors.New("registry down")
	err := fmt.Errorf("decode: %w", Transient(cause))
	if !errors.Is(err, ErrTransient) || !errors.Is(err, cause) || err.Error() != "decode: registry down" {
		t.Errorf("Transient: %v", err)
	}
	if !isRetryable(err) {
		t.Error("a Transient error is not retried")
	}
	if isRetryable(cause) {
		t.Error("an unmarked plugin error is retried")
	}
	if isRetryable(&HandlerError{Err: err}) {
		t.Error("a HandlerError is retried")
	}
	if IsPoison(err) {
		t.Error("a Transient error is poison")
	}
}
