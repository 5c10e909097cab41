// Package chaos is eosink's fault-injection suite. Each scenario runs sink processes
// (examples/points; scenarios 18, 22 and 24 run cmd/eosink with the cdc plugin) against the
// real broker and database, injects one kind of fault, and checks the outcome with an
// independent verifier (verify_test.go; that of 18 and 22 in scenarios_cdc_test.go, that of
// 24 in scenarios_cdc_tx_test.go). `make test` runs a short
// version of every scenario; `make chaos` runs longer ones and prints a table, also written
// as JSON to $CHAOS_REPORT.
//
// Environment: CHAOS_SEED (reproduce a run), CHAOS_SCENARIO_SECONDS (fault phase per
// scenario; default 12, `make chaos` sets 60), CHAOS_REPORT (JSON path).
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
)

var (
	pointsBin string
	eosinkBin string // cmd/eosink, for the scenarios that run a config-file pipeline (18, cdc)
	seed      uint64
	phase     = 12 * time.Second

	reportMu sync.Mutex
	report   []result
)

// result is one row of the report.
type result struct {
	Scenario        string   `json:"scenario"`
	Seed            uint64   `json:"seed"`
	FaultsInjected  int64    `json:"faults_injected"`
	Records         int      `json:"records"`
	Duplicates      int      `json:"duplicates"`
	Lost            int      `json:"lost"`
	RecoverySeconds float64  `json:"recovery_seconds"`
	Verdict         string   `json:"verdict"`
	Evidence        []string `json:"evidence,omitempty"`
	Details         string   `json:"details,omitempty"`
}

