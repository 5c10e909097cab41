package chaos

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// staleClaimProtocols are the assignment protocols the stale-claim scenario runs under.
var staleClaimProtocols = []struct {
	name string
	args []string
}{
	{"eager", []string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000", "-kafka", "partition.assignment.strategy=range"}},
	{"cooperative-sticky", []string{"-kafka", "session.timeout.ms=6000", "-kafka", "heartbeat.interval.ms=1000", "-kafka", "partition.assignment.strategy=cooperative-sticky"}},
	{"consumer-protocol", []string{"-kafka", "group.protocol=consumer"}},
}

// 23. A stale claim (issue 23; run alone: go test -tags failpoints -run TestChaos/23-stale-claim ./test/chaos). A member joins, and its assign callback stalls (failpoint in-assign,
// after it read the rows' epochs) past the rebalance timeout; two more members join, the
// group expels the stalled one and the others claim its partitions and consume them. Then the stale
// callback goes on to claim. Its claims must be abandoned, not fence the others; and should a
// stale claim take a partition anyway, the member that holds it in Kafka must claim it again
// by itself. Every other round the stale member is killed at the end of that callback
// (failpoint after-assign), so that it never rejoins the group (a rejoin would set off a
// rebalance that hands the partitions out anew); in the others it rejoins, consumes its
// share, and stops. At the end every partition is consumed, with nothing duplicated or lost,
// owned by a live member, and no row shows a stopped partition.
func scenarioStaleClaim(protocol []string) func(t *testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		const partitions = 4
		r := newRun(t, testbed.Require(t), partitions)
		flags := func(extra ...string) []string {
			// max.poll.interval.ms is also the rebalance timeout (the classic protocol's
			// is the largest of the members'): a member that stalls longer is expelled.
			return append(append([]string{"-batch-records", "100", "-lock-timeout", "2s", "-idle-tx-timeout", "8s",
				"-kafka", "max.poll.interval.ms=8000"}, protocol...), extra...)
		}
		instance := func() string { return fmt.Sprintf("chaos-%d-%d", r.seed%10000, r.nproc.Load()+1) }
		ctx, stop := context.WithCancel(context.Background())
		wait := r.produce(ctx, 200, 300*time.Millisecond)
		t.Cleanup(func() { stop(); wait() })
		heirID := instance()
		heir := r.sink(flags("-instance", heirID))
		live := map[string]bool{heirID: true}
		var joiners []*testbed.Process // the last round's, with their ids
		var joinerIDs []string
		var reclaimed int // re-claims after a stale claim, by members stopped since
		conn := r.watch()
		end := time.Now().Add(phase)
		for round := 0; round == 0 || time.Now().Before(end) && round < 3; round++ {
			// The last round's joiners leave, so that this round starts with the heir alone
			// and the members never outnumber the partitions.
			for i, j := range joiners {
				j.StopClean(60 * time.Second)
				reclaimed += strings.Count(j.Output(), "the claim that took it went nowhere")
				delete(live, joinerIDs[i])
			}
			joiners, joinerIDs = nil, nil
			r.waitRows(conn, partitions, live)
			before := r.epochs(conn)
			kill := round%2 == 0
			fp := "EOSINK_FAILPOINTS=in-assign=sleep(30s)@1"
			if kill {
				fp += ",after-assign=kill@1"
			}
			stale := r.sink(flags("-instance", instance()), fp)
			stale.WaitOutput("failpoint fired: in-assign sleep", 60*time.Second)
			held := assignedBefore(stale.Output(), "failpoint fired: in-assign")
			// Two new members make the group rebalance while the stale callback sleeps, to one
			// partition each: the stalled member, which cannot rejoin (classic protocol) or
			// give up a partition (consumer protocol) within its rebalance timeout
			// (max.poll.interval.ms), is expelled, and the others claim its partitions.
			for range 2 {
				id := instance()
				joiners, joinerIDs = append(joiners, r.sink(flags("-instance", id))), append(joinerIDs, id)
				live[id] = true
			}
			testbed.Eventually(t, 28*time.Second, fmt.Sprintf("the others to claim the stalled member's partitions %v", held), func() (bool, string) {
				now := r.epochs(conn)
				for _, p := range held {
					if !live[now[p].owner] || now[p].epoch <= before[p].epoch {
						return false, fmt.Sprint(now)
					}
				}
				return len(held) > 0, "no partitions"
			})
			if stale.Contains("claim abandoned") || stale.Contains(`msg="partition claimed"`) {
				t.Fatalf("the stale callback went on before the others claimed its partitions")
			}
			if kill {
				err, exited := stale.WaitFor(60 * time.Second)
				if !exited || !testbed.KilledBySIGKILL(err) || !stale.Contains("failpoint fired: after-assign kill") {
					t.Fatalf("the stale member did not die at the end of its stale callback: %v (exited %v)", err, exited)
				}
				r.fault("assign callback stalled past the rebalance timeout while the others took over; member killed after it" + abandoned(stale))
			} else {
				testbed.Eventually(t, 60*time.Second, "the stale member to lose its stale assignment", func() (bool, string) {
					return stale.Contains(`msg="partitions revoked"`), "not yet"
				})
				r.produceNow(200)
				stale.StopClean(60 * time.Second)
				r.fault("assign callback stalled past the rebalance timeout while the others took over" + abandoned(stale))
			}
		}
		r.endFaults(stop, wait)
		r.finish(120*time.Second, func(verdict) string {
			if n := reclaimed + countAll(append([]*testbed.Process{heir}, joiners...), "the claim that took it went nowhere"); n > 0 {
				r.note(fmt.Sprintf("partitions claimed again after a stale claim took them x%d", n))
			}
			var stopped int
			err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
				` WHERE pipeline = $1 AND topic = $2 AND stopped_reason IS NOT NULL`, r.p.Group, r.p.Topic).Scan(&stopped)
			if err != nil {
				return "offsets rows: " + err.Error()
			}
			// A member that stopped cleanly just now (the last round's stale one) may still
			// own a row: the group's rebalance after its leave, and the claim by its
			// partition's next owner, can come after the last record is applied.
			var others []string
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
				others = others[:0]
				for p, c := range r.epochs(conn) {
					if !live[c.owner] {
						others = append(others, fmt.Sprintf("%d:%s", p, c.owner))
					}
				}
				if len(others) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if stopped > 0 || len(others) > 0 {
				return fmt.Sprintf("%d partitions stopped, owned by no live member: %v", stopped, others)
			}
			return ""
		})
		stopAll(append(joiners, heir), 60*time.Second)
	}
}

