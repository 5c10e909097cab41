package main

// The round-trip benchmark (issue 26, report section round_trips): eos (the table plugin on
// plain rows), eos_cdc (the cdc plugin on Debezium change events) and the peer (the Debezium
// JDBC sink on Kafka Connect, on the same change topic and, BENCH_RTT_PEER=1, on the plain
// rows' envelope) with PostgreSQL behind a delay proxy (internal/testbed/netproxy) that adds
// a fixed one-way delay each way, as a database on another machine would. For eosink the
// proxy also counts the round trips of its pool (a client turn: the client sends after the
// server has sent) from its first commit to its last, and names each by the statements it
// carries, so that a batch's round trips are counted and listed.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed/netproxy"
)

// RTTCount is what the proxy counted of a sink's pool from its first commit to its last.
type RTTCount struct {
	RoundTrips int64 `json:"round_trips"`
	Batches    int64 `json:"batches"` // transactions committed meanwhile
	// Turns: the round trips by the statements they carried.
	Turns map[string]int64 `json:"turns"`
}

// rttWatch is a child's delay proxy and the counts at the sink's first and last commit.
type rttWatch struct {
	proxy       *netproxy.Proxy
	mu          sync.Mutex
	started     bool
	rt0, b0     int64
	turns0      map[string]int64
	lastBatches int64
	lastRT      int64
	lastTurns   map[string]int64
}

// startRTT starts a proxy with one-way delay to dbURL's server and returns it with the URL
// through it.
func startRTT(dbURL string, delay time.Duration) (*rttWatch, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, "", err
	}
	p, err := netproxy.Listen(u.Host, delay)
	if err != nil {
		return nil, "", err
	}
	p.Classify, p.Answered = netproxy.PGStatements(), netproxy.PGAnswered
	u.Host = p.Addr()
	return &rttWatch{proxy: p}, u.String(), nil
}

// observe notes the counts when the sink has applied n records in batches transactions:
// the first time anything is applied, and at every later commit.
func (w *rttWatch) observe(n, batches int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 {
		return
	}
	if !w.started {
		w.started, w.rt0, w.b0, w.turns0 = true, w.proxy.RoundTrips(), batches, w.proxy.Turns()
		w.lastBatches = batches
		return
	}
	if batches != w.lastBatches {
		w.lastBatches, w.lastRT, w.lastTurns = batches, w.proxy.RoundTrips(), w.proxy.Turns()
	}
}

// count is the round trips from the first commit seen to the last.
func (w *rttWatch) count() *RTTCount {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.lastTurns == nil {
		return &RTTCount{}
	}
	c := &RTTCount{RoundTrips: w.lastRT - w.rt0, Batches: w.lastBatches - w.b0, Turns: map[string]int64{}}
	for k, v := range w.lastTurns {
		if d := v - w.turns0[k]; d > 0 {
			c.Turns[k] = d
		}
	}
	return c
}

// RoundTrips is the report's round_trips section.
type RoundTrips struct {
	Method     string    `json:"method"`
	DelaysMs   []float64 `json:"delays_ms_each_way"`
	Partitions int       `json:"partitions"`
	Records    int64     `json:"records"`     // eos's and the peer's (plain rows)
	CDCRecords int64     `json:"cdc_records"` // eos_cdc's and peer_cdc's
	Runs       []RTTRun  `json:"runs"`
	// Statements: for each eosink contender at no delay, its round trips per batch by the
	// statements they carried.
	Statements map[string]map[string]float64 `json:"statements_per_batch,omitempty"`
}

// RTTRun is one contender at one delay.
type RTTRun struct {
	Contender        string  `json:"contender"`
	DelayMs          float64 `json:"delay_ms_each_way"`
	RecordsPerSecond float64 `json:"records_per_second"`
	// RatioToNoDelay: this rate over the same contender's at no delay.
	RatioToNoDelay float64 `json:"ratio_to_no_delay,omitempty"`
	// RoundTripsPerBatch: eosink's round trips per committed transaction; for the peer, its
	// round trips per 1000 records (its batches are not counted).
	RoundTripsPerBatch    float64 `json:"round_trips_per_batch,omitempty"`
	RoundTripsPer1000Recs float64 `json:"round_trips_per_1000_records,omitempty"`
	Batches               int64   `json:"batches,omitempty"`
	Records               int64   `json:"records"`
	Seconds               float64 `json:"seconds"`
	Verified              string  `json:"verified,omitempty"`
}

