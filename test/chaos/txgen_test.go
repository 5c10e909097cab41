package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Scenario 24's input: transfers between accounts kept in two source tables, public.accounts_a
// and public.accounts_b, as Debezium 3.6.1's PostgreSQL connector sends them with
// provide.transaction.metadata=true and Connect's JsonConverter (schemas enabled): each
// table's changes on its own topic, keyed by id, and the BEGIN and END of every source
// transaction on the one-partition <prefix>.transaction topic. The shapes are those of the
// real connector's records in sink/cdc/internal/txn/testdata/debezium: every record of a
// transaction carries "<xid>:<its own LSN>" as its id (the END's LSN is the commit's), each
// change's source.sequence is [the previous transaction's commit LSN (null for the first
// one streamed), its LSN], and the END counts the changes per data collection
// ("public.accounts_a"). A Debezium restart (resend) appends again, verbatim, every record of
// the last transactions, as the connector does when it resumes from its last flushed
// offsets, sometimes after a BEGIN and part of the changes of a transaction it was streaming
// when it stopped (testdata/debezium-restart).

// txTables are the source tables; topic index i is table i's, txTopicIdx the transaction
// topic's.
var txTables = []string{"accounts_a", "accounts_b"}

const txTopicIdx = 2

// txRec is one generated record.
type txRec struct {
	topic int // index in txGen.topics()
	k, v  []byte
	// Changes and snapshot reads: the account and its balance after the change, in cents.
	change  bool
	table   int
	id      int
	balance int64
	lsn     int64 // the change's source LSN
}

// txGen is the generator: the source's balances in memory.
type txGen struct {
	rng      *rand.Rand
	prefix   string
	accounts int       // per table, ids 1..accounts
	balance  [][]int64 // [table][id-1], cents
	lsn      int64     // the last LSN used
	commit   int64     // the last commit LSN; 0 before the first streamed transaction
	xid      int64     // the last xid used
	recs     []txRec   // everything generated, in order, the resends included
	txs      [][2]int  // each distinct source transaction's records: recs[from:to]
	partial  []txRec   // set by crash: the start of the next transaction, already in recs
	keySch   [][]byte  // per table
	valSch   [][]byte  // per table
	total    int64     // the constant sum of every balance
	resent   int       // transactions sent again
}

func newTxGen(rng *rand.Rand, prefix string, accounts int) *txGen {
	g := &txGen{rng: rng, prefix: prefix, accounts: accounts, lsn: 0x2600000 + rng.Int64N(1<<20)*8, xid: 750 + rng.Int64N(1000)}
	for _, t := range txTables {
		name := prefix + ".public." + t
		g.keySch = append(g.keySch, []byte(fmt.Sprintf(txKeySchema, name)))
		g.valSch = append(g.valSch, []byte(fmt.Sprintf(txValueSchema, name, name, name)))
		g.balance = append(g.balance, make([]int64, accounts))
	}
	return g
}

func (g *txGen) topics() []string {
	return []string{g.prefix + ".public." + txTables[0], g.prefix + ".public." + txTables[1], g.prefix + ".transaction"}
}

// The schemas of the fixtures' records (testdata/debezium), for the tables' columns: id
// int4 and balance numeric(12,2).
const txKeySchema = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"%s.Key"}`

const txValueSchema = `{"type":"struct","fields":[` +
	`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"balance"}],"optional":true,"name":"%s.Value","field":"before"},` +
	`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"balance"}],"optional":true,"name":"%s.Value","field":"after"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"},{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"},{"type":"string","optional":true,"field":"origin"},{"type":"int64","optional":true,"field":"origin_lsn"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},` +
	`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"}],` +
	`"optional":false,"name":"%s.Envelope","version":2}`

const txMarkerKeySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`

const txMarkerValueSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`

// The payloads, in the fixtures' field order.
type txSource struct {
	Version   string `json:"version"`
	Connector string `json:"connector"`
	Name      string `json:"name"`
	TsMs      int64  `json:"ts_ms"`
	Snapshot  string `json:"snapshot"`
	DB        string `json:"db"`
	Sequence  string `json:"sequence"`
	TsUs      int64  `json:"ts_us"`
	TsNs      int64  `json:"ts_ns"`
	Schema    string `json:"schema"`
	Table     string `json:"table"`
	TxID      int64  `json:"txId"`
	LSN       int64  `json:"lsn"`
	Xmin      *int64 `json:"xmin"`
	Origin    *int64 `json:"origin"`
	OriginLSN *int64 `json:"origin_lsn"`
}

