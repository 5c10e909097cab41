package table

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink"
)

// BenchmarkEncode is the table plugin's share of the poll -> map -> COPY path, per record:
// a batch of 5,000 of the bench's 150-byte JSON records (test/bench/data.go) mapped to six
// columns and encoded as COPY text, what Write sends to PostgreSQL.
//
//	go test -run '^$' -bench 'BenchmarkEncode' -benchmem -count 6 ./sink/table/
func BenchmarkEncode(b *testing.B) {
	for _, width := range []string{"normal", "wide"} {
		b.Run("width="+width, func(b *testing.B) { benchmarkEncode(b, width) })
	}
}

// BenchmarkEncodeExpr is BenchmarkEncode's normal width with and without three CEL
// expressions: a where (value.amount >= 0), a check (value.currency in [...]) and a column
// normalised by an expression (value.account.replace("acct-", "A")), every record passing
// both. Compare the ns/record of exprs=3 with exprs=0:
//
//	go test -run '^$' -bench 'BenchmarkEncodeExpr' -benchmem -count 6 ./sink/table/
func BenchmarkEncodeExpr(b *testing.B) {
	b.Run("exprs=0", func(b *testing.B) { benchmarkEncode(b, "normal") })
	b.Run("exprs=3", func(b *testing.B) { benchmarkEncode(b, "exprs") })
}

func benchmarkEncode(b *testing.B, width string) {
	const batch = 5000
	cols := map[string]Column{}
	for _, c := range []string{"id", "account", "amount", "currency", "ts", "note"} {
		cols[c] = Column{From: "value." + c}
	}
	c := Config{Table: "bench.t"}
	if width == "exprs" {
		c.Where = `value.amount >= 0`
		c.Check = []Check{{Expr: `value.currency in ["EUR", "USD", "GBP"]`, Message: "unknown currency"}}
		cols["account"] = Column{Expr: `value.account.replace("acct-", "A")`}
	}
	w, err := newWriter(c, pgx.Identifier{"bench", "t"}, cols, nil)
	if err != nil {
		b.Fatal(err)
	}
	note := "payment received, thank you"
	if width == "wide" { // the bench's wide rows: a note of about 1 KiB
		note = strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod ", 15)
	}
	recs := make([]sink.Record, batch)
	for i := range recs {
		recs[i] = sink.Record{Topic: "bench", Offset: int64(i), Key: []byte(fmt.Sprint(i)), Timestamp: time.UnixMilli(1700000000000),
			Value: fmt.Appendf(nil, `{"id":%d,"account":"acct-%04d","amount":%d,"currency":"EUR","ts":"2026-11-30T07:00:00.123Z","note":%q}`,
				i, (i*7919)%10000, i%1000, note)}
	}
	bytea := make([]bool, len(w.cols))
	var row rowFunc // the plain insert's path; BENCH_ENCODE_ROW=1: through Row and AppendCopyRow
	if os.Getenv("BENCH_ENCODE_ROW") == "1" {
		row = w.insertRow(w.readsValue())
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		buf, _, err := w.encode(recs, row, bytea)
		if err != nil {
			b.Fatal(err)
		}
		w.done(buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
	// CPU time (the process's, GC included) rather than elapsed time: on a loaded machine the
	// elapsed time counts the waits for a core too.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/record")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