// rttDelays are BENCH_RTT_DELAYS (durations, comma-separated; default 0,500us,2ms).
func rttDelays() ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(envStr("BENCH_RTT_DELAYS", "0,500us,2ms"), ",") {
		if f = strings.TrimSpace(f); f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, fmt.Errorf("BENCH_RTT_DELAYS: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func delayMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// roundTrips runs the round-trip phase: its own topics (BENCH_RTT_RECORDS plain rows,
// default 200000; BENCH_RTT_CDC_RECORDS change records, default 100000), each contender at
// each delay.
func (b *bench) roundTrips(ctx context.Context) error {
	delays, err := rttDelays()
	if err != nil {
		return err
	}
	if p := envInt("BENCH_RTT_PARTITIONS", b.partitions); p != b.partitions { // fewer partitions: less overlap of the waits
		rb := *b
		rb.partitions = p
		b = &rb
	}
	cdcOn := envInt("BENCH_RTT_CDC", 1) == 1
	n := int64(envInt("BENCH_RTT_RECORDS", 200_000))
	nc := int64(envInt("BENCH_RTT_CDC_RECORDS", 100_000))
	peer := envStr("BENCH_RTT_PEER", "1") // 1: peer_cdc and peer; cdc: peer_cdc only; 0: no peer
	if !peerOn() {
		peer = "0"
	}
	rt := &RoundTrips{Partitions: b.partitions, Records: n, CDCRecords: nc, Statements: map[string]map[string]float64{},
		Method: "PostgreSQL behind a TCP proxy of the bench (internal/testbed/netproxy) that delays every chunk by the delay " +
			"each way, without serializing; for eosink the proxy is in the sink's process and carries its pool only, and counts " +
			"a round trip each time the client sends after the server's ReadyForQuery, from the first commit to the last; the peer's " +
			"proxy carries all its connections (its table polls included)"}
	for _, d := range delays {
		rt.DelaysMs = append(rt.DelaysMs, delayMs(d))
	}
	b.rep.RoundTrips = rt
	topic, cdcTopic, envTopic := "bench-rtt", "bench-rtt-cdc", "bench-rtt-envelope"
	if b.partitions != b.rep.Partitions {
		sfx := fmt.Sprintf("-p%d", b.partitions)
		topic, cdcTopic, envTopic = topic+sfx, cdcTopic+sfx, envTopic+sfx
	}
	b.logf("round trips: preloading %d records (%s) and %d change records (%s)", n, topic, nc, cdcTopic)
	if _, err := preload(ctx, b.brokers, topic, b.partitions, n, "normal"); err != nil {
		return err
	}
	d := &cdcData{}
	if cdcOn {
		if d, _, err = preloadCDC(ctx, b.brokers, cdcStream{topic: cdcTopic}, b.partitions, nc); err != nil {
			return err
		}
		if err := b.loadExpected(ctx, d); err != nil {
			return err
		}
	}
	if peer == "1" {
		if _, err := preload(ctx, b.brokers, envTopic, b.partitions, n, "envelope"); err != nil {
			return err
		}
	}
	ids := make([]string, len(d.sentinels))
	for i, id := range d.sentinels {
		ids[i] = strconv.FormatInt(id, 10)
	}
	base := map[string]float64{}
	add := func(r RTTRun, c *RTTCount) {
		if r.DelayMs == 0 {
			base[r.Contender] = r.RecordsPerSecond
		}
		if v := base[r.Contender]; v > 0 {
			r.RatioToNoDelay = r.RecordsPerSecond / v
		}
		if c != nil && c.Batches > 0 {
			r.Batches, r.RoundTripsPerBatch = c.Batches, float64(c.RoundTrips)/float64(c.Batches)
			if _, seen := rt.Statements[r.Contender]; !seen {
				per := map[string]float64{}
				for k, v := range c.Turns {
					per[k] = float64(v) / float64(c.Batches)
				}
				rt.Statements[r.Contender] = per
			}
		}
		if c != nil && r.Records > 0 {
			r.RoundTripsPer1000Recs = float64(c.RoundTrips) / float64(r.Records) * 1000
		}
		rt.Runs = append(rt.Runs, r)
		b.logf("round trips: %s at %.1f ms each way: %.0f records/s (%.2f of no delay), %.2f round trips per batch over %d batches",
			r.Contender, r.DelayMs, r.RecordsPerSecond, r.RatioToNoDelay, r.RoundTripsPerBatch, r.Batches)
	}
	for _, delay := range delays {
		dl := delay.String()
		b.phase("rtt_eos_"+dl, func() error {
			m, err := b.child(ctx, "rtt_eos", "eosink, table plugin (insert), PostgreSQL "+dl+" away each way", "insert",
				"-mode", "eos", "-topic", topic, "-records", strconv.FormatInt(n, 10), "-rtt-delay", dl)
			if err != nil {
				return err
			}
			add(RTTRun{Contender: "eos", DelayMs: delayMs(delay), RecordsPerSecond: m.RecordsPerSecond, Records: m.Records, Seconds: m.Seconds}, m.RTT)
			return nil
		})
		b.phase("rtt_eos_cdc_"+dl, func() error {
			if !cdcOn {
				return nil
			}
			m, err := b.child(ctx, "rtt_eos_cdc", "eosink, cdc plugin, PostgreSQL "+dl+" away each way", "cdc",
				"-mode", "eos", "-topic", cdcTopic, "-format", "cdc", "-records", strconv.FormatInt(d.records, 10), "-rtt-delay", dl)
			if err != nil {
				return err
			}
			v, err := b.verifyCDC(ctx, d, fmt.Sprintf("t%d_rtt_eos_cdc", seq))
			if err != nil {
				return err
			}
			add(RTTRun{Contender: "eos_cdc", DelayMs: delayMs(delay), RecordsPerSecond: m.RecordsPerSecond, Records: m.Records,
				Seconds: m.Seconds, Verified: v.String()}, m.RTT)
			if !v.OK {
				return fmt.Errorf("eos_cdc at %s: %s", dl, v)
			}
			return nil
		})
		if peer == "0" {
			continue
		}
		b.phase("rtt_peer_cdc_"+dl, func() error {
			if !cdcOn {
				return nil
			}
			table := "rtt_peer_cdc_" + strings.NewReplacer(".", "_", "µ", "u").Replace(dl)
			if err := b.cdcTable(ctx, table); err != nil {
				return err
			}
			done := fmt.Sprintf("SELECT count(*) >= %d FROM %s WHERE id IN (%s)", len(ids), pgx.Identifier{cdcSchema, table}.Sanitize(), strings.Join(ids, ","))
			m, c, err := b.peerThrough(ctx, delay, "rtt_peer_cdc", cdcTopic, int64(len(ids)), d.records,
				"PEER_TABLE="+table, "PEER_SCHEMA="+cdcSchema, "PEER_CREATE_TABLE=0", "PEER_INSERT_MODE=upsert", "PEER_PK_MODE=record_key",
				"PEER_DELETE_ENABLED=true", "PEER_KEY_CONVERTER=json", "PEER_DONE_SQL="+done, "PEER_UNNEST=false", "PEER_REDUCTION=true")
			if err != nil {
				return err
			}
			v, err := b.verifyCDC(ctx, d, table)
			if err != nil {
				return err
			}
			add(RTTRun{Contender: "peer_cdc", DelayMs: delayMs(delay), RecordsPerSecond: m.RecordsPerSecond, Records: m.Records,
				Seconds: m.Seconds, Verified: v.String()}, c)
			return nil
		})
		if peer != "1" {
			continue
		}
		b.phase("rtt_peer_"+dl, func() error {
			table := "rtt_peer_" + strings.NewReplacer(".", "_", "µ", "u").Replace(dl)
			m, c, err := b.peerThrough(ctx, delay, "rtt_peer", envTopic, n, -1,
				"PEER_TABLE="+table, "PEER_SCHEMA=bench", "PEER_UNNEST=true")
			if err != nil {
				return err
			}
			add(RTTRun{Contender: "peer", DelayMs: delayMs(delay), RecordsPerSecond: m.RecordsPerSecond, Records: m.Records, Seconds: m.Seconds}, c)
			return nil
		})
	}
	return nil
}

// peerThrough runs the peer with its DATABASE_URL through a delay proxy of this process and
// returns the round trips the proxy counted (all of the peer's connections, whole run).
func (b *bench) peerThrough(ctx context.Context, delay time.Duration, name, topic string, expected, records int64, env ...string) (*Measurement, *RTTCount, error) {
	w, proxied, err := startRTT(b.url, delay)
	if err != nil {
		return nil, nil, err
	}
	defer w.proxy.Close()
	m, err := b.runPeer(ctx, name, "Debezium JDBC sink on Kafka Connect, PostgreSQL "+delay.String()+" away each way",
		topic, expected, records, append(env, "DATABASE_URL="+proxied)...)
	if err != nil {
		return nil, nil, err
	}
	return m, &RTTCount{RoundTrips: w.proxy.RoundTrips(), Turns: w.proxy.Turns()}, nil
}

// printRoundTrips prints the round_trips section.
func printRoundTrips(rt *RoundTrips) {
	if rt == nil || len(rt.Runs) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("round trips (PostgreSQL behind a delay proxy):")
	for _, r := range rt.Runs {
		extra := ""
		if r.RoundTripsPerBatch > 0 {
			extra = fmt.Sprintf(", %.2f round trips per batch (%d batches)", r.RoundTripsPerBatch, r.Batches)
		} else if r.RoundTripsPer1000Recs > 0 {
			extra = fmt.Sprintf(", %.1f round trips per 1000 records", r.RoundTripsPer1000Recs)
		}
		fmt.Printf("  %-9s %4.1f ms each way: %8.0f records/s, %.2f of no delay%s\n", r.Contender, r.DelayMs, r.RecordsPerSecond, r.RatioToNoDelay, extra)
	}
	for _, c := range slices.Sorted(maps.Keys(rt.Statements)) {
		fmt.Printf("  %s, round trips per batch by statement:\n", c)
		st := rt.Statements[c]
		keys := slices.SortedFunc(maps.Keys(st), func(x, y string) int { return cmp.Compare(st[y], st[x]) })
		for _, k := range keys {
			if st[k] >= 0.01 {
				fmt.Printf("    %6.2f  %s\n", st[k], k)
			}
		}
	}
	_ = os.Stdout.Sync()
}
