package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The verification's expected rows are the rows the produced records give the table.
func TestRSSRowTextMatchesRecords(t *testing.T) {
	for _, i := range []int64{0, 1, 7, 1234, 999_999} {
		var r struct {
			ID       int64  `json:"id"`
			Account  string `json:"account"`
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			TS       string `json:"ts"`
			Note     string `json:"note"`
		}
		if err := json.Unmarshal(appendRecord(nil, i, "normal"), &r); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, r.TS)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{itoa(r.ID), r.Account, itoa(r.Amount), r.Currency, itoa(ts.UnixMilli()), r.Note}, "|")
		if got := string(rssRowText(nil, i)); got != want {
			t.Errorf("record %d: row text %q, want %q", i, got, want)
		}
	}
	if rssHash(2) != rssHash(2) || rssHash(2) == rssHash(3) {
		t.Error("rssHash is not a function of n")
	}
}

func itoa(v int64) string { return string(appendPadded(nil, v, 0)) }

func TestVmHWM(t *testing.T) {
	status := "Name:\teosink\nVmPeak:\t 2000000 kB\nVmHWM:\t  262144 kB\nVmRSS:\t  100000 kB\n"
	if got := vmHWMKiB(status); got != 262144 {
		t.Errorf("vmHWMKiB = %d, want 262144", got)
	}
	if got := vmHWMKiB("Name:\tx\n"); got != 0 {
		t.Errorf("vmHWMKiB without the line = %d, want 0", got)
	}
}

func TestRSSTarget(t *testing.T) {
	ok := &Verification{OK: true}
	for _, c := range []struct {
		name   string
		m      *Measurement
		failed string
		met    bool
		actual string
	}{
		{"under", &Measurement{PeakRSSMiB: 200, RecordsPerSecond: 100000, Verification: ok}, "", true, "200 MiB (100000 records/s)"},
		{"at", &Measurement{PeakRSSMiB: 256, Verification: ok}, "", true, "256 MiB"},
		{"over", &Measurement{PeakRSSMiB: 256.6, Verification: ok}, "", false, "257 MiB"},
		{"unverified", &Measurement{PeakRSSMiB: 100}, "", false, "rows not verified"},
		{"mismatch", &Measurement{PeakRSSMiB: 100, Verification: &Verification{}}, "", false, "rows not verified"},
		{"failed", &Measurement{PeakRSSMiB: 100, Verification: ok}, "exit 1\nmore", false, "phase failed: exit 1 (...)"},
		{"not measured", nil, "preload: broken", false, "not measured: preload: broken"},
		{"no reading", &Measurement{Verification: ok}, "", false, "0 MiB"},
	} {
		tg := rssTarget(c.m, 256, c.failed)
		if tg.Met != c.met || !strings.Contains(tg.Actual, c.actual) {
			t.Errorf("%s: %+v, want met %t and %q in actual", c.name, tg, c.met, c.actual)
		}
		if tg.Goal != "peak RSS of eosink run <= 256 MiB at 256 partitions" {
			t.Errorf("%s: goal %q", c.name, tg.Goal)
		}
	}
}

func TestRSSPipeline(t *testing.T) {
	y := rssPipeline("127.0.0.1:1", "postgres://x", "g", "topic", "bench.rss", map[string]string{"b.x": "2", "a.y": "1"})
	for _, want := range []string{"commit_to_kafka: true\n", "  properties:\n    a.y: \"1\"\n    b.x: \"2\"\n", "type: table\n", "    note: value.note\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("pipeline file lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(rssPipeline("b", "u", "g", "t", "s.t", nil), "properties") {
		t.Error("properties without any")
	}
	if got := pairs("a=1, b=x=y,,c"); len(got) != 2 || got["a"] != "1" || got["b"] != "x=y" {
		t.Errorf("pairs = %v", got)
	}
}
