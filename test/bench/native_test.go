package main

import (
	"encoding/base64"
	"encoding/json"
	"math/big"
	"reflect"
	"testing"
	"time"
)

// The workload is deterministic, every update changes only amount, qty, note and updated_at
// of the row's state before it, updated_at grows with every update, and data() is the state
// after the last update of each row.
func TestNativeWorkload(t *testing.T) {
	w := nativeGenerate(50, 400)
	if !reflect.DeepEqual(w, nativeGenerate(50, 400)) {
		t.Fatal("two workloads of the same size differ")
	}
	if len(w.initial) != 50 || len(w.updates) != 400 {
		t.Fatalf("%d rows, %d updates", len(w.initial), len(w.updates))
	}
	cur := append([]*cdcRow(nil), w.initial...)
	var last int64
	for _, r := range w.initial {
		last = max(last, r.updated)
	}
	for k, u := range w.updates {
		if u.id < 1 || u.id > 50 {
			t.Fatalf("update %d: id %d", k, u.id)
		}
		if u.before != cur[u.id-1] {
			t.Fatalf("update %d: before is not the row's state before it", k)
		}
		if u.after.account != u.before.account || u.after.booked != u.before.booked {
			t.Fatalf("update %d changes account or booked_at", k)
		}
		if u.after.updated <= last {
			t.Fatalf("update %d: updated_at %d not after %d", k, u.after.updated, last)
		}
		last = u.after.updated
		cur[u.id-1] = u.after
	}
	d := w.data()
	if len(d.final) != 50 {
		t.Fatalf("final state has %d rows", len(d.final))
	}
	for i, r := range cur {
		if d.final[int64(i)+1] != r {
			t.Fatalf("final state of %d is not its last update", i+1)
		}
	}
}

func TestNativeUpdateSQL(t *testing.T) {
	note := "it's"
	u := nativeUpdate{id: 42, after: &cdcRow{cents: -5, qty: 7, note: &note, updated: cdcEpoch + 1_000_001}}
	want := `UPDATE t SET amount = -0.05, qty = 7, note = 'it''s', updated_at = '2026-11-30 07:00:01.000001Z' WHERE id = 42`
	if got := nativeUpdateSQL("t", u); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	u.after = &cdcRow{cents: 123456, updated: cdcEpoch}
	want = `UPDATE t SET amount = 1234.56, qty = 0, note = NULL, updated_at = '2026-11-30 07:00:00.000000Z' WHERE id = 42`
	if got := nativeUpdateSQL("t", u); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// An update's change event carries the row before and after it, op "u", as eos_cdc's.
func TestNativeEvent(t *testing.T) {
	w := nativeGenerate(10, 20)
	u := w.updates[7]
	var ev struct {
		Payload struct {
			Op            string `json:"op"`
			Before, After *struct {
				ID        int64   `json:"id"`
				Account   string  `json:"account"`
				Amount    string  `json:"amount"`
				Qty       int32   `json:"qty"`
				Note      *string `json:"note"`
				UpdatedAt string  `json:"updated_at"`
				BookedAt  int64   `json:"booked_at"`
			}
			Source struct {
				LSN int64 `json:"lsn"`
			} `json:"source"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(appendCDCValue(nil, "u", u.id, u.before, u.after, oneTxPerChange(8)), &ev); err != nil {
		t.Fatal(err)
	}
	p := ev.Payload
	if p.Op != "u" || p.Before == nil || p.After == nil || p.After.ID != u.id || p.Source.LSN != oneTxPerChange(8).lsn {
		t.Fatalf("event: %+v", p)
	}
	for _, c := range []struct {
		row *cdcRow
		got any
	}{{u.before, p.Before}, {u.after, p.After}} {
		g := reflect.ValueOf(c.got).Elem()
		raw, _ := base64.StdEncoding.DecodeString(g.FieldByName("Amount").String())
		cents := new(big.Int).SetBytes(raw)
		if len(raw) > 0 && raw[0]&0x80 != 0 {
			cents.Sub(cents, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
		}
		ts, err := time.Parse(time.RFC3339Nano, g.FieldByName("UpdatedAt").String())
		if err != nil {
			t.Fatal(err)
		}
		note, _ := g.FieldByName("Note").Interface().(*string)
		if cents.Int64() != c.row.cents || int32(g.FieldByName("Qty").Int()) != c.row.qty || ts.UnixMicro() != c.row.updated ||
			g.FieldByName("BookedAt").Int() != c.row.booked || g.FieldByName("Account").String() != c.row.account ||
			(note == nil) != (c.row.note == nil) || (note != nil && *note != *c.row.note) {
			t.Fatalf("event row %+v is not %+v", g.Interface(), c.row)
		}
	}
}

// eos_cdc_vs_native_apply is eos_cdc_native's rate over native_apply's, in the report's
// ratios, and left out when either was not measured.
func TestNativeRatio(t *testing.T) {
	t.Setenv("BENCH_PEER", "0")
	b := &bench{}
	b.init()
	b.rep.Measurements["native_apply"] = &Measurement{RecordsPerSecond: 20_000}
	b.rep.Measurements["eos_cdc_native"] = &Measurement{RecordsPerSecond: 30_000}
	b.summarize()
	if got := b.rep.Ratios["eos_cdc_vs_native_apply"]; got != 1.5 {
		t.Fatalf("eos_cdc_vs_native_apply = %v, want 1.5", got)
	}
	if got := nativeRatio(b.rep.Measurements["eos_cdc_native"], b.rep.Measurements["native_apply"]); got != 1.5 {
		t.Fatalf("nativeRatio = %v", got)
	}
	delete(b.rep.Measurements, "native_apply")
	b.rep.Ratios = map[string]float64{}
	b.summarize()
	if v, ok := b.rep.Ratios["eos_cdc_vs_native_apply"]; ok || nativeRatio(b.rep.Measurements["eos_cdc_native"], nil) != 0 {
		t.Fatalf("eos_cdc_vs_native_apply = %v without native_apply", v)
	}
}
