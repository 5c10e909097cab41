package admin

import (
	"strings"
	"testing"
	"time"
)

// TestUnownedWords: why a partition is unowned follows from the old owner's last heartbeat,
// whether it shut down, the live instances and the group's settings.
func TestUnownedWords(t *testing.T) {
	const session = 45 * time.Second
	live := []string{"sink-2"}
	for _, c := range []struct {
		name     string
		age      time.Duration
		stopped  bool
		live     []string
		static   bool
		reason   string
		waitLeft Seconds
		words    []string
	}{
		{"killed, others live", 12 * time.Second, false, live, false, UnownedWaitingForGroup, 33,
			[]string{`"sink-1" stopped heartbeating 12s ago without leaving the group`, "session.timeout.ms=45000", "about 33s from now", "(sink-2)"}},
		{"killed, session passed", 50 * time.Second, false, live, false, UnownedNotReassigned, 0,
			[]string{"next rebalance", "logs of the live instances (sink-2)"}},
		{"shut down, others live", 2 * time.Second, true, live, false, UnownedNotReassigned, 0,
			[]string{"shut down 2s ago and left the group"}},
		{"static member shut down", 2 * time.Second, true, live, true, UnownedWaitingForGroup, 43,
			[]string{"static member (group.instance.id) it stays in the group", "about 43s from now"}},
		{"killed, nothing runs", 12 * time.Second, false, nil, false, UnownedNoInstance, 33,
			[]string{"no instance of the pipeline is running: start one", "about 33s from now"}},
		{"no heartbeat, nothing runs", -1, false, nil, false, UnownedNoInstance, 0,
			[]string{`"sink-1" has no heartbeat recorded`, "start one"}},
	} {
		u := unowned("sink-1", c.age, c.stopped, c.live, session, c.static)
		if u.Reason != c.reason || u.WaitLeft != c.waitLeft || u.Owner != "sink-1" || u.Live == nil {
			t.Errorf("%s: %+v, want reason %s, wait left %v", c.name, u, c.reason, c.waitLeft)
		}
		for _, w := range c.words {
			if !strings.Contains(u.Detail, w) {
				t.Errorf("%s: %q has no %q", c.name, u.Detail, w)
			}
		}
	}
}
