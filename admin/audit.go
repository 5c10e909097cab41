package admin

import (
	"context"
	"fmt"

	"github.com/eosink/eosink/internal/offsets"
)

// MoveAuditEntry is one row of the offsets_audit table: a change of a stored position, with who
// declared it (operator, reason) and what the server recorded (db_user, client_addr, at).
type MoveAuditEntry = offsets.AuditEntry

// MoveAuditFilter selects audit rows: by pipeline, topic and operator, newest first, paged
// back with BeforeID and Limit. Zero fields select everything.
type MoveAuditFilter = offsets.AuditFilter

// MoveAudit returns the audit rows of f, newest first; never nil.
func (c *Client) MoveAudit(ctx context.Context, f MoveAuditFilter) ([]MoveAuditEntry, error) {
	out, err := c.ops.Audit(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read the audit: %w", err)
	}
	if out == nil {
		out = []MoveAuditEntry{}
	}
	return out, nil
}
