package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestDLQOperatorReviewDefects runs the eosink binary on a real dead letter of partition 0
// whose key, header and error hold terminal escapes: -partition 4294967296 is refused
// (it once wrapped to 0 and discarded this dead letter), and dlq show and dlq list print
// the escapes visibly, never raw.
func TestDLQOperatorReviewDefects(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	ctx := context.Background()
	db := testbed.Pool(t, p.Env)
	hp := newHeaderPlugin(t, p)
	hostile := "\x1b]0;pwned\x07\x1b[2J\r\nfake: line"
	testbed.Produce(t, p.Env, p.Topic, []testbed.Msg{
		{Key: []byte("k" + hostile), Value: []byte("poison"), Headers: []kafka.Header{{Key: "h" + hostile, Value: []byte("v" + hostile)}}},
	})
	r := startSink(t, pluginConfig(t, p, hp, sink.DeadLetter))
	testbed.Eventually(t, 60*time.Second, "the poison record dead-lettered", func() (bool, string) {
		n, _ := p.storedOrZero(t, 0)
		return n == 1, fmt.Sprintf("%d/1 %v", n, r.s.PartitionErrors())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c := p.admin(db)
	list, err := c.DeadLetters(ctx, admin.DeadLetterFilter{Pipeline: p.Group})
	if err != nil || len(list) != 1 || list[0].Partition != 0 {
		t.Fatalf("dead letters %+v (%v): want one, of partition 0", list, err)
	}
	base := []string{"-database-url", p.Env.DatabaseURL, "-schema", p.OffsetsSchema}

	out, err := run(t, nil, true, eosinkBin, append([]string{"dlq", "discard", "-pipeline", p.Group, "-partition", "4294967296", "-all", "-yes"}, base...)...)
	if err == nil || !strings.Contains(out, "-partition") {
		t.Fatalf("dlq discard -partition 4294967296: err %v, output %q; want a usage error naming -partition", err, out)
	}
	if after, err := c.DeadLetters(ctx, admin.DeadLetterFilter{Pipeline: p.Group}); err != nil || len(after) != 1 {
		t.Fatalf("after the refused discard: %d dead letters (%v), want 1", len(after), err)
	}

	for _, args := range [][]string{
		{"dlq", "show", "-id", fmt.Sprint(list[0].ID)},
		{"dlq", "list", "-pipeline", p.Group},
	} {
		out, _ := run(t, nil, false, eosinkBin, append(args, base...)...)
		if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\nfake: line") {
			t.Errorf("eosink %s prints control characters raw:\n%q", strings.Join(args, " "), out)
		}
		if args[1] == "show" && !strings.Contains(out, `k\x1b]0;pwned\x07\x1b[2J\r\nfake: line`) {
			t.Errorf("eosink dlq show does not show the key's escapes visibly:\n%s", out)
		}
	}
}
