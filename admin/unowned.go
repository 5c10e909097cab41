package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eosink/eosink/internal/offsets"
)

// A partition is unowned when no running sink instance holds it: its owner was killed or
// shut down and the consumer group has not given it to another member yet. After a kill -9
// that lasts up to the group's session.timeout.ms from the dead member's last heartbeat
// (Kafka keeps the partition with it until then); a clean shutdown leaves the group and a
// rebalance follows at once. List says which case it sees from the instances table.

// Unowned reasons (Unowned.Reason).
const (
	// UnownedWaitingForGroup: the owner stopped heartbeating without leaving the group, and
	// its session has not timed out yet; the group reassigns the partition then.
	UnownedWaitingForGroup = "waiting_for_group"
	// UnownedNotReassigned: the owner left the group (or its session timed out) and other
	// instances run, but none holds the partition yet.
	UnownedNotReassigned = "not_reassigned"
	// UnownedNoInstance: no instance of the pipeline is running.
	UnownedNoInstance = "no_instance"
)

// DefaultSessionTimeout is librdkafka's session.timeout.ms, and the broker's default for
// group.protocol=consumer: what List assumes unless SetSessionTimeout says otherwise.
const DefaultSessionTimeout = 45 * time.Second

// Unowned says why no running instance holds a partition, and what to do.
type Unowned struct {
	Reason string `json:"reason"` // an Unowned* constant
	// Owner is the instance that held it last (for a row an operator moved, the instance
	// the move names).
	Owner string `json:"owner"`
	// OwnerHeartbeatAge is how long ago that instance last wrote its heartbeat; -1 when it
	// has none recorded.
	OwnerHeartbeatAge Seconds `json:"owner_heartbeat_age_seconds"`
	// WaitLeft is, for UnownedWaitingForGroup, about how long until the old member's
	// session times out and the group reassigns the partition.
	WaitLeft Seconds `json:"wait_left_seconds,omitempty"`
	// Live are the running instances of the pipeline (which the group may give it to).
	Live []string `json:"live_instances"`
	// Detail says it in words, with what to do.
	Detail string `json:"detail"`
}

// Seconds is a duration that JSON writes as seconds.
type Seconds float64

func seconds(d time.Duration) Seconds { return Seconds(d.Round(100 * time.Millisecond).Seconds()) }

// GroupSettings are the consumer-group settings of the pipelines' sinks that List's
// Unowned depends on.
type GroupSettings struct {
	// SessionTimeout is their session.timeout.ms, which Unowned's waits are measured
	// against. Defaults to DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Static says they set group.instance.id (static membership): a member that shuts down
	// does not leave the group, which keeps its partitions for it for SessionTimeout.
	// Defaults to false.
	Static bool
}

// SetGroupSettings sets what List assumes of the pipelines' consumer groups. Set it before
// use.
func (c *Client) SetGroupSettings(g GroupSettings) { c.group = g }

func (c *Client) sessionTimeout() time.Duration {
	if c.group.SessionTimeout > 0 {
		return c.group.SessionTimeout
	}
	return DefaultSessionTimeout
}

// markUnowned sets Unowned on the positions that no live instance holds.
func (c *Client) markUnowned(ctx context.Context, pipeline string, ps []Position) error {
	ins, err := c.ops.Instances(ctx, pipeline)
	if err != nil {
		return fmt.Errorf("read instances: %w", err)
	}
	type ik struct{ pipeline, instance string }
	byName := map[ik]offsets.Instance{}
	live := map[string][]string{}
	for _, in := range ins {
		byName[ik{in.Pipeline, in.Instance}] = in
		if in.Alive {
			live[in.Pipeline] = append(live[in.Pipeline], in.Instance)
		}
	}
	for i := range ps {
		p := &ps[i]
		owner := p.Owner
		if was, ok := offsets.ResetFrom(owner); ok {
			owner = was // that instance claims the moved partition again
		}
		in, known := byName[ik{p.Pipeline, owner}]
		if known && in.Alive {
			continue
		}
		var age time.Duration = -1
		if known {
			age = in.HeartbeatAge
		}
		p.Unowned = unowned(owner, age, known && in.Stopped, live[p.Pipeline], c.sessionTimeout(), c.group.Static)
	}
	return nil
}

// unowned says why a partition whose owner is gone is held by no one: owner last wrote its
// heartbeat age ago (-1: never), stopped says it shut down cleanly (leaving the group unless
// static), live are the pipeline's running instances, session the group's session timeout.
func unowned(owner string, age time.Duration, stopped bool, live []string, session time.Duration, static bool) *Unowned {
	u := &Unowned{Owner: owner, OwnerHeartbeatAge: -1, Live: live}
	if u.Live == nil {
		u.Live = []string{}
	}
	var gone string
	switch {
	case age < 0:
		gone = fmt.Sprintf("its owner %q has no heartbeat recorded", owner)
	case stopped && static:
		gone = fmt.Sprintf("its owner %q shut down %s ago; as a static member (group.instance.id) it stays in the group", owner, age.Round(time.Second))
	case stopped:
		gone = fmt.Sprintf("its owner %q shut down %s ago and left the group", owner, age.Round(time.Second))
	default:
		gone = fmt.Sprintf("its owner %q stopped heartbeating %s ago without leaving the group (killed, hung, or cut off from the database)",
			owner, age.Round(time.Second))
	}
	if age >= 0 {
		u.OwnerHeartbeatAge = seconds(age)
	}
	waiting := age >= 0 && (!stopped || static) && age < session
	ms := session.Milliseconds()
	switch {
	case waiting && len(live) > 0:
		u.Reason = UnownedWaitingForGroup
		u.WaitLeft = seconds(session - age)
		u.Detail = fmt.Sprintf("%s; the group has not reassigned it yet: Kafka keeps it with the old member until session.timeout.ms=%d "+
			"has passed since that member's last heartbeat, about %s from now, then gives it to a live instance (%s). "+
			"With static membership (group.instance.id) a restart under the old member's id gets it back at once; a shorter session.timeout.ms shortens the wait",
			gone, ms, (session - age).Round(time.Second), strings.Join(live, ", "))
	case len(live) == 0:
		u.Reason = UnownedNoInstance
		u.Detail = gone + "; no instance of the pipeline is running: start one"
		if waiting {
			u.WaitLeft = seconds(session - age)
			u.Detail += fmt.Sprintf(" (it receives the partition once the old member's session times out, session.timeout.ms=%d after its last heartbeat, "+
				"about %s from now; at once with static membership when it restarts under the old member's group.instance.id)", ms, (session - age).Round(time.Second))
		}
	default:
		u.Reason = UnownedNotReassigned
		u.Detail = fmt.Sprintf("%s; the group reassigns it at its next rebalance, within seconds of a member leaving or session.timeout.ms=%d "+
			"after a dead member's last heartbeat. If it stays unowned, look at the logs of the live instances (%s) for a failed or contested claim",
			gone, ms, strings.Join(live, ", "))
	}
	return u
}