// assignedRE finds the partitions of a "partitions assigned" log line.
var assignedRE = regexp.MustCompile(`\[(\d+)\]`)

// row is an offsets row's claim.
type row struct {
	epoch int64
	owner string
}

// epochs returns the claims of the pipeline's rows by partition, read on conn.
func (r *run) epochs(conn *pgx.Conn) map[int32]row {
	rows, err := conn.Query(context.Background(), `SELECT partition, epoch, coalesce(owner, '') FROM `+
		pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+` WHERE pipeline = $1 AND topic = $2`, r.p.Group, r.p.Topic)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[int32]row{}
	for rows.Next() {
		var p int32
		var c row
		if err := rows.Scan(&p, &c.epoch, &c.owner); err != nil {
			r.t.Fatal(err)
		}
		out[p] = c
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// assignedBefore returns the partitions of the last "partitions assigned" line of out
// before mark.
func assignedBefore(out, mark string) []int32 {
	if i := strings.Index(out, mark); i >= 0 {
		out = out[:i]
	}
	i := strings.LastIndex(out, `msg="partitions assigned"`)
	if i < 0 {
		return nil
	}
	line, _, _ := strings.Cut(out[i:], "\n")
	var held []int32
	for _, m := range assignedRE.FindAllStringSubmatch(line, -1) {
		var n int32
		if _, err := fmt.Sscan(m[1], &n); err == nil {
			held = append(held, n)
		}
	}
	return held
}

// waitRows waits until every partition has a row owned by one of the live instances.
func (r *run) waitRows(conn *pgx.Conn, partitions int, live map[string]bool) {
	testbed.Eventually(r.t, 60*time.Second, "every partition claimed by a live member", func() (bool, string) {
		rows := r.epochs(conn)
		for _, c := range rows {
			if !live[c.owner] {
				return false, fmt.Sprint(rows)
			}
		}
		return len(rows) == partitions, fmt.Sprint(rows)
	})
}

// abandoned says, for a fault's evidence, whether the stale member abandoned its claims.
func abandoned(stale *testbed.Process) string {
	if stale.Contains("claim abandoned") {
		return "; its claims abandoned"
	}
	return ""
}
