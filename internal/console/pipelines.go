package console

import (
	"net/http"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/opsview"
)

// PipelineDetail is GET /api/v1/pipelines/{pipeline}: its status line (as in
// GET /api/v1/pipelines and `eosink status -json`) and its partitions (as in `eosink offsets
// list -json`): position, epoch, owner alive or gone, lag, stop reason and remedy.
type PipelineDetail struct {
	Summary    *opsview.Summary `json:"summary"`
	Partitions []admin.Position `json:"partitions"`
}

// pipelines: GET /api/v1/pipelines, every pipeline's status line.
func (h *handler) pipelines(w http.ResponseWriter, r *http.Request) error {
	if err := query(r.URL.Query()); err != nil {
		return err
	}
	sums, _, err := h.status(r, "")
	if err != nil {
		return err
	}
	if sums == nil {
		sums = []*opsview.Summary{}
	}
	writeJSON(w, http.StatusOK, sums)
	return nil
}

// pipeline: GET /api/v1/pipelines/{pipeline}, 404 when it has no stored position.
func (h *handler) pipeline(w http.ResponseWriter, r *http.Request) error {
	if err := query(r.URL.Query()); err != nil {
		return err
	}
	name, err := pipelineParam(r)
	if err != nil {
		return err
	}
	sums, ps, err := h.status(r, name)
	if err != nil {
		return err
	}
	if len(sums) == 0 {
		return &apiError{status: http.StatusNotFound, field: "pipeline", msg: "pipeline " + quote(name) + " has no stored positions"}
	}
	writeJSON(w, http.StatusOK, PipelineDetail{Summary: sums[0], Partitions: ps})
	return nil
}

// status gathers what `eosink status` does: positions, dead letters per pipeline, leases.
func (h *handler) status(r *http.Request, pipeline string) ([]*opsview.Summary, []admin.Position, error) {
	c := h.cfg.Admin
	leases, err := c.Leases(r.Context(), pipeline)
	if err != nil {
		return nil, nil, err
	}
	ps, err := c.List(r.Context(), pipeline)
	if err != nil {
		return nil, nil, err
	}
	dead, err := c.CountDeadLetters(r.Context())
	if err != nil {
		return nil, nil, err
	}
	return opsview.Summaries(ps, dead, leases), ps, nil
}
