package test

import (
	"context"
	"testing"
	"time"

	"github.com/eosink/eosink/admin"
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
	st := rebalance.NewStore(pool, p.OffsetsSchema, p.Group, "sink-a", time.Second)
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