func TestMain(m *testing.M) {
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "CHAOS_SEED:", err)
			os.Exit(2)
		}
		seed = v
	}
	if s := os.Getenv("CHAOS_SCENARIO_SECONDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			fmt.Fprintln(os.Stderr, "CHAOS_SCENARIO_SECONDS: want a positive number of seconds")
			os.Exit(2)
		}
		phase = time.Duration(v) * time.Second
	}
	fmt.Printf("chaos: seed %d (rerun with CHAOS_SEED=%d), fault phase %s per scenario\n", seed, seed, phase)
	dir, cleanup := testbed.Build("github.com/eosink/eosink/examples/points", "github.com/eosink/eosink/cmd/eosink")
	pointsBin, eosinkBin = filepath.Join(dir, "points"), filepath.Join(dir, "eosink")
	code := m.Run()
	cleanup()
	if err := writeReport(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos report:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func writeReport() error {
	reportMu.Lock()
	defer reportMu.Unlock()
	if len(report) == 0 {
		return nil
	}
	sort.Slice(report, func(i, j int) bool { return report[i].Scenario < report[j].Scenario })
	tw := tabwriter.NewWriter(os.Stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nscenario\tfaults injected\trecords\tduplicates\tlost\ttime to recover (s)\tverdict")
	for _, r := range report {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%s\n", r.Scenario, r.FaultsInjected, r.Records, r.Duplicates, r.Lost, r.RecoverySeconds, r.Verdict)
	}
	tw.Flush()
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		path = filepath.Join("..", "..", ".reports", "chaos.json")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"seed": seed, "phase_seconds": phase.Seconds(), "scenarios": report}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("chaos: report written to %s\n", path)
	return os.WriteFile(path, b, 0o644)
}

// run is one scenario in progress.
type run struct {
	t        *testing.T
	name     string
	seed     uint64
	rng      *rand.Rand
	p        *testbed.Pipeline
	faults   atomic.Int64
	mu       sync.Mutex
	evidence map[string]int
	healed   time.Time
	nproc    atomic.Int64
	produced atomic.Int64
}

func newRun(t *testing.T, env testbed.Env, partitions int) *run {
	r := newBareRun(t)
	r.p = testbed.NewPipelineOn(t, env, partitions)
	return r
}

// newBareRun is a run without the points example's pipeline, for scenarios that bring
// their own topics and tables (18, cdc).
func newBareRun(t *testing.T) *run {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	s := seed ^ h.Sum64()
	r := &run{t: t, name: strings.TrimPrefix(t.Name(), "TestChaos/"), seed: s, rng: rand.New(rand.NewPCG(s, 7))}
	t.Logf("scenario %s: seed %d", r.name, s)
	return r
}

// sink starts a sink process with the pipeline's flags and extra arguments.
func (r *run) sink(extra []string, env ...string) *testbed.Process {
	n := r.nproc.Add(1)
	return testbed.StartProcess(r.t, pointsBin, fmt.Sprintf("sink-%d", n), r.p.RawArgs(extra...), env...)
}

// fault counts an injected fault, with what proves it fired.
func (r *run) fault(evidence string) {
	r.faults.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evidence == nil {
		r.evidence = map[string]int{}
	}
	r.evidence[evidence]++
}

// note adds evidence of what happened to the report without counting a fault.
func (r *run) note(evidence string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evidence == nil {
		r.evidence = map[string]int{}
	}
	r.evidence[evidence]++
}

// endFaults stops the producer (stop, then wait for it) and marks the end of the faults.
func (r *run) endFaults(stop context.CancelFunc, wait func()) {
	stop()
	wait()
	r.heal()
}

// stopAll stops every process with SIGTERM and requires a clean exit.
func stopAll(procs []*testbed.Process, timeout time.Duration) {
	for _, p := range procs {
		p.StopClean(timeout)
	}
}

// heal marks the end of the fault phase: recovery time is measured from here.
func (r *run) heal() { r.healed = time.Now() }

// produce writes events in chunks until ctx ends; the returned func waits for the producer.
// A scenario that fails before waiting stops the producer in its cleanup, before the topic
// is deleted (a producer outliving its test panics and hides the failure).
func (r *run) produce(ctx context.Context, chunk int, pause time.Duration) (wait func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			n, err := app.Produce(context.Background(), app.ProduceOptions{Brokers: r.p.Env.Brokers, Topic: r.p.Topic,
				Events: chunk, Accounts: 41, Seed: r.seed + uint64(i)*7919})
			r.produced.Add(int64(n))
			if err != nil {
				r.t.Errorf("produce: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return func() { <-done }
}

// finish waits until the stored offsets reach the log end (C4), runs the verifier, records
// the row, and fails the test unless every check holds.
func (r *run) finish(timeout time.Duration, extra ...func(verdict) string) verdict {
	return r.finishWith(timeout, finishOpts{}, extra...)
}

// finishOpts relax the checks for scenarios whose correct end is a stopped partition.
type finishOpts struct {
	stopped   bool // partitions stay stopped: lag need not reach zero (C4); extra checks say what holds
	recreated bool // the topic was recreated: old rows cannot match the new log (C1-C3 skipped)
}

func (r *run) finishWith(timeout time.Duration, o finishOpts, extra ...func(verdict) string) verdict {
	stopped := o.stopped
	if r.healed.IsZero() {
		r.heal()
	}
	var v verdict
	var err error
	deadline := time.Now().Add(timeout)
	for {
		v, err = check(context.Background(), r.p.Env.Brokers, r.p.Env.DatabaseURL, r.p.Topic, r.p.Group, r.p.Schema, r.p.OffsetsSchema)
		if err == nil && (v.Lag == 0 || stopped) {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovery := time.Since(r.healed).Seconds()
	var problems []string
	if err != nil {
		problems = append(problems, "verifier: "+err.Error())
	}
	if v.Lag != 0 && !stopped {
		problems = append(problems, fmt.Sprintf("C4: lag %d after %s", v.Lag, timeout))
	}
	if !v.exact() && !o.recreated {
		problems = append(problems, fmt.Sprintf("C1-C3: %+v", v))
	}
	for _, f := range extra {
		if p := f(v); p != "" {
			problems = append(problems, p)
		}
	}
	res := r.result(v.Records, v.Duplicates, v.Lost, recovery) // after extra, which may add evidence (note)
	r.record(res, problems)
	return v
}

// result is the report's row for this run so far, with the evidence of the faults.
func (r *run) result(records, duplicates, lost int, recovery float64) result {
	r.mu.Lock()
	var evidence []string
	for what, n := range r.evidence {
		evidence = append(evidence, fmt.Sprintf("%s x%d", what, n))
	}
	r.mu.Unlock()
	sort.Strings(evidence)
	return result{Scenario: r.name, Seed: r.seed, FaultsInjected: r.faults.Load(), Records: records,
		Duplicates: duplicates, Lost: lost, RecoverySeconds: recovery, Evidence: evidence, Verdict: "PASS"}
}

// record adds res to the report with the problems found (and C5 and the record count
// checked here), and fails the test unless there are none.
func (r *run) record(res result, problems []string) {
	if res.FaultsInjected == 0 {
		problems = append(problems, "C5: no fault fired")
	}
	if res.Records == 0 {
		problems = append(problems, "no records")
	}
	if len(problems) > 0 {
		res.Verdict = "FAIL"
		res.Details = strings.Join(problems, "; ")
	}
	reportMu.Lock()
	report = append(report, res)
	reportMu.Unlock()
	r.t.Logf("%s: faults %d, records %d, duplicates %d, lost %d, recovery %.1fs, evidence %v", r.name,
		res.FaultsInjected, res.Records, res.Duplicates, res.Lost, res.RecoverySeconds, res.Evidence)
	if res.Verdict != "PASS" {
		r.t.Fatalf("%s failed: %s", r.name, res.Details)
	}
}
