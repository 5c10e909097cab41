package main

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// PositionsSize is the size of a target's positions after a run.
type PositionsSize struct {
	Rows    int64 `json:"rows"`
	Deleted int64 `json:"deleted"`
	// Bytes: the target's share of the positions table with its index
	// (pg_total_relation_size × its rows / the table's rows): the table also holds the
	// positions of the bench's other cdc runs (each round's eos_cdc and eos_cdc_tx).
	Bytes        int64   `json:"bytes"`
	TableBytes   int64   `json:"table_bytes"` // the whole table with its index
	TableRows    int64   `json:"table_rows"`
	BytesPerRow  float64 `json:"bytes_per_row"`
	TargetBytes  int64   `json:"target_bytes"` // the replica table with its index, for scale
	TargetRows   int64   `json:"target_rows"`
	PositionsVsT float64 `json:"positions_vs_target_bytes"`
}

// positionsSize measures the positions of table (in cdcSchema) after an eos_cdc run.
func (b *bench) positionsSize(ctx context.Context, table string) (*PositionsSize, error) {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{cdcSchema, table}.Sanitize()
	ps := &PositionsSize{}
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE target = $1::text), count(*) FILTER (WHERE target = $1::text AND deleted),
  count(*), pg_total_relation_size('bench_eosink.cdc_positions_int'), pg_total_relation_size($1::text::regclass), (SELECT count(*) FROM `+name+`)
FROM bench_eosink.cdc_positions_int`, name).Scan(&ps.Rows, &ps.Deleted, &ps.TableRows, &ps.TableBytes, &ps.TargetBytes, &ps.TargetRows)
	if err != nil {
		return nil, err
	}
	if ps.TableRows > 0 {
		ps.Bytes = int64(float64(ps.TableBytes) * float64(ps.Rows) / float64(ps.TableRows))
	}
	if ps.Rows > 0 {
		ps.BytesPerRow = float64(ps.Bytes) / float64(ps.Rows)
	}
	if ps.TargetBytes > 0 {
		ps.PositionsVsT = float64(ps.Bytes) / float64(ps.TargetBytes)
	}
	return ps, nil
}
