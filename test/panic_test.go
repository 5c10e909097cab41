package test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// panicky writes every batch with its inner plugin, then panics if the batch holds a record
// whose value says "boom": the panic comes after the good records' rows are in the
// transaction, which must not keep them.
type panicky struct{ sink.Plugin }

func (p panicky) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if err := p.Plugin.Write(ctx, tx, b); err != nil {
		return err
	}
	for _, r := range b.Records {
		if bytes.Contains(r.Value, []byte("boom")) {
			var m map[string]int
			m["boom"]++ // assignment to entry in nil map
		}
	}
	return nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPanicInWriteIsPoison: a plugin whose Write panics on some records (after writing the
// batch's rows) neither kills the process nor commits a half-used transaction: each
// panicking record is dead-lettered once with the panic as its error, every other record is
// applied once, the stored offsets reach the log end, the sink keeps running, and each
// panic's stack is logged once per batch at ERROR. On the old code the panic killed the
// test binary.
func TestPanicInWriteIsPoison(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	var msgs []testbed.Msg
	var good, bad []string
	for i := range 120 {
		key, val := fmt.Sprintf("k%d", i), fmt.Sprintf(`{"id": %d, "amount": %d, "note": "n%d"}`, i, i, i)
		if i%25 == 7 {
			key, val = "boom-"+key, fmt.Sprintf(`{"id": %d, "amount": %d, "note": "boom"}`, i, i)
			bad = append(bad, key)
		} else {
			good = append(good, key)
		}
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 2), Key: []byte(key), Value: []byte(val)})
	}
	testbed.Produce(t, p.Env, p.Topic, msgs)
	var logs lockedBuffer
	cfg := pluginConfig(t, p, panicky{poisonTable(t, p)}, sink.DeadLetter)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := startSink(t, cfg)
	ends := p.logEnds(t)
	testbed.Eventually(t, 90*time.Second, "both partitions to reach their log end", func() (bool, string) {
		n0, _ := p.storedOrZero(t, 0)
		n1, _ := p.storedOrZero(t, 1)
		return n0 == ends[0] && n1 == ends[1], fmt.Sprintf("%d/%d %d/%d", n0, ends[0], n1, ends[1])
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	db := testbed.Pool(t, p.Env)
	gotGood := strs(t, db, "SELECT k FROM "+pgx.Identifier{p.Schema, "events"}.Sanitize())
	gotBad := strs(t, db, "SELECT convert_from(key, 'UTF8') FROM "+pgx.Identifier{p.OffsetsSchema, "dead_letters"}.Sanitize()+
		" WHERE error LIKE '%panic in plugin Write: assignment to entry in nil map%'")
	slices.Sort(good)
	slices.Sort(bad)
	if !slices.Equal(gotGood, good) {
		t.Errorf("applied %d records, want the %d good ones exactly once", len(gotGood), len(good))
	}
	if !slices.Equal(gotBad, bad) {
		t.Errorf("dead-lettered %v with the panic, want %v", gotBad, bad)
	}
	out := logs.String()
	panics := strings.Count(out, `msg="plugin panicked"`)
	if panics < 1 || panics > len(bad) || !strings.Contains(out, "panic_test.go") {
		t.Errorf("%d log lines of a panic (want 1 to %d, one per batch, with the stack)", panics, len(bad))
	}
	t.Logf("%d good records applied, %d dead-lettered with the panic, %d panic stacks logged", len(gotGood), len(gotBad), panics)
}
