package cdc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/sink"
)

func TestConsistencyConfig(t *testing.T) {
	second, ms, zero, negative := time.Second, time.Millisecond, time.Duration(0), -3*time.Second
	for _, tc := range []struct {
		c    Config
		want string // "" when valid
	}{
		{Config{}, ""},
		{Config{Consistency: "partition"}, ""},
		{Config{Consistency: "transaction", TransactionTopic: "db.transaction"}, ""},
		{Config{Consistency: "transaction", TransactionTopic: "db.transaction", LeaseTimeout: &second}, ""},
		{Config{Consistency: "transaction"}, "needs transaction_topic"},
		{Config{TransactionTopic: "db.transaction"}, "transaction_topic: read only with consistency: transaction"},
		{Config{Consistency: "atomic"}, `consistency: "atomic" is not partition or transaction`},
		{Config{Consistency: "transaction", TransactionTopic: "t", LeaseTimeout: &ms}, "lease_timeout: 1ms is below 1s"},
		{Config{Consistency: "transaction", TransactionTopic: "t", MaxHeldEvents: -1}, "must not be negative"},
		{Config{Consistency: "transaction", TransactionTopic: "t", IncompleteAfter: &second}, ""},
		{Config{Consistency: "transaction", TransactionTopic: "t", IncompleteAfter: &ms}, "incomplete_after: 1ms is below 1s"},
		{Config{Consistency: "transaction", TransactionTopic: "t", IncompleteAfter: &zero}, "incomplete_after: 0s is below 1s"},
		{Config{Consistency: "transaction", TransactionTopic: "t", IncompleteAfter: &negative}, "incomplete_after: -3s is below 1s"},
	} {
		tc.c.Schemas = []string{"public"}
		_, err := New(tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
}

// TestSequencedOnlyInTransactionMode: the sink sees a set only in transaction mode, with
// the transaction topic read besides the pipeline's and required to have one partition;
// in that mode the per-partition engine's Write (the plugin inside multi or outbox)
// refuses rather than applying per partition.
func TestSequencedOnlyInTransactionMode(t *testing.T) {
	p, err := New(Config{Schemas: []string{"public"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Sequenced(); ok {
		t.Fatal("partition mode reported a set")
	}
	ten, five := 10*time.Second, 5*time.Second
	p, err = New(Config{Schemas: []string{"public"}, Consistency: "transaction", TransactionTopic: "db.transaction", LeaseTimeout: &ten})
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := p.Sequenced(); o.IncompleteAfter != 0 {
		t.Fatalf("incomplete_after unset: IncompleteAfter %s, want 0 (the sink's default)", o.IncompleteAfter)
	}
	p, err = New(Config{Schemas: []string{"public"}, Consistency: "transaction", TransactionTopic: "db.transaction", LeaseTimeout: &ten,
		IncompleteAfter: &five})
	if err != nil {
		t.Fatal(err)
	}
	o, ok := p.Sequenced()
	if !ok || o.Name != "db.transaction" || len(o.Topics) != 1 || o.Topics[0] != "db.transaction" ||
		len(o.SinglePartition) != 1 || o.LeaseTimeout != ten || o.IncompleteAfter != five {
		t.Fatalf("set options %+v %v", o, ok)
	}
	var _ sink.Sequencer = p
	if sum := p.RouteSummary(); !strings.HasPrefix(sum[len(sum)-1], "consistency: transaction (each source transaction whole, in commit order, from db.transaction") ||
		!strings.Contains(sum[len(sum)-1], "standbys take over after 10s; at most 100000 changes, 64 MiB held") {
		t.Fatalf("summary %q", sum)
	}
	if err := p.Write(context.Background(), nil, sink.Batch{}); !errors.Is(err, errNotSequenced) {
		t.Fatalf("Write in transaction mode: %v", err)
	}
}
