package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// points builds the points example's sink for t (the build is cached), removed when t ends.
func points(t *testing.T) string {
	dir, cleanup := testbed.Build("github.com/eosink/eosink/examples/points")
	t.Cleanup(cleanup)
	return filepath.Join(dir, "points")
}

// TestStatusUnownedAfterKill: a sink killed with SIGKILL leaves the group only when its
// session times out. Meanwhile a restarted instance holds nothing: its progress line says it
// waits for the group, and `status` marks the partitions unowned, waiting for the group,
// with the old owner, its last heartbeat and the session timeout of the -config file. Once
// the session has timed out the new instance holds them and nothing is unowned.
func TestStatusUnownedAfterKill(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	p := testbed.NewPipelineOn(t, e, 2)
	const session = 25 * time.Second // above status's 10 s of heartbeats, so that the wait shows
	old := testbed.StartProcess(t, points(t), "points (old owner)", p.RawArgs("-instance", "old-owner",
		"-kafka", fmt.Sprintf("session.timeout.ms=%d", session.Milliseconds()), "-kafka", "heartbeat.interval.ms=1000"))
	file := writeFile(t, fmt.Sprintf(`
pipeline: %[1]s
instance_id: new-owner
kafka:
  brokers: %[2]s
  group: %[1]s
  topics: [%[3]s]
  properties:
    session.timeout.ms: %[4]d
    heartbeat.interval.ms: 1000
database:
  url: %[5]s
  schema: %[6]s
sink:
  type: clitest
log: {format: json, level: info, progress: 300ms}
`, p.Group, e.Brokers, p.Topic, session.Milliseconds(), e.DatabaseURL, p.OffsetsSchema))
	type unowned struct {
		Partition int32    `json:"partition"`
		Reason    string   `json:"reason"`
		Owner     string   `json:"owner"`
		Live      []string `json:"live_instances"`
		WaitLeft  float64  `json:"wait_left_seconds"`
		Detail    string   `json:"detail"`
	}
	type summary struct {
		Partitions int       `json:"partitions"`
		Alive      []string  `json:"owners_alive"`
		Unowned    int       `json:"partitions_unowned"`
		UnownedBy  []unowned `json:"unowned"`
	}
	status := func(args ...string) (summary, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Run(ctx, append([]string{"status", "-config", file}, args...), &out, &errb); code != 0 {
			t.Fatalf("status: exit %d: %s%s", code, out.String(), errb.String())
		}
		if len(args) == 0 {
			return summary{}, out.String()
		}
		var s []summary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil || len(s) > 1 {
			t.Fatalf("status -json: %v: %s", err, out.String())
		}
		if len(s) == 0 {
			return summary{}, out.String() // no row yet
		}
		return s[0], out.String()
	}
	testbed.Eventually(t, 60*time.Second, "the old owner to hold both partitions", func() (bool, string) {
		s, out := status("-json")
		return s.Partitions == 2 && slices.Equal(s.Alive, []string{"old-owner"}) && s.Unowned == 0, out
	})

	old.Signal(syscall.SIGKILL) // no LeaveGroup: Kafka keeps its partitions until its session times out
	if err := old.Wait(10 * time.Second); !testbed.KilledBySIGKILL(err) {
		t.Fatalf("old owner: %v", err)
	}
	var out, errb syncBuffer
	if code := Run(ctx, []string{"migrate", "up", "-config", file}, &out, &errb); code != 0 {
		t.Fatalf("migrate up: %d %s", code, errb.String())
	}
	runCtx, cancel := context.WithCancel(ctx)
	exit := make(chan int, 1)
	go func() { exit <- Run(runCtx, []string{"run", "-config", file}, &out, &errb) }()
	defer func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("run: exit %d: %s", code, errb.String())
		}
	}()

	var waiting unowned
	testbed.Eventually(t, session, "status to show both partitions unowned, waiting for the group", func() (bool, string) {
		s, out := status("-json")
		if s.Unowned != 2 || len(s.UnownedBy) != 2 {
			return false, out
		}
		for _, u := range s.UnownedBy {
			if u.Reason != "waiting_for_group" || u.Owner != "old-owner" || !slices.Contains(u.Live, "new-owner") ||
				u.WaitLeft <= 0 || u.WaitLeft > session.Seconds() || !strings.Contains(u.Detail, "session.timeout.ms=25000") {
				return false, out
			}
		}
		waiting = s.UnownedBy[0]
		return true, ""
	})
	if _, text := status(); !strings.Contains(text, fmt.Sprintf("unowned: %s %s[0]: waiting_for_group: ", p.Group, p.Topic)) ||
		!strings.Contains(text, "UNOWNED") || !strings.Contains(text, "old-owner (gone)") {
		t.Fatalf("status:\n%s", text)
	}
	t.Logf("unowned: %s", waiting.Detail)
	testbed.Eventually(t, 10*time.Second, "the new instance's progress line to say it waits for the group", func() (bool, string) {
		return strings.Contains(errb.String(), `"waiting":"for the group to assign partitions, `), errb.String()
	})

	testbed.Eventually(t, session+30*time.Second, "the new instance to hold both partitions", func() (bool, string) {
		s, out := status("-json")
		return s.Unowned == 0 && slices.Equal(s.Alive, []string{"new-owner"}), out
	})
	testbed.Eventually(t, 10*time.Second, "a progress line with both partitions and no wait", func() (bool, string) {
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		return strings.Contains(last, `"msg":"progress"`) && strings.Contains(last, `"partitions":2`) && !strings.Contains(last, "waiting"), last
	})
}

// TestProgressLineWaiting: while the group assigns the instance nothing, the progress line
// says since when it waits; the largest lag in seconds comes from the gauge.
func TestProgressLineWaiting(t *testing.T) {
	reg := prometheus.NewRegistry()
	secs := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eosink_partition_lag_seconds"}, []string{"topic", "partition"})
	reg.MustRegister(secs)
	secs.WithLabelValues("t", "0").Set(3.25)
	secs.WithLabelValues("t", "1").Set(61.04)
	attrs := func(st sink.Stats) map[string]any {
		args := progressArgs(sink.Stats{}, st, time.Second, reg)
		got := map[string]any{}
		for i := 0; i+1 < len(args); i += 2 {
			got[args[i].(string)] = args[i+1]
		}
		return got
	}
	got := attrs(sink.Stats{UnassignedSince: time.Now().Add(-12 * time.Second)})
	if w, _ := got["waiting"].(string); !strings.HasPrefix(w, "for the group to assign partitions, 12s") || got["waiting_seconds"] != int64(12) || got["lag_seconds"] != 61.0 {
		t.Fatalf("waiting: %v", got)
	}
	if got := attrs(sink.Stats{Assigned: 2}); got["waiting"] != nil {
		t.Fatalf("holding partitions: %v", got)
	}
	if got := attrs(sink.Stats{}); got["waiting"] != nil { // not a member (before Run, a lease's set)
		t.Fatalf("not a member: %v", got)
	}
}
