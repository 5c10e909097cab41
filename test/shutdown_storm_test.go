package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestShutdownDuringRebalanceStorm: members join and leave a group while it rebalances, Stats
// is read all the while (the progress line does), and every member's Run returns soon after
// its cancellation. A shutdown once hung in Close's final revocation when the rebalance
// callback asked the consumer for its assignment.
func TestShutdownDuringRebalanceStorm(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 6)
	msgs := make([]testbed.Msg, 0, 600)
	for i := range 600 {
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 6), Value: []byte(fmt.Sprint(i))})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	handler := func(ctx context.Context, _ pgx.Tx, b sink.Batch) error {
		time.Sleep(20 * time.Millisecond) // keep batches in flight across the rebalances
		return nil
	}
	var members []*running
	start := func() {
		cfg := p.config(t, handler)
		members = append(members, startSink(t, cfg))
	}
	stopCtx, stopReading := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopReading(); wg.Wait() }()
	read := func(r *running) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stopCtx.Err() == nil {
				_ = r.s.Stats()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	for range 3 {
		start()
		read(members[len(members)-1])
	}
	for round := range 6 {
		start()
		read(members[len(members)-1])
		time.Sleep(time.Duration(300+200*(round%3)) * time.Millisecond) // mid-rebalance
		old := members[0]
		members = members[1:]
		began := time.Now()
		old.cancel()
		select {
		case err := <-old.done:
			old.done <- err // for the cleanup
			if err != nil && err != context.Canceled {
				t.Logf("round %d: Run returned %v", round, err)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("round %d: a member's Run did not return within 45s of its cancellation during a rebalance", round)
		}
		t.Logf("round %d: a member left in %s", round, time.Since(began).Round(time.Millisecond))
	}
	for i, r := range members {
		r.cancel()
		select {
		case err := <-r.done:
			r.done <- err
		case <-time.After(45 * time.Second):
			t.Fatalf("member %d of the last ones: Run did not return within 45s of its cancellation", i)
		}
	}
}
