package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrorBody is every error response: what went wrong and, for bad input, the field (a path
// or query parameter, a body field, a header) it is about.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// apiError is an error with its status and field, returned by the handlers' helpers.
type apiError struct {
	status int
	field  string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

// writeJSON writes v with status. The encoder escapes <, > and & (\u003c ...), so that no
// response can be read as HTML; the content type is application/json in any case.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// fail writes the error response for err: an *apiError's own, else 500 (the detail goes to
// the log, never to the client).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeJSON(w, ae.status, ErrorBody{Error: ae.msg, Field: ae.field})
		return
	}
	h.log.Error("console: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "internal error (the database or the brokers failed); see the console's log"})
}

// query checks that q holds only the known parameters, each once, as text PostgreSQL can
// hold (checkText).
func query(q url.Values, known ...string) error {
	for k, v := range q {
		if !slices.Contains(known, k) {
			return badRequest(k, "unknown query parameter %q (this path takes %s)", k, orNone(known))
		}
		if len(v) > 1 {
			return badRequest(k, "query parameter %q given %d times", k, len(v))
		}
		if err := checkText(k, v[0]); err != nil {
			return err
		}
	}
	return nil
}

// checkText refuses a value that no name or PostgreSQL text can hold: invalid UTF-8 or a
// NUL byte (the database would refuse it with an error that is not the client's to read).
func checkText(field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return badRequest(field, "%s is not valid UTF-8", field)
	case strings.ContainsRune(s, 0):
		return badRequest(field, "%s holds a NUL byte", field)
	}
	return nil
}

// pipelineParam is the path parameter pipeline, checked with checkText.
func pipelineParam(r *http.Request) (string, error) {
	p := r.PathValue("pipeline")
	return p, checkText("pipeline", p)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// intParam reads the integer query parameter name, between lo and hi; def when absent.
func intParam(q url.Values, name string, lo, hi, def int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name, "%s: %q is not a whole number from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

// idParam reads the path parameter id, a dead letter's id.
func idParam(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("id", "id: %q is not a dead letter id (a whole number from 1 to %d)", s, int64(math.MaxInt64))
	}
	return id, nil
}

// maxBody bounds a request's body.
const maxBody = 64 << 10

// decodeBody decodes r's JSON body into v, refusing unknown fields, a second value, a body
// over maxBody and a content type other than application/json. An empty body is allowed
// when allowEmpty (v keeps its zero value).
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &apiError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("the body is over %d bytes", maxBody)}
	}
	if err != nil {
		return badRequest("body", "cannot read the body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			return nil
		}
		return badRequest("body", "a JSON object is required")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &apiError{status: http.StatusUnsupportedMediaType, field: "Content-Type", msg: "the body must be application/json"}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("body", "the body holds more than one JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a 400 naming the field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return badRequest(field, "%s: must be %s, not a JSON %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return badRequest("body", "the body is not valid JSON: %v", err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return badRequest(name, "unknown field %q", name)
	}
	return badRequest("body", "the body is not valid JSON: %v", err)
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"):
		return "a whole number"
	case k == "bool":
		return "true or false"
	case k == "string":
		return "a string"
	case k == "struct":
		return "an object"
	}
	return "a " + k
}
