package main

import (
	"context"
	"math/big"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Connect's Decimal carries the unscaled value as Java's BigInteger.toByteArray does: the
// shortest big-endian two's complement.
func TestDecimalBytes(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 127, 128, -128, -129, 255, 256, -32768, -32769, 1 << 40, -(1 << 40), 999_999_999_999} {
		b := decimalBytes(v)
		got := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			got.Sub(got, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		if got.Int64() != v {
			t.Errorf("%d: bytes %x read back as %d", v, b, got)
		}
		if len(b) > 1 && ((b[0] == 0 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
			t.Errorf("%d: bytes %x are not the shortest", v, b)
		}
	}
}

// The verification finds a table equal to the expected state, and counts what differs in
// one that is not: a missing key, an extra key and a changed row.
func TestVerifyCDC(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL (make test starts one)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	saved := cdcSchema
	cdcSchema = "tt_bench_verify_cdc"
	defer func() { cdcSchema = saved }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS tt_bench_verify_cdc CASCADE; CREATE SCHEMA tt_bench_verify_cdc"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS tt_bench_verify_cdc CASCADE") })

	note := `a "quoted" note, with | and \ and é`
	d := &cdcData{final: map[int64]*cdcRow{
		1: {account: "acct-0001", cents: -50, qty: 3, note: &note, updated: cdcEpoch + 123456, booked: cdcEpoch - 1},
		2: {account: "acct-0002", cents: 1_234_567_890, qty: 0, updated: cdcEpoch, booked: cdcEpoch + 999_999},
		7: {account: "acct-0007", cents: 0, qty: 999, updated: cdcEpoch - 86_400_000_000, booked: 0},
	}}
	b := &bench{url: url}
	if err := b.loadExpected(ctx, d); err != nil { // also checks that Go and SQL hash alike
		t.Fatal(err)
	}
	if err := b.cdcTable(ctx, "replica"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO tt_bench_verify_cdc.replica (id, account, amount, qty, note, updated_at, booked_at)
SELECT id, account, amount, qty, note, updated_at, booked_at FROM tt_bench_verify_cdc.cdc_expected`); err != nil {
		t.Fatal(err)
	}
	v, err := b.verifyCDC(ctx, d, "replica")
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || v.Rows != 3 {
		t.Fatalf("equal table: %s", v)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM tt_bench_verify_cdc.replica WHERE id = 2;
UPDATE tt_bench_verify_cdc.replica SET booked_at = booked_at + interval '1 microsecond' WHERE id = 7;
INSERT INTO tt_bench_verify_cdc.replica (id, account, amount, qty, updated_at, booked_at) VALUES (9, 'x', 1, 1, now(), now())`); err != nil {
		t.Fatal(err)
	}
	v, err = b.verifyCDC(ctx, d, "replica")
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || v.Rows != 3 || v.Hash == v.ExpectedHash || v.Missing != 1 || v.Extra != 1 || v.Different != 1 {
		t.Fatalf("changed table: %s", v)
	}
	t.Log(v)
}

// On a machine running several test beds, serviceCPU counts this run's broker and database.
func TestServiceCPUFindsOurs(t *testing.T) {
	brokers, url := os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), os.Getenv("DATABASE_URL")
	if brokers == "" || url == "" {
		t.Fatal("KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL must be set (make test starts the services)")
	}
	findServices(context.Background(), brokers, url)
	defer func() { services.kafkaPort, services.postmaster = "", "" }()
	if services.postmaster == "" {
		t.Fatal("the postmaster of DATABASE_URL was not found")
	}
	k, p := serviceCPU()
	if k <= 0 || p <= 0 {
		t.Fatalf("broker %.2f s, postgres %.2f s: this run's services not found", k, p)
	}
	ak, ap := func() (float64, float64) {
		saved := services
		services.kafkaPort, services.postmaster = "", ""
		defer func() { services = saved }()
		return serviceCPU()
	}()
	t.Logf("this bed: broker %.1f s, postgres %.1f s; every bed on the machine: %.1f s, %.1f s", k, p, ak, ap)
	if k > ak+0.5 || p > ap+0.5 {
		t.Fatal("more CPU for one bed than for all")
	}
}
