package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/console"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/table"
)

// chromium finds Debian's Chromium (make console-test installs it when missing). Its absence
// is a failure, not a skip: the browser tests are part of make test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EOSINK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found (install Debian's chromium: make console-test does, or set EOSINK_CHROMIUM)")
	return ""
}

func runSink(t *testing.T, cfg sink.Config) {
	t.Helper()
	s, err := sink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("a sink did not stop within 60s")
		}
	})
}

// TestConsoleInTheBrowser drives the console's page in a real headless Chromium: it finds the
// stopped partition with its remedy, opens a dead letter, replays it after the fix and sees the
// dead-letter count fall and the row applied; records holding a script and terminal escapes
// are shown as text with no dialog; it moves a position with a reason and finds the audit
// entry. Screenshots of the pages go to the test's temporary folder, or with DOCS=1 to
// docs/console/ (docs/console.md shows them).
func TestConsoleInTheBrowser(t *testing.T) {
	bin := chromium(t)
	e := testbed.Require(t)
	ctx := context.Background()
	schema := testbed.Schema(t, e)
	db := testbed.Pool(t, e)
	if err := sink.Migrate(ctx, e.DatabaseURL, schema); err != nil {
		t.Fatal(err)
	}
	run := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	payTable := pgx.Identifier{schema, "payments"}.Sanitize()
	run("CREATE TABLE " + payTable + " (k text PRIMARY KEY, amount integer NOT NULL CONSTRAINT positive CHECK (amount > 0))")
	run("CREATE TABLE " + pgx.Identifier{schema, "ledger"}.Sanitize() + " (k text, amount integer NOT NULL)")
	payTopic, ledgerTopic := testbed.Topic(t, e, 2), testbed.Topic(t, e, 1)
	const script = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	const escapes = "\x1b[31mred\x1b[0m\x1b]0;title\x07"
	var msgs []testbed.Msg
	for i := range 20 {
		msgs = append(msgs, testbed.Msg{Partition: int32(i % 2), Key: []byte(fmt.Sprintf("ok-%d", i)), Value: []byte(fmt.Sprintf(`{"amount": %d}`, i+1))})
	}
	msgs = append(msgs,
		testbed.Msg{Partition: 0, Key: []byte("refund"), Value: []byte(`{"amount": -5}`)}, // breaks the check: dead-lettered
		testbed.Msg{Partition: 1, Key: []byte("xss"), Value: []byte(script)},              // not JSON
		testbed.Msg{Partition: 1, Key: []byte("tty"), Value: []byte(escapes)})             // not JSON
	testbed.Produce(t, e, payTopic, msgs)
	testbed.Produce(t, e, ledgerTopic, []testbed.Msg{
		{Key: []byte("a"), Value: []byte(`{"amount": 1}`)}, {Key: []byte("b"), Value: []byte(`not json`)}, {Key: []byte("c"), Value: []byte(`{"amount": 3}`)}})
	plugin := func(tbl string) sink.Plugin {
		pl, err := table.New(table.Config{Table: schema + "." + tbl, Columns: map[string]table.Column{
			"k": {From: "key"}, "amount": {From: "value.amount", Required: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base := func(pipeline, topic string) sink.Config {
		return sink.Config{Brokers: e.Brokers, GroupID: testbed.Name(t, pipeline), Pipeline: pipeline, Topics: []string{topic},
			DatabaseURL: e.DatabaseURL, Schema: schema, Kafka: kafka.ConfigMap{"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
			MaxBatchRecords: 50, Logger: logger}
	}
	pay := base("payments", payTopic)
	pay.Plugin, pay.OnPoison, pay.MaxDeadLetterRatio = plugin("payments"), sink.DeadLetter, 1
	runSink(t, pay)
	led := base("ledger", ledgerTopic)
	led.Plugin = plugin("ledger") // stops on poison (the default)
	runSink(t, led)

	cl := admin.New(db, schema, kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	testbed.Eventually(t, 90*time.Second, "3 dead letters of payments and ledger's partition stopped", func() (bool, string) {
		n, err := cl.CountDeadLetters(ctx)
		ps, err2 := cl.List(ctx, "ledger")
		stopped := len(ps) == 1 && ps[0].Stopped != nil
		return err == nil && err2 == nil && n["payments"] == 3 && stopped, fmt.Sprintf("dead letters %v (%v), ledger %+v (%v)", n, err, ps, err2)
	})

	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(aliceToken+" "+alice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := console.LoadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	hist := console.NewHistory(cl, 500*time.Millisecond, 0, logger)
	hctx, stopHistory := context.WithCancel(ctx)
	t.Cleanup(stopHistory)
	go hist.Run(hctx)
	h, err := console.New(console.Config{Admin: cl, Pipeline: "payments", Plugin: plugin("payments"), Mutations: true, Tokens: tk,
		History: hist, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1400, 1000))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	var dialogs atomic.Int32
	var dialogText atomic.Value
	var pageErrors atomic.Int32
	if err := chromedp.Listen(bctx, func(ev any) {
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			dialogs.Add(1)
			dialogText.Store(e.Message)
		case *runtime.EventExceptionThrown:
			pageErrors.Add(1)
			t.Logf("page exception: %s %v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception)
		case *runtime.EventConsoleAPICalled:
			for _, a := range e.Args {
				t.Logf("page console.%s: %s", e.Type, a.Value)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// The browser starts with the first action, on bctx itself (a deadline there would end it).
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium (%s): %v", bin, err)
	}
	// within runs one query with a deadline (an element that never appears fails the test).
	within := func() context.Context {
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		t.Cleanup(cancel)
		return c
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 45*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			dctx, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s: %v\nthe page:\n%s", what, err, page)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(within(), chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	shots := t.TempDir()
	if os.Getenv("DOCS") == "1" {
		shots = filepath.Join("..", "..", "docs", "console")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) {
		t.Helper()
		b, err := chromedp.Run(within(), chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The overview, with the token.
	do("open the console", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), aliceToken), chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pipeline="ledger"]`)))
	if got := text(`tr[data-pipeline="payments"] [data-testid="dead"]`); got != "3" {
		t.Fatalf("payments' dead letters on the overview: %q, want 3", got)
	}
	time.Sleep(1500 * time.Millisecond) // a few history samples, for the rates
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-pipeline="ledger"]`)))
	shot("overview")

	// The stopped partition and its remedy.
	do("open ledger", chromedp.Click(chromedp.CSS(`tr[data-pipeline="ledger"] a`)), chromedp.WaitVisible(chromedp.CSS(`tr.stopped [data-testid="remedy"]`)))
	if st := text(`tr.stopped [data-testid="state"]`); !strings.Contains(st, "stopped: poison") || !strings.Contains(st, "remedy: ") {
		t.Fatalf("ledger's stopped partition shows %q", st)
	}
	shot("pipeline-stopped")

	// A dead letter: shown, then replayed after the fix (the check dropped).
	var refund int64
	if err := db.QueryRow(ctx, "SELECT id FROM "+pgx.Identifier{schema, "dead_letters"}.Sanitize()+" WHERE pipeline = 'payments' AND key = 'refund'").Scan(&refund); err != nil {
		t.Fatal(err)
	}
	do("open payments", chromedp.Navigate(srv.URL+"/#/p/payments"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-dead-letter="%d"]`, refund))))
	shot("pipeline")
	do("open the dead letter", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-dead-letter="%d"] a`, refund))),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="value"]`)))
	if v := text(`[data-testid="value"]`); v != `{"amount": -5}` {
		t.Fatalf("the dead letter's value shows %q", v)
	}
	if er := text(`[data-testid="error-text"]`); !strings.Contains(er, "positive") {
		t.Fatalf("the dead letter's error shows %q, want the check's name", er)
	}
	shot("dead-letter")
	run("ALTER TABLE " + payTable + " DROP CONSTRAINT positive") // the fix
	do("replay it", chromedp.Click(chromedp.CSS(`#main button.primary`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-yes"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-yes"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="result"]`)))
	if r := text(`[data-testid="result"]`); !strings.Contains(r, "replayed 1") || !strings.Contains(r, alice) {
		t.Fatalf("the replay says %q", r)
	}
	var amount int
	if err := db.QueryRow(ctx, "SELECT amount FROM "+payTable+" WHERE k = 'refund'").Scan(&amount); err != nil || amount != -5 {
		t.Fatalf("the replayed row: amount %d, %v; want -5", amount, err)
	}
	do("the replayed dead letter", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dl-state"]`)))
	if st := text(`[data-testid="dl-state"]`); !strings.Contains(st, "replayed by "+alice) {
		t.Fatalf("the replayed dead letter's state shows %q", st)
	}
	if a := text(`#dl-audit`); !strings.Contains(a, "replay") || !strings.Contains(a, alice) {
		t.Fatalf("the replayed dead letter's audit shows %q", a)
	}
	do("back to payments", chromedp.Navigate(srv.URL+"/#/p/payments"), chromedp.WaitVisible(chromedp.CSS(`h1[data-pipeline-page="payments"]`)))
	if n, err := chromedp.Run(within(), chromedp.Evaluate[int](`document.querySelectorAll("#dead-letters tbody tr").length`)); err != nil || n != 2 {
		t.Fatalf("payments lists %d dead letters after the replay (%v), want 2", n, err)
	}

	// Hostile records are text: no dialog, no element made from them.
	for _, c := range []struct{ key, want string }{{"xss", script}, {"tty", `\x1b[31mred\x1b[0m\x1b]0;title\x07`}} {
		var id int64
		if err := db.QueryRow(ctx, "SELECT id FROM "+pgx.Identifier{schema, "dead_letters"}.Sanitize()+" WHERE key = $1", c.key).Scan(&id); err != nil {
			t.Fatal(err)
		}
		do("open "+c.key, chromedp.Navigate(fmt.Sprintf("%s/#/dl/%d", srv.URL, id)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`h1[data-dead-letter-page="%d"]`, id)))) // this one's page, not the last
		if v := text(`[data-testid="value"]`); v != c.want {
			t.Fatalf("dead letter %s shows %q, want %q as text", c.key, v, c.want)
		}
		n, err := chromedp.Run(within(), chromedp.Evaluate[int](`document.querySelectorAll("script").length + document.querySelectorAll("#main img").length`))
		if err != nil || n != 1 {
			t.Fatalf("dead letter %s: %d script and img elements (%v), want only the console's own script", c.key, n, err)
		}
		if c.key == "xss" {
			shot("dead-letter-hostile")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := pageErrors.Load(); n != 0 {
		t.Fatalf("%d exceptions in the page", n)
	}
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened (last: %v)", n, dialogText.Load())
	}

	// A selection: the two hostile ones discarded at once, with a confirmation.
	do("discard the selection", chromedp.Navigate(srv.URL+"/#/p/payments"), chromedp.WaitVisible(chromedp.CSS(`h1[data-pipeline-page="payments"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="select-all"]`)), chromedp.Click(chromedp.CSS(`.actions button:nth-of-type(2)`)),
		chromedp.WaitVisible(chromedp.CSS(`.actions [data-testid="confirm-yes"]`)), chromedp.Click(chromedp.CSS(`.actions [data-testid="confirm-yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-dead-letter]`)))
	if n, err := cl.CountDeadLetters(ctx); err != nil || n["payments"] != 0 {
		t.Fatalf("open dead letters of payments after discarding the selection: %v (%v), want 0", n, err)
	}
	var discarded int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "dead_letters_audit"}.Sanitize()+" WHERE action = 'discard' AND operator = $1", alice).Scan(&discarded); err != nil || discarded != 2 {
		t.Fatalf("discards audited as %s: %d (%v), want 2", alice, discarded, err)
	}

	// A move with a reason: dry run, apply, the audit entry.
	do("open ledger's move form", chromedp.Navigate(srv.URL+"/#/p/ledger"), chromedp.WaitVisible(chromedp.CSS(`h1[data-pipeline-page="ledger"]`)),
		chromedp.SendKeys(chromedp.CSS(`#offsets-form input[name="partition"]`), "0"),
		chromedp.SendKeys(chromedp.CSS(`#offsets-form input[name="to"]`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#offsets-form input[name="reason"]`), "skip the poison record (browser test)"),
		chromedp.Click(chromedp.CSS(`#offsets-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="plan"]`)))
	if p := text(`[data-testid="plan"] tbody`); !strings.Contains(p, "2") {
		t.Fatalf("the dry run shows %q", p)
	}
	shot("offsets-dry-run")
	do("apply the move", chromedp.Click(chromedp.CSS(`#offsets-result [data-testid="confirm-yes"]`)), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	if a := text(`#audit tbody`); !strings.Contains(a, "skip the poison record (browser test)") || !strings.Contains(a, alice) {
		t.Fatalf("the audit after the move shows %q", a)
	}
	var op string
	if err := db.QueryRow(ctx, "SELECT operator FROM "+pgx.Identifier{schema, "offsets_audit"}.Sanitize()+" WHERE reason = $1", "skip the poison record (browser test)").Scan(&op); err != nil || op != alice {
		t.Fatalf("the audit row's operator: %q, %v; want %q", op, err, alice)
	}
	shot("audit")
}
