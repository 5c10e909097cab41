package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosink/eosink/internal/testbed"
)

// 4. Zombie by slowness: a handler stalls during a rebalance past max.poll.interval.ms while
// librdkafka keeps heartbeating. The stalled member is expelled, the partition moves, and the
// stalled batch must not commit after the new owner claimed.
func scenarioZombieSlow(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	ctx, stop := context.WithCancel(context.Background())
	wait := r.produce(ctx, 300, 300*time.Millisecond)
	heir := r.sink(base())
	for end := time.Now().Add(phase); time.Now().Before(end); {
		slow := r.sink(base("-kafka", "max.poll.interval.ms=8000", "-revoke-timeout", "60s"),
			fmt.Sprintf("EOSINK_FAILPOINTS=in-handler=sleep(20s)@%d", 2+r.rng.IntN(3)))
		slow.WaitOutput("failpoint fired: in-handler sleep", 60*time.Second)
		// A new member makes the group rebalance; the slow member's revoke waits on its
		// stalled handler, past max.poll.interval.ms.
		joiner := r.sink(base())
		testbed.Eventually(t, 60*time.Second, "the stalled member to be expelled or its batch rejected", func() (bool, string) {
			out := slow.Output()
			return strings.Contains(out, "MAXPOLL") || strings.Contains(out, "partition fenced") ||
				strings.Contains(out, "in-flight batch rolled back"), "not yet"
		})
		out := slow.Output()
		switch {
		case strings.Contains(out, "MAXPOLL"):
			r.fault("handler stalled past max.poll.interval.ms; member expelled")
		default:
			r.fault("handler stalled; its batch rejected")
		}
		slow.Signal(syscall.SIGTERM)
		if _, exited := slow.WaitFor(60 * time.Second); !exited {
			t.Fatal("the stalled sink did not exit after SIGTERM")
		}
		joiner.StopClean(60 * time.Second)
	}
	r.endFaults(stop, wait)
	r.finish(120 * time.Second)
	heir.StopClean(60 * time.Second)
}

// 5. Rebalance storm: 4 to 6 processes over 12 partitions, started and stopped (SIGTERM or
// SIGKILL) every few seconds, for each assignment protocol.
func scenarioStorm(protocol []string, static bool) func(t *testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		r := newRun(t, testbed.Require(t), 12)
		ctx, stop := context.WithCancel(context.Background())
		wait := r.produce(ctx, 600, 200*time.Millisecond)
		// Static members restart under the instance id of one that left, as a rolling
		// restart does; two live members never share one.
		free := []int{0, 1, 2, 3, 4, 5}
		slot := map[*testbed.Process]int{}
		start := func() *testbed.Process {
			args := append([]string{"-batch-records", "100", "-lock-timeout", "2s"}, protocol...)
			n := free[0]
			free = free[1:]
			if static {
				args = append(args, "-kafka", fmt.Sprintf("group.instance.id=%s-%d", r.p.Group, n))
			}
			p := r.sink(args)
			slot[p] = n
			return p
		}
		var procs []*testbed.Process
		for i := 0; i < 4; i++ {
			procs = append(procs, start())
		}
		for end := time.Now().Add(phase); time.Now().Before(end); {
			time.Sleep(time.Duration(1000+r.rng.IntN(2000)) * time.Millisecond)
			switch {
			case len(procs) < 6 && (len(procs) <= 4 || r.rng.IntN(2) == 0):
				procs = append(procs, start())
				r.fault("member started")
			default:
				i := r.rng.IntN(len(procs))
				if r.rng.IntN(2) == 0 {
					procs[i].StopClean(60 * time.Second)
					r.fault("member stopped with SIGTERM")
				} else {
					procs[i].Signal(syscall.SIGKILL)
					if err, _ := procs[i].WaitFor(10 * time.Second); testbed.KilledBySIGKILL(err) {
						r.fault("member killed with SIGKILL")
					}
				}
				free = append(free, slot[procs[i]])
				procs = append(procs[:i], procs[i+1:]...)
			}
		}
		r.endFaults(stop, wait)
		r.finish(180*time.Second, func(verdict) string {
			// Every assignment resumed at the stored offset: a claim logs the offset it resumed
			// from, and with exact sums that offset was the stored one. Check that claims happened.
			claims := 0
			for _, p := range procs {
				claims += strings.Count(p.Output(), "partition claimed")
			}
			if claims == 0 {
				return "no claims logged by the surviving members"
			}
			return ""
		})
		stopAll(procs, 60*time.Second)
	}
}
