package console

import (
	"math"
	"net/http"

	"github.com/eosink/eosink/admin"
)

// AuditPage is GET /api/v1/audit: audit rows newest first, and the before_id of the next
// page (null on the last).
type AuditPage struct {
	Entries      []admin.MoveAuditEntry `json:"entries"`
	NextBeforeID *int64                 `json:"next_before_id"`
}

// audit: GET /api/v1/audit?pipeline=&topic=&operator=&limit=&before_id=.
func (h *handler) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := query(q, "pipeline", "topic", "operator", "limit", "before_id"); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", 1, MaxLimit, DefaultLimit)
	if err != nil {
		return err
	}
	before, err := intParam(q, "before_id", 0, math.MaxInt64, 0)
	if err != nil {
		return err
	}
	list, err := h.cfg.Admin.MoveAudit(r.Context(), admin.MoveAuditFilter{Pipeline: q.Get("pipeline"), Topic: q.Get("topic"),
		Operator: q.Get("operator"), BeforeID: before, Limit: int(limit) + 1})
	if err != nil {
		return err
	}
	page := AuditPage{Entries: list}
	if len(list) > int(limit) {
		page.Entries = list[:limit]
		next := page.Entries[limit-1].ID
		page.NextBeforeID = &next
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
