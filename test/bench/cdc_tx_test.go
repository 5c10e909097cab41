package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// eos_cdc's stream keeps its bytes: one transaction per change, no transaction block.
func TestCDCValueWithoutMetadata(t *testing.T) {
	note := "n"
	r := &cdcRow{account: "acct-0001", cents: 1234, qty: 2, note: &note, updated: cdcEpoch, booked: cdcEpoch}
	v := string(appendCDCValue(nil, "u", 7, r, r, oneTxPerChange(3)))
	lsn := 0x2000000 + 3*0x68
	for _, want := range []string{
		fmt.Sprintf(`"sequence":"[\"%d\",\"%d\"]"`, lsn-0x30, lsn), `"txId":1003`, fmt.Sprintf(`"lsn":%d`, lsn),
		`"xmin":null},"transaction":null,"op":"u"`,
	} {
		if !strings.Contains(v, want) {
			t.Errorf("value lacks %s:\n%s", want, v)
		}
	}
	var anyV map[string]any
	if err := json.Unmarshal([]byte(v), &anyV); err != nil {
		t.Fatal(err)
	}
}

type txEnvelope struct {
	Payload struct {
		Op     string `json:"op"`
		Source struct {
			Sequence string `json:"sequence"`
			LSN      int64  `json:"lsn"`
			TxID     int64  `json:"txId"`
			Schema   string `json:"schema"`
			Table    string `json:"table"`
			TsMs     int64  `json:"ts_ms"`
		} `json:"source"`
		Transaction *struct {
			ID              string `json:"id"`
			TotalOrder      int64  `json:"total_order"`
			CollectionOrder int64  `json:"data_collection_order"`
		} `json:"transaction"`
	} `json:"payload"`
}

type txMarker struct {
	Payload struct {
		Status      string `json:"status"`
		ID          string `json:"id"`
		EventCount  *int64 `json:"event_count"`
		Collections []struct {
			Name       string `json:"data_collection"`
			EventCount int64  `json:"event_count"`
		} `json:"data_collections"`
		TsMs int64 `json:"ts_ms"`
	} `json:"payload"`
}

func idParts(t *testing.T, id string) (int64, int64) {
	t.Helper()
	x, l, ok := strings.Cut(id, ":")
	xid, err1 := strconv.ParseInt(x, 10, 64)
	lsn, err2 := strconv.ParseInt(l, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("id %q is not <xid>:<lsn>", id)
	}
	return xid, lsn
}

// eos_cdc_tx's stream, as the real connector writes it (the fixtures of
// sink/cdc/internal/txn/testdata/debezium): BEGIN, the changes with their transaction
// blocks and source.sequence, END with event_count and data_collections; tombstones in no
// transaction; commit LSNs increasing, each the next transaction's sequence[0].
func TestCDCTxStream(t *testing.T) {
	var msgs []*kafka.Message
	st := cdcStream{topic: "data", txTopic: "data.transaction", perTx: 3}
	d := &cdcData{ops: map[string]int64{}}
	o := &cdcOut{produce: func(m *kafka.Message) error { msgs = append(msgs, m); return nil }, st: st, partitions: 4, d: d}
	r := &cdcRow{account: "a", updated: cdcEpoch, booked: cdcEpoch}
	var seq int64
	change := func(op string, id int64) {
		seq++
		if err := o.change(op, id, r, r, seq); err != nil {
			t.Fatal(err)
		}
	}
	change("c", 1)
	change("c", 2)
	change("d", 1)
	if err := o.tombstone(1); err != nil { // right after its delete, before the END
		t.Fatal(err)
	}
	change("u", 2)
	change("c", 3)
	if err := o.flush(); err != nil { // the last transaction, of 2
		t.Fatal(err)
	}
	if d.records != 6 || d.transactions != 2 || d.markers != 4 {
		t.Fatalf("records %d transactions %d markers %d, want 6, 2, 4", d.records, d.transactions, d.markers)
	}
	var lastCommit, lastLSN int64
	var lastOp string
	var lastKey []byte
	var open bool
	var xid, count int64
	changes := 0
	for _, m := range msgs {
		switch {
		case *m.TopicPartition.Topic == st.txTopic:
			if m.TopicPartition.Partition != 0 {
				t.Errorf("marker on partition %d", m.TopicPartition.Partition)
			}
			var mk txMarker
			if err := json.Unmarshal(m.Value, &mk); err != nil {
				t.Fatal(err)
			}
			x, lsn := idParts(t, mk.Payload.ID)
			switch mk.Payload.Status {
			case "BEGIN":
				if open || mk.Payload.EventCount != nil || mk.Payload.Collections != nil {
					t.Fatalf("BEGIN %+v inside a transaction or with counts", mk.Payload)
				}
				open, xid, count = true, x, 0
				if lsn <= lastCommit {
					t.Errorf("BEGIN LSN %d not after the last commit %d", lsn, lastCommit)
				}
			case "END":
				n := int64(len(mk.Payload.Collections))
				if !open || x != xid || mk.Payload.EventCount == nil || *mk.Payload.EventCount != count || n != 1 ||
					mk.Payload.Collections[0].Name != "public.accounts" || mk.Payload.Collections[0].EventCount != count {
					t.Fatalf("END %+v of xid %d with %d changes", mk.Payload, xid, count)
				}
				if lsn <= lastLSN {
					t.Errorf("commit LSN %d not after the last change's %d", lsn, lastLSN)
				}
				open, lastCommit, lastOp = false, lsn, ""
			default:
				t.Fatalf("status %q", mk.Payload.Status)
			}
		case m.Value == nil:
			if !open || lastOp != "d" || string(m.Key) != string(lastKey) {
				t.Errorf("a tombstone not right after its delete, in its transaction: after %q of %s", lastOp, lastKey)
			}
		default:
			var ev txEnvelope
			if err := json.Unmarshal(m.Value, &ev); err != nil {
				t.Fatal(err)
			}
			p := ev.Payload
			if !open || p.Transaction == nil {
				t.Fatalf("change outside a transaction: %s", m.Value)
			}
			count++
			changes++
			x, lsn := idParts(t, p.Transaction.ID)
			prev := "null"
			if lastCommit > 0 {
				prev = `"` + strconv.FormatInt(lastCommit, 10) + `"`
			}
			if x != xid || p.Source.TxID != xid || lsn != p.Source.LSN || lsn <= lastLSN || p.Transaction.TotalOrder != count ||
				p.Transaction.CollectionOrder != count || p.Source.Schema+"."+p.Source.Table != "public.accounts" ||
				p.Source.Sequence != "["+prev+`,"`+strconv.FormatInt(lsn, 10)+`"]` {
				t.Fatalf("change %d of xid %d after commit %d: %+v", count, xid, lastCommit, p)
			}
			lastLSN, lastOp, lastKey = lsn, p.Op, m.Key
		}
	}
	if open || changes != 5 {
		t.Fatalf("open %v, %d changes, want closed and 5", open, changes)
	}
}
