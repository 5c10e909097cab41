package cdc

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// PKExpr returns the positions key expression of table's rows (pkExpr, columns prefixed
// with prefix) and its key columns' kinds, for the tests of package cdc_test.
func PKExpr(ctx context.Context, db sink.DB, table pgx.Identifier, positionsSchema, prefix string) (string, []string, error) {
	t, _, err := loadTarget(ctx, db, table, route{}, pgx.Identifier{positionsSchema, "cdc_positions"}.Sanitize())
	if err != nil {
		return "", nil, err
	}
	return t.pkExpr(prefix), t.keyKind, nil
}
