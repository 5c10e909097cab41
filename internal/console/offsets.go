package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/admin"
)

// MoveRequest is the body of POST /api/v1/pipelines/{pipeline}/offsets, the flags of
// `eosink offsets set`: which partitions (topic, partition; none: every stored one of the
// pipeline), where to (earliest, latest, an offset, an RFC 3339 time), why, and whether to
// plan only.
type MoveRequest struct {
	Topic          string          `json:"topic"`
	Partition      *int32          `json:"partition"`
	To             json.RawMessage `json:"to"` // a string, or an offset as a number
	Reason         string          `json:"reason"`
	DryRun         bool            `json:"dry_run"`
	AcceptNewTopic bool            `json:"accept_new_topic"`
}

// MoveResult is its response: the changes planned (dry run) or made, as `eosink offsets set
// -json` writes them, and the operator they are audited with.
type MoveResult struct {
	DryRun   bool           `json:"dry_run"`
	Operator string         `json:"operator"`
	Changes  []admin.Change `json:"changes"`
}

// moveOffsets: POST /api/v1/pipelines/{pipeline}/offsets. It checks what `eosink offsets
// set` checks, dry run or not, then plans (dry run) or plans and applies in one audited
// transaction with the token's operator as the audit's operator.
func (h *handler) moveOffsets(w http.ResponseWriter, r *http.Request) error {
	if err := query(r.URL.Query()); err != nil {
		return err
	}
	var req MoveRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	pipeline, err := pipelineParam(r)
	if err != nil {
		return err
	}
	sel, target, err := req.check(pipeline)
	if err != nil {
		return err
	}
	op := operatorOf(r.Context())
	var changes []admin.Change
	if req.DryRun {
		changes, err = h.cfg.Admin.Plan(r.Context(), sel, target)
	} else {
		changes, err = h.cfg.Admin.Reset(r.Context(), sel, target, op, req.Reason, 5)
		h.log.Info("console: mutation", "operator", op, "action", "offsets set", "pipeline", sel.Pipeline, "topic", sel.Topic,
			"to", string(req.To), "reason", req.Reason, "changes", len(changes), "ok", err == nil)
	}
	if err != nil {
		return moveError(err)
	}
	if changes == nil {
		changes = []admin.Change{}
	}
	writeJSON(w, http.StatusOK, MoveResult{DryRun: req.DryRun, Operator: op, Changes: changes})
	return nil
}

// check validates the request before anything connects, as checkSet does for the command.
func (req *MoveRequest) check(pipeline string) (admin.Selector, admin.Target, error) {
	sel := admin.Selector{Pipeline: pipeline, Topic: req.Topic, Partition: req.Partition, AcceptNewTopic: req.AcceptNewTopic}
	raw := bytes.TrimSpace(req.To)
	if len(raw) == 0 || string(raw) == "null" {
		return sel, admin.Target{}, badRequest("to", "to is required: earliest, latest, an offset, or an RFC 3339 time")
	}
	text := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return sel, admin.Target{}, badRequest("to", "to: %v", err)
		}
	}
	target, err := admin.ParseTarget(text)
	if err != nil {
		return sel, admin.Target{}, badRequest("to", "to: %v", err)
	}
	for _, f := range [][2]string{{"topic", req.Topic}, {"reason", req.Reason}} {
		if err := checkText(f[0], f[1]); err != nil {
			return sel, target, err
		}
	}
	switch {
	case strings.TrimSpace(req.Reason) == "":
		return sel, target, badRequest("reason", "reason is required (it goes to the audit table)")
	case req.Partition != nil && *req.Partition < 0:
		return sel, target, badRequest("partition", "partition: %d is not a partition number (0 to 2147483647)", *req.Partition)
	case req.Partition != nil && req.Topic == "":
		return sel, target, badRequest("partition", "partition needs topic")
	}
	return sel, target, nil
}

// moveError maps Plan's and Reset's errors: bad input (admin.InputError) is 400 with its
// field, a position that kept moving (admin.ErrMoved) or a row locked past the lock timeout
// 409.
func moveError(err error) error {
	var ie *admin.InputError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ie):
		return badRequest(ie.Field, "%s", ie.Msg)
	case errors.Is(err, admin.ErrMoved):
		return &apiError{status: http.StatusConflict, msg: err.Error() + "; try again"}
	case errors.As(err, &pe) && pe.Code == "55P03":
		return &apiError{status: http.StatusConflict, msg: "a partition's row stayed locked (a batch in flight); try again"}
	}
	return err
}
