package test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/rebalance"
)

// TestApplyMovesARowCreatedAfterPlan (issue 11, item 11): Apply's documentation and code
// agree about a row that a sink creates between Plan and Apply: it is moved like any other,
// From says where the sink created it, the epoch is bumped (the sink is fenced), and the
// owner names the fenced instance.
func TestApplyMovesARowCreatedAfterPlan(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 100, 151)
	ctx := context.Background()
	pool := testbed.Pool(t, p.Env)
	c := p.admin(pool)
	zero := int32(0)
	plan, err := c.Plan(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: &zero}, admin.Offset(40))
	if err != nil || len(plan) != 1 || plan[0].From != nil {
		t.Fatalf("plan %+v %v, want one change from no row", plan, err)
	}
	st := offsets.NewStore(pool, p.OffsetsSchema, p.Group, "sink-a", time.Second)
	cl, err := st.Claim(ctx, p.Topic, 0, "", func() (int64, error) { return 7, nil })
	if err != nil || !cl.Created {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	done, err := c.Apply(ctx, plan, "test-operator", "row created after plan")
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if done[0].From == nil || *done[0].From != 7 || done[0].To != 40 {
		t.Fatalf("applied %+v, want from 7 to 40", done[0])
	}
	pos, found, err := st.Peek(ctx, p.Topic, 0)
	if err != nil || !found || pos.NextOffset != 40 || pos.Epoch != cl.Epoch+1 || pos.Owner != rebalance.ResetOwner("test-operator", "sink-a") {
		t.Fatalf("row %+v (%v %v), want next 40, epoch %d, owner naming sink-a", pos, found, err, cl.Epoch+1)
	}
}

// TestApplyRefusesARowDeletedAfterPlan: the other half of Apply's documentation. A row that
// Plan saw and that is gone when Apply runs is not created again from the plan: Apply
// returns ErrMoved and writes nothing (no offsets row, no audit row).
func TestApplyRefusesARowDeletedAfterPlan(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 100, 152)
	ctx := context.Background()
	pool := testbed.Pool(t, p.Env)
	c := p.admin(pool)
	st := offsets.NewStore(pool, p.OffsetsSchema, p.Group, "sink-a", time.Second)
	if _, err := st.Claim(ctx, p.Topic, 0, "", func() (int64, error) { return 7, nil }); err != nil {
		t.Fatalf("claim: %v", err)
	}
	zero := int32(0)
	plan, err := c.Plan(ctx, admin.Selector{Pipeline: p.Group, Topic: p.Topic, Partition: &zero}, admin.Offset(40))
	if err != nil || len(plan) != 1 || plan[0].From == nil || *plan[0].From != 7 {
		t.Fatalf("plan %+v %v, want one change from 7", plan, err)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM "+p.offsetsTable()+" WHERE pipeline = $1", p.Group); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, plan, "test-operator", "row deleted after plan"); !errors.Is(err, admin.ErrMoved) {
		t.Fatalf("Apply: %v, want ErrMoved", err)
	}
	var rows, audits int
	err = pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+p.offsetsTable()+" WHERE pipeline = $1), (SELECT count(*) FROM "+
		pgx.Identifier{p.OffsetsSchema, "offsets_audit"}.Sanitize()+" WHERE pipeline = $1 AND operator = 'test-operator')", p.Group).Scan(&rows, &audits)
	if err != nil || rows != 0 || audits != 0 {
		t.Fatalf("after the refused Apply: %d offsets rows, %d audit rows of the operator (%v), want none", rows, audits, err)
	}
}
