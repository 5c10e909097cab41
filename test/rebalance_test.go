package test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
)

// TestRebalance runs three sink processes that join and leave (SIGTERM and SIGKILL) while
// events are produced, for each assignment protocol, and checks per-event exactly-once and
// per-account sums at the end.
func TestRebalance(t *testing.T) {
	protocols := []struct {
		name string
		args []string
	}{
		{"eager", append(append([]string{}, classicTimeouts...), "-kafka", "partition.assignment.strategy=range")},
		{"cooperative-sticky", append(append([]string{}, classicTimeouts...), "-kafka", "partition.assignment.strategy=cooperative-sticky")},
		{"consumer-protocol", []string{"-kafka", "group.protocol=consumer"}},
	}
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, 6)
			args := p.RawArgs(append(proto.args, "-batch-records", "50")...)

			// Produce in the background: 12 chunks of 500 events.
			produced := make(chan error, 1)
			go func() {
				for i := 0; i < 12; i++ {
					_, err := app.Produce(context.Background(), app.ProduceOptions{Brokers: p.Env.Brokers, Topic: p.Topic,
						Events: 500, Accounts: 29, Seed: uint64(1000 + i)})
					if err != nil {
						produced <- err
						return
					}
					time.Sleep(300 * time.Millisecond)
				}
				produced <- nil
			}()

			c1 := startChild(t, "c1", args)
			c1.WaitOutput("partition claimed", 60*time.Second)
			c2 := startChild(t, "c2", args)
			c2.WaitOutput("partition claimed", 60*time.Second)
			c3 := startChild(t, "c3", args)
			c3.WaitOutput("partition claimed", 60*time.Second)
			c1.StopClean(60 * time.Second) // leaves: its partitions move to c2 and c3
			c2.Signal(syscall.SIGKILL)     // dies: its partitions move after the session timeout
			if err := c2.Wait(30 * time.Second); !testbed.KilledBySIGKILL(err) {
				t.Fatalf("c2: %v", err)
			}
			c4 := startChild(t, "c4", args)
			c4.WaitOutput("partition claimed", 90*time.Second)

			if err := <-produced; err != nil {
				t.Fatalf("produce: %v", err)
			}
			rep := p.WaitCaughtUp(t, 120*time.Second)
			c3.StopClean(60 * time.Second)
			c4.StopClean(60 * time.Second)
			if rep.Produced != 6000 {
				t.Fatalf("produced %d, want 6000", rep.Produced)
			}
			// Every partition was claimed more than once: the positions really moved between owners.
			var claims int64
			if err := connect(t, p).QueryRow(context.Background(), "SELECT sum(epoch) FROM "+p.offsetsTable()+
				" WHERE pipeline = $1", p.Group).Scan(&claims); err != nil {
				t.Fatal(err)
			}
			if claims <= 6 {
				t.Fatalf("sum of epochs %d: partitions never changed owner", claims)
			}
			t.Logf("%s: %s", proto.name, fmt.Sprintf("produced %d applied %d duplicates %d lost %d claims %d",
				rep.Produced, rep.Applied, rep.Duplicates, rep.Lost, claims))
		})
	}
}
