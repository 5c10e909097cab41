package schemaformat

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors a Decoder returns. Test them with errors.Is and errors.As.
//
// ErrMalformed, ErrUnknownSchema and ErrBadSchema are about the record itself: retrying
// cannot help, so the caller treats the record as poison (dead-letters it). A
// *RegistryError is about the registry: when Temporary it reports true the caller waits
// and retries the same record; otherwise the configuration is wrong (bad credentials, a URL
// that is not a registry) and the caller stops.
var (
	// ErrMalformed: the bytes are not in the Confluent wire format (no magic byte 0, shorter
	// than the 5-byte header, a bad Protobuf message-index array) or the body does not
	// decode with its schema.
	ErrMalformed = errors.New("schemaformat: malformed record")
	// ErrUnknownSchema: the registry answered that the schema id does not exist (HTTP 404
	// with error code 40403).
	ErrUnknownSchema = errors.New("schemaformat: unknown schema id")
	// ErrBadSchema: the schema exists but cannot be used for this format: it is of another
	// type (an Avro record read as Protobuf) or does not parse.
	ErrBadSchema = errors.New("schemaformat: unusable schema")
	// ErrRegistryUnavailable: the registry could not be reached or answered 5xx, 408 or
	// 429, or the request timed out. Every *RegistryError whose Temporary method reports
	// true matches it with errors.Is.
	ErrRegistryUnavailable = errors.New("schemaformat: schema registry unavailable")
)

// IsPoison reports whether err is about the record rather than the registry: the record
// will never decode, whatever the number of retries.
func IsPoison(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrBadSchema)
}

// RegistryError is a failure to fetch a schema from the registry, other than the schema
// not existing.
type RegistryError struct {
	SchemaID int
	// Status is the HTTP status of the registry's answer, 0 when there was none
	// (connection refused, timeout, TLS failure).
	Status int
	// Code is the registry's error code (such as 50001), 0 when there was none.
	Code int
	Err  error
}

func (e *RegistryError) Error() string {
	s := "schemaformat: schema registry: fetching schema " + strconv.Itoa(e.SchemaID)
	if e.Status != 0 {
		s += ": HTTP " + strconv.Itoa(e.Status)
	}
	if e.Code != 0 {
		s += " (error code " + strconv.Itoa(e.Code) + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Temporary reports whether retrying later may succeed: no answer at all, or an answer
// with status 5xx, 408 or 429.
func (e *RegistryError) Temporary() bool {
	return e.Status == 0 || e.Status >= 500 || e.Status == 408 || e.Status == 429
}

func (e *RegistryError) Unwrap() error { return e.Err }

// Is makes a temporary RegistryError match ErrRegistryUnavailable.
func (e *RegistryError) Is(target error) bool {
	return target == ErrRegistryUnavailable && e.Temporary()
}

// malformed returns an error matching ErrMalformed with a reason.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// badSchema returns an error matching ErrBadSchema for schema id.
func badSchema(id int, format string, args ...any) error {
	return fmt.Errorf("%w %d: %s", ErrBadSchema, id, fmt.Sprintf(format, args...))
}

// fieldError is a decoding error inside a record's field; path is the field's, dotted
// from the outermost record (after.amount).
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return "field " + e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// inField returns err, raised while decoding field name, with the field in its path.
func inField(name string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		return &fieldError{path: name + "." + fe.path, err: fe.err}
	}
	return &fieldError{path: name, err: err}
}
