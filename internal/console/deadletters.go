package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/opsview"
)

// Paging of dead-letter lists: limit's default and largest value.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// DeadLetterPage is GET /api/v1/pipelines/{pipeline}/dead-letters: dead letters in id order,
// each as `eosink dlq list -json` writes it, and the after_id of the next page (null on the
// last).
type DeadLetterPage struct {
	DeadLetters []admin.DeadLetter `json:"dead_letters"`
	NextAfterID *int64             `json:"next_after_id"`
}

// DiscardResult is POST /api/v1/dead-letters/{id}/discard.
type DiscardResult struct {
	Discarded int64  `json:"discarded"`
	Operator  string `json:"operator"`
}

// ReplayResponse is POST /api/v1/dead-letters/{id}/replay: what `eosink dlq replay -json`
// writes, with the operator.
type ReplayResponse struct {
	admin.ReplayResult
	Operator string `json:"operator"`
}

// deadLetters: GET /api/v1/pipelines/{pipeline}/dead-letters?topic=&partition=&limit=&after_id=.
func (h *handler) deadLetters(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := query(q, "topic", "partition", "limit", "after_id"); err != nil {
		return err
	}
	pipeline, err := pipelineParam(r)
	if err != nil {
		return err
	}
	f := admin.DeadLetterFilter{Pipeline: pipeline, Topic: q.Get("topic")}
	if q.Has("partition") {
		p, err := intParam(q, "partition", 0, math.MaxInt32, 0)
		if err != nil {
			return err
		}
		p32 := int32(p)
		f.Partition = &p32
	}
	limit, err := intParam(q, "limit", 1, MaxLimit, DefaultLimit)
	if err != nil {
		return err
	}
	if f.AfterID, err = intParam(q, "after_id", 0, math.MaxInt64, 0); err != nil {
		return err
	}
	f.Limit = int(limit) + 1 // one more: is there a next page?
	list, err := h.cfg.Admin.DeadLetters(r.Context(), f)
	if err != nil {
		return err
	}
	page := DeadLetterPage{DeadLetters: list}
	if len(list) > int(limit) {
		page.DeadLetters = list[:limit]
		next := page.DeadLetters[limit-1].ID
		page.NextAfterID = &next
	}
	if page.DeadLetters == nil {
		page.DeadLetters = []admin.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// find reads the dead letter of the path's id, 404 when there is none.
func (h *handler) find(r *http.Request) (admin.DeadLetter, error) {
	id, err := idParam(r)
	if err != nil {
		return admin.DeadLetter{}, err
	}
	d, err := h.cfg.Admin.ShowDeadLetter(r.Context(), id)
	if errors.Is(err, admin.ErrNotFound) {
		return d, &apiError{status: http.StatusNotFound, field: "id", msg: err.Error()}
	}
	return d, err
}

// deadLetter: GET /api/v1/dead-letters/{id}, with its record (opsview.DeadLetter).
func (h *handler) deadLetter(w http.ResponseWriter, r *http.Request) error {
	if err := query(r.URL.Query()); err != nil {
		return err
	}
	d, err := h.find(r)
	if err != nil {
		return err
	}
	audit, err := h.cfg.Admin.DeadLetterAudit(r.Context(), d.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, opsview.DeadLetterOf(d, audit))
	return nil
}

// mustBeOpen refuses a mutation of a resolved dead letter (409): it was applied, replayed or
// discarded already.
func mustBeOpen(d admin.DeadLetter) error {
	if d.State != admin.StateOpen {
		return &apiError{status: http.StatusConflict, field: "id", msg: fmt.Sprintf("dead letter %d is resolved already (%s by %s)", d.ID, d.State, quote(d.ResolvedBy))}
	}
	return nil
}

// openDeadLetter reads a mutation's request (no query, an optional ActionRequest) and its
// dead letter, which must be open.
func (h *handler) openDeadLetter(w http.ResponseWriter, r *http.Request) (admin.DeadLetter, ActionRequest, error) {
	var req ActionRequest
	if err := query(r.URL.Query()); err != nil {
		return admin.DeadLetter{}, req, err
	}
	if err := decodeBody(w, r, &req, true); err != nil {
		return admin.DeadLetter{}, req, err
	}
	d, err := h.find(r)
	if err != nil {
		return d, req, err
	}
	return d, req, mustBeOpen(d)
}

// ActionRequest is the optional body of a replay or a discard: the reason that goes to the
// dead letters' audit with the token's operator.
type ActionRequest struct {
	Reason string `json:"reason"`
}

// replay: POST /api/v1/dead-letters/{id}/replay, through the console's pipeline's plugin as
// `eosink dlq replay -config` does: the dead letter is resolved (replayed, audited with the
// operator) in the write's transaction; an edited value is the one applied. 409 for a dead
// letter of another pipeline, or without a plugin.
func (h *handler) replay(w http.ResponseWriter, r *http.Request) error {
	d, req, err := h.openDeadLetter(w, r)
	if err != nil {
		return err
	}
	if h.cfg.Plugin == nil || d.Pipeline != h.cfg.Pipeline {
		return &apiError{status: http.StatusConflict, field: "id", msg: fmt.Sprintf("dead letter %d is pipeline %s's; this console replays through the sink of its config file's pipeline (%s) only",
			d.ID, quote(d.Pipeline), quote(h.cfg.Pipeline))}
	}
	op := operatorOf(r.Context())
	h.replayMu.Lock()
	res, err := h.cfg.Admin.ReplayWith(r.Context(), admin.DeadLetterFilter{Pipeline: d.Pipeline, IDs: []int64{d.ID}}, h.cfg.Plugin,
		admin.ReplayOptions{Action: admin.Action{Operator: op, Reason: req.Reason}})
	h.replayMu.Unlock()
	h.log.Info("console: mutation", "operator", op, "action", "dead-letter replay", "id", d.ID, "pipeline", d.Pipeline,
		"replayed", res.Replayed, "failed_again", res.FailedAgain, "gone", res.Gone, "ok", err == nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReplayResponse{ReplayResult: res, Operator: op})
	return nil
}

// discard: POST /api/v1/dead-letters/{id}/discard: resolved as discarded (the row stays),
// audited with the operator.
func (h *handler) discard(w http.ResponseWriter, r *http.Request) error {
	d, req, err := h.openDeadLetter(w, r)
	if err != nil {
		return err
	}
	op := operatorOf(r.Context())
	n, err := h.cfg.Admin.DiscardDeadLetters(r.Context(), admin.DeadLetterFilter{Pipeline: d.Pipeline, IDs: []int64{d.ID}}, admin.Action{Operator: op, Reason: req.Reason})
	h.log.Info("console: mutation", "operator", op, "action", "dead-letter discard", "id", d.ID, "pipeline", d.Pipeline, "discarded", n, "ok", err == nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DiscardResult{Discarded: n, Operator: op})
	return nil
}

func quote(s string) string { return strconv.Quote(s) }