type txBlock struct {
	ID                  string `json:"id"`
	TotalOrder          int64  `json:"total_order"`
	DataCollectionOrder int64  `json:"data_collection_order"`
}

type txRow struct {
	ID      int    `json:"id"`
	Balance string `json:"balance"`
}

type txChange struct {
	Before      *txRow   `json:"before"`
	After       *txRow   `json:"after"`
	Source      txSource `json:"source"`
	Transaction *txBlock `json:"transaction"`
	Op          string   `json:"op"`
	TsMs        int64    `json:"ts_ms"`
	TsUs        int64    `json:"ts_us"`
	TsNs        int64    `json:"ts_ns"`
}

type txCollection struct {
	DataCollection string `json:"data_collection"`
	EventCount     int64  `json:"event_count"`
}

type txMarker struct {
	Status          string         `json:"status"`
	ID              string         `json:"id"`
	EventCount      *int64         `json:"event_count"`
	DataCollections []txCollection `json:"data_collections"`
	TsMs            int64          `json:"ts_ms"`
}

// envelope is {"schema": schema, "payload": payload}, schema as given.
func envelope(schema []byte, payload any) []byte {
	return []byte(`{"schema":` + string(schema) + `,"payload":` + string(mustJSON(payload)) + `}`)
}

func (g *txGen) change(table, id int, op, snapshot, seq string, block *txBlock) txRec {
	now := time.Now()
	src := txSource{Version: "3.6.1.Final", Connector: "postgresql", Name: g.prefix, TsMs: now.UnixMilli(), Snapshot: snapshot,
		DB: "bank", Sequence: seq, TsUs: now.UnixMicro(), TsNs: now.UnixNano(), Schema: "public", Table: txTables[table],
		TxID: g.xid, LSN: g.lsn}
	bal := g.balance[table][id-1]
	v := envelope(g.valSch[table], txChange{After: &txRow{ID: id, Balance: kCents.payload(bal).(string)}, Source: src,
		Transaction: block, Op: op, TsMs: now.UnixMilli(), TsUs: now.UnixMicro(), TsNs: now.UnixNano()})
	k := envelope(g.keySch[table], map[string]int{"id": id})
	return txRec{topic: table, k: k, v: v, change: true, table: table, id: id, balance: bal, lsn: g.lsn}
}

func (g *txGen) marker(status string, lsn int64, count *int64, cols []txCollection) txRec {
	id := strconv.FormatInt(g.xid, 10) + ":" + strconv.FormatInt(lsn, 10)
	return txRec{topic: txTopicIdx, k: envelope([]byte(txMarkerKeySchema), map[string]string{"id": id}),
		v: envelope([]byte(txMarkerValueSchema), txMarker{Status: status, ID: id, EventCount: count, DataCollections: cols,
			TsMs: time.Now().UnixMilli()})}
}

// snapshot reads every account (op r, no transaction), each with a balance of 1000.00.
func (g *txGen) snapshot() {
	g.xid++
	g.lsn += 8 * (1 + g.rng.Int64N(40))
	n := len(txTables) * g.accounts
	i := 0
	for ti := range txTables {
		for id := 1; id <= g.accounts; id++ {
			g.balance[ti][id-1] = 100_000
			g.total += 100_000
			mark := "true"
			switch {
			case i == 0:
				mark = "first"
			case i == n-1:
				mark = "last"
			case id == g.accounts:
				mark = "last_in_data_collection"
			}
			g.recs = append(g.recs, g.change(ti, id, "r", mark, fmt.Sprintf(`[null,"%d"]`, g.lsn), nil))
			i++
		}
	}
}

// tx generates one transfer, one source transaction: a debit and one to three credits
// (one in 200: 130 to 199 credits), the same account possibly twice, between accounts of
// either table.
func (g *txGen) tx() {
	from := len(g.recs)
	if g.partial != nil { // the rest of the transaction a crash interrupted: sent again whole
		g.recs = append(g.recs, g.partial...)
		g.txs = append(g.txs, [2]int{from, len(g.recs)})
		g.partial = nil
		return
	}
	g.recs = append(g.recs, g.build()...)
	g.txs = append(g.txs, [2]int{from, len(g.recs)})
}

