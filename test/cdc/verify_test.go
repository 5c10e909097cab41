package cdc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/examples/cdc/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink/cdc"
)

// TestCDCVerify: a replica made by the real pipeline (Debezium with the JsonConverter into
// `eosink run` with the cdc plugin, replica tables from the source's DDL). `eosink cdc
// verify` finds it equal (exit 0, 0 differences); cdc.Verify finds 0 differences while the
// source keeps changing under it (in small chunks, so that changes land between the reads);
// then a row changed by hand in the replica, one deleted and one extra are each reported by
// key, with exit 1.
func TestCDCVerify(t *testing.T) {
	e := testbed.Require(t)
	ctx := context.Background()
	srcURL, _ := testbed.SourceDatabase(t, e, "verifysrc")
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if _, err := src.Exec(ctx, app.SourceDDL); err != nil {
		t.Fatal(err)
	}
	w, err := app.NewWorkload(ctx, src, 5)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		t.Helper()
		for range n {
			if err := w.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps(150)
	db := testbed.Pool(t, e)
	replica, offsets := testbed.Schema(t, e), testbed.Schema(t, e)
	if _, err := db.Exec(ctx, app.ReplicaDDL(pgx.Identifier{replica}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	d := testbed.RunDebezium(t, testbed.DebeziumOptions{Brokers: e.Brokers, SourceURL: srcURL,
		Tables: []string{"public.accounts", "public.lines"}, TopicPrefix: testbed.Name(t, "vfy"),
		Converter: testbed.JSONWithSchemas, Partitions: 1})
	topics := []string{d.Topic("public.accounts"), d.Topic("public.lines")}
	waitTopics(t, e.Brokers, topics)
	config := filepath.Join(t.TempDir(), "pipeline.yaml")
	yaml := fmt.Sprintf(`pipeline: %s
kafka:
  brokers: %s
  group: %s
  topics: [%s]
database:
  url: %s
  schema: %s
sink:
  type: cdc
  table: "%s.$${source.table}"
`, testbed.Name(t, "p"), e.Brokers, testbed.Name(t, "g"), strings.Join(topics, ", "), e.DatabaseURL, offsets, replica)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "migrate", "up", "-config", config)
	sink := testbed.StartProcess(t, eosinkBin, "eosink run", []string{"run", "-config", config})
	defer sink.StopClean(60 * time.Second)
	equal := func(what string) {
		t.Helper()
		testbed.Eventually(t, 3*time.Minute, what, func() (bool, string) {
			c, diff, err := app.Compare(ctx, src, db, replica)
			if err != nil {
				return false, err.Error()
			}
			return app.Equal(c), fmt.Sprint(c, "\n", strings.Join(diff, "\n"))
		})
	}
	equal("the replica equal to the source")

	verify := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(eosinkBin, append([]string{"cdc", "verify", "-config", config, "-table", "public.accounts,public.lines"}, args...)...)
		cmd.Env = append(os.Environ(), "EOSINK_CDC_SOURCE_URL="+srcURL)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		t.Logf("eosink cdc verify:\n%s", out)
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := verify("-chunk", "50"); code != 0 || !strings.Contains(out, ", 0 differences") {
		t.Fatalf("an equal replica: exit %d, want 0 with 0 differences", code)
	}

	// The source changes during the check: nothing is reported.
	plugin, err := cdc.New(cdc.Config{Table: replica + ".${source.table}", PositionsSchema: offsets})
	if err != nil {
		t.Fatal(err)
	}
	srcPool, err := pgxpool.New(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer srcPool.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var changes int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.Step(ctx); err != nil {
				t.Error(err)
				return
			}
			changes++
			time.Sleep(40 * time.Millisecond) // a rate the pipeline keeps up with on a busy machine
		}
	}()
	var rechecked int
	for range 2 {
		rep, err := plugin.Verify(ctx, srcPool, db, cdc.VerifyOptions{Tables: []string{"public.accounts", "public.lines"}, ChunkSize: 7, Wait: 2 * time.Minute})
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		for _, tr := range rep.Tables {
			rechecked += tr.Rechecked
			if tr.Err != nil || tr.Differences() > 0 {
				t.Errorf("while the source changes: %s: %+v", tr.Table, tr)
			}
		}
		for _, d := range rep.Differences {
			t.Errorf("a false report while the source changes: %+v", d)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("2 checks while the source changed (%d source transactions): 0 differences, %d keys in flight re-checked and found equal", changes, rechecked)
	equal("the replica equal to the source after the changes")

	// Changed by hand: one row updated, one deleted, one extra.
	ids := make([]int64, 0, 2)
	rows, err := db.Query(ctx, "SELECT id FROM "+pgx.Identifier{replica, "accounts"}.Sanitize()+" ORDER BY id LIMIT 2")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(ids) != 2 {
		t.Fatalf("replica ids %v: %v", ids, err)
	}
	acc := pgx.Identifier{replica, "accounts"}.Sanitize()
	for _, q := range []string{
		"UPDATE " + acc + " SET note = 'changed by hand' WHERE id = " + fmt.Sprint(ids[0]),
		"DELETE FROM " + acc + " WHERE id = " + fmt.Sprint(ids[1]),
		"INSERT INTO " + acc + " (id, version) VALUES (999999999, 1)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	out, code := verify("-wait", "3s")
	for _, want := range []string{
		fmt.Sprintf("different %s key (id)=(%d)", acc, ids[0]),
		fmt.Sprintf("missing   %s key (id)=(%d)", acc, ids[1]),
		fmt.Sprintf("extra     %s key (id)=(999999999)", acc),
		", 3 differences",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if code != 1 {
		t.Errorf("exit %d with differences, want 1", code)
	}
	if strings.Contains(out, "password") || strings.Contains(out, srcURL) {
		t.Error("the output shows a connection string")
	}
}