// build returns the records of the next source transaction and moves the source on.
func (g *txGen) build() []txRec {
	g.xid++
	type leg struct {
		table, id int
		delta     int64
	}
	pick := func() (int, int) { return g.rng.IntN(len(txTables)), 1 + g.rng.IntN(g.accounts) }
	credits := 1
	switch k := g.rng.IntN(200); {
	case k == 0: // now and then one past max_held_events (scenario 24's txMaxHeld): it streams
		credits = 130 + g.rng.IntN(70)
	case k < 40:
		credits += 1 + g.rng.IntN(2)
	}
	amount := int64(credits + g.rng.IntN(5000)) // at least a cent per credit
	t, id := pick()
	legs := []leg{{t, id, -amount}}
	left := amount
	for i := 0; i < credits; i++ {
		part := left
		if i < credits-1 {
			part = 1 + g.rng.Int64N(left-int64(credits-1-i))
		}
		left -= part
		t, id := pick()
		legs = append(legs, leg{t, id, part})
	}
	seq0 := "null"
	if g.commit != 0 {
		seq0 = strconv.Quote(strconv.FormatInt(g.commit, 10))
	}
	g.lsn += 8 * (1 + g.rng.Int64N(40))
	out := []txRec{g.marker("BEGIN", g.lsn, nil, nil)}
	perTable := make([]int64, len(txTables))
	var cols []txCollection
	for i, l := range legs {
		if i > 0 {
			g.lsn += 8 * (1 + g.rng.Int64N(20))
		}
		g.balance[l.table][l.id-1] += l.delta
		if perTable[l.table] == 0 {
			cols = append(cols, txCollection{DataCollection: "public." + txTables[l.table]})
		}
		perTable[l.table]++
		block := &txBlock{ID: fmt.Sprintf("%d:%d", g.xid, g.lsn), TotalOrder: int64(i + 1), DataCollectionOrder: perTable[l.table]}
		out = append(out, g.change(l.table, l.id, "u", "false", fmt.Sprintf(`[%s,"%d"]`, seq0, g.lsn), block))
	}
	for i := range cols {
		for ti, t := range txTables {
			if cols[i].DataCollection == "public."+t {
				cols[i].EventCount = perTable[ti]
			}
		}
	}
	g.lsn += 8 * (1 + g.rng.Int64N(4))
	g.commit = g.lsn
	n := int64(len(legs))
	return append(out, g.marker("END", g.lsn, &n, cols))
}

// resend is a Debezium restart: every record of the last n transactions sent again, in
// their order, and with crash, first the BEGIN and part of the changes of the next
// transaction (the one being streamed when the connector stopped; tx then sends it again
// whole). It returns how many records it appended.
func (g *txGen) resend(n int, crash bool) int {
	from := len(g.recs)
	if crash {
		next := g.build()
		g.partial = next
		g.recs = append(g.recs, next[:1+g.rng.IntN(len(next)-2)]...) // the BEGIN and at least one change, no END
	}
	n = min(n, len(g.txs))
	if n > 0 {
		start := g.txs[len(g.txs)-n][0]
		end := g.txs[len(g.txs)-1][1]
		g.recs = append(g.recs, g.recs[start:end]...)
	}
	g.resent += n
	return len(g.recs) - from
}

// model is the expected replica: each account's balance in its change with the highest
// source LSN among the records generated (re-sent copies carry their first copy's LSN).
func (g *txGen) model() [][]int64 {
	m := make([][]int64, len(txTables))
	for i := range m {
		m[i] = make([]int64, g.accounts)
	}
	last := map[[2]int]int{} // the index of the newest change of each account, by source order
	for i, r := range g.recs {
		if r.change {
			k := [2]int{r.table, r.id}
			if j, ok := last[k]; !ok || r.lsn > g.recs[j].lsn {
				last[k] = i
			}
		}
	}
	for k, i := range last {
		m[k[0]][k[1]-1] = g.recs[i].balance
	}
	return m
}
