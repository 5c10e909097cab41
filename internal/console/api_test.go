package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/console"
	"github.com/eosink/eosink/internal/opsview"
)

// TestPipelines: GET /api/v1/pipelines is every pipeline's status line; GET
// /api/v1/pipelines/{pipeline} adds its partitions with position, epoch, owner (gone:
// no heartbeat), lag, and the stop reason with its remedy.
func TestPipelines(t *testing.T) {
	b := newBed(t, nil)
	var sums []opsview.Summary
	b.must(t, 200, "GET", "/api/v1/pipelines", "").decode(t, &sums)
	if len(sums) != 2 || sums[0].Pipeline != "pipe" || sums[0].Partitions != 1 || sums[0].Dead != 3 || sums[0].MaxEpoch != 3 ||
		sums[1].Pipeline != "stopped" || len(sums[1].Stopped) != 1 {
		t.Fatalf("pipelines: %+v", sums)
	}
	var d console.PipelineDetail
	b.must(t, 200, "GET", "/api/v1/pipelines/pipe", "").decode(t, &d)
	p := d.Partitions
	if d.Summary.Pipeline != "pipe" || len(p) != 1 || p[0].NextOffset != 10 || p[0].Epoch != 3 || p[0].Owner != "host-a" || p[0].OwnerAlive ||
		p[0].LogEnd != 10 || p[0].Lag != 0 || p[0].Unowned == nil || p[0].Unowned.Reason != admin.UnownedNoInstance || p[0].Stopped != nil {
		t.Fatalf("pipe: %+v %+v", d.Summary, p)
	}
	b.must(t, 200, "GET", "/api/v1/pipelines/stopped", "").decode(t, &d)
	if st := d.Partitions[0].Stopped; st == nil || st.Reason != "out_of_range" || st.Remedy == "" || st.By != "host-s" || st.At.IsZero() {
		t.Fatalf("stopped partition: %+v", d.Partitions[0].Stopped)
	}
	if e := b.must(t, 404, "GET", "/api/v1/pipelines/nope", "").errorBody(t); e.Field != "pipeline" || !strings.Contains(e.Error, `"nope"`) {
		t.Fatalf("unknown pipeline: %+v", e)
	}
}

// TestDeadLetters: the list filters by topic and partition and pages with limit and
// after_id; show returns the record, its key and value as text only when UTF-8 and in
// base64 always.
func TestDeadLetters(t *testing.T) {
	b := newBed(t, nil)
	var page console.DeadLetterPage
	b.must(t, 200, "GET", "/api/v1/pipelines/pipe/dead-letters?limit=2", "").decode(t, &page)
	if len(page.DeadLetters) != 2 || page.DeadLetters[0].ID != b.dead[0] || page.NextAfterID == nil || *page.NextAfterID != b.dead[1] {
		t.Fatalf("first page: %+v", page)
	}
	b.must(t, 200, "GET", fmt.Sprintf("/api/v1/pipelines/pipe/dead-letters?limit=2&after_id=%d", *page.NextAfterID), "").decode(t, &page)
	if len(page.DeadLetters) != 1 || page.DeadLetters[0].ID != b.dead[2] || page.NextAfterID != nil {
		t.Fatalf("last page: %+v", page)
	}
	b.must(t, 200, "GET", "/api/v1/pipelines/pipe/dead-letters?partition=1&topic="+b.topic, "").decode(t, &page)
	if len(page.DeadLetters) != 1 || page.DeadLetters[0].Offset != 3 {
		t.Fatalf("partition 1: %+v", page)
	}
	b.must(t, 200, "GET", "/api/v1/pipelines/pipe/dead-letters?topic=elsewhere", "").decode(t, &page)
	if page.DeadLetters == nil || len(page.DeadLetters) != 0 {
		t.Fatalf("another topic: %+v, want an empty list", page)
	}

	var dl struct {
		opsview.DeadLetter
		Value *string `json:"value"` // shadows the embedded field for the decode
	}
	r := b.must(t, 200, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", b.dead[1]), "")
	r.decode(t, &dl)
	wantValue := base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, '<', '>'})
	if dl.ID != b.dead[1] || dl.Pipeline != "pipe" || dl.Key == nil || *dl.Key != "k2" || dl.Value != nil || dl.ValueBase64 == nil ||
		*dl.ValueBase64 != wantValue || len(dl.Headers) != 2 || dl.Headers[1].Key != nil || dl.Headers[1].KeyBase64 != "/w==" || dl.Headers[1].Value != nil ||
		dl.Headers[0].Value == nil || *dl.Headers[0].Value != "v" {
		t.Fatalf("show: %s", r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q", ct)
	}
	b.must(t, 200, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", b.dead[2]), "").decode(t, &dl)
	if dl.Key != nil || dl.KeyBase64 != nil || dl.Value == nil || *dl.Value != `{"amount": 3}` {
		t.Fatalf("a null key: %+v", dl)
	}
	if e := b.must(t, 404, "GET", "/api/v1/dead-letters/999999999", "").errorBody(t); e.Field != "id" {
		t.Fatalf("missing dead letter: %+v", e)
	}
}

// TestReplayAndDiscard: replay applies a dead letter through the console's pipeline's
// plugin and resolves it (replayed, audited with the token's operator and the reason) in the
// same transaction; one of another pipeline is refused (409); discard resolves one; a
// resolved one is refused (409); each is logged with the token's operator.
func TestReplayAndDiscard(t *testing.T) {
	b := newBed(t, nil)
	ctx := context.Background()
	var res console.ReplayResponse
	b.must(t, 200, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b.dead[0]), `{"reason": "the table was fixed"}`).decode(t, &res)
	if res.Replayed != 1 || res.FailedAgain != 0 || res.Operator != alice {
		t.Fatalf("replay: %+v", res)
	}
	var n int
	if err := b.db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{b.schema, "payments"}.Sanitize()+" WHERE k = 'k1' AND amount = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("replayed row: %d %v", n, err)
	}
	var got opsview.DeadLetter
	b.must(t, 200, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", b.dead[0]), "").decode(t, &got)
	if got.State != admin.StateReplayed || got.ResolvedBy != alice || len(got.Audit) != 1 ||
		got.Audit[0].Action != "replay" || got.Audit[0].Operator != alice || got.Audit[0].Reason != "the table was fixed" {
		t.Fatalf("the replayed dead letter: state %q by %q, audit %+v", got.State, got.ResolvedBy, got.Audit)
	}
	if e := b.must(t, 409, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b.dead[0]), "").errorBody(t); e.Field != "id" || !strings.Contains(e.Error, "resolved already") {
		t.Fatalf("replay of a replayed one: %+v", e)
	}
	// The value that is not JSON fails again: it stays, with one more failure.
	b.must(t, 200, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b.dead[1]), "{}").decode(t, &res)
	if res.Replayed != 0 || res.FailedAgain != 1 {
		t.Fatalf("replay of poison: %+v", res)
	}
	if e := b.must(t, 409, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b.dead[3]), "").errorBody(t); e.Field != "id" || !strings.Contains(e.Error, `"other"`) {
		t.Fatalf("replay of another pipeline's: %+v", e)
	}
	var dr console.DiscardResult
	b.must(t, 200, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", b.dead[3]), "").decode(t, &dr)
	if dr.Discarded != 1 || dr.Operator != alice {
		t.Fatalf("discard: %+v", dr)
	}
	if e := b.must(t, 409, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", b.dead[3]), "").errorBody(t); !strings.Contains(e.Error, "discarded by") {
		t.Fatalf("discard of a discarded one: %+v", e)
	}
	for _, want := range []string{`operator="Alice Operator" action="dead-letter replay"`, `action="dead-letter discard"`} {
		if !strings.Contains(b.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, b.logs.String())
		}
	}
	if strings.Contains(b.logs.String(), aliceToken) {
		t.Errorf("the log holds a token:\n%s", b.logs.String())
	}
}

// TestMoveOffsets: a dry run plans without writing; the move is applied in one transaction,
// fences the owner (epoch + 1) and is audited with the token's operator and the reason, as
// `eosink offsets set` audits; GET /api/v1/audit returns it.
func TestMoveOffsets(t *testing.T) {
	b := newBed(t, nil)
	ctx := context.Background()
	var mr console.MoveResult
	b.must(t, 200, "POST", "/api/v1/pipelines/pipe/offsets", `{"topic": "`+b.topic+`", "partition": 0, "to": "earliest", "reason": "replay after bug 7", "dry_run": true}`).decode(t, &mr)
	if !mr.DryRun || len(mr.Changes) != 1 || mr.Changes[0].From == nil || *mr.Changes[0].From != 10 || mr.Changes[0].To != 0 {
		t.Fatalf("dry run: %+v", mr)
	}
	offsetsTable := pgx.Identifier{b.schema, "offsets"}.Sanitize()
	var next, epoch int64
	if err := b.db.QueryRow(ctx, "SELECT next_offset, epoch FROM "+offsetsTable+" WHERE pipeline = 'pipe'").Scan(&next, &epoch); err != nil || next != 10 || epoch != 3 {
		t.Fatalf("after the dry run: next %d epoch %d (%v), want unchanged", next, epoch, err)
	}
	b.must(t, 200, "POST", "/api/v1/pipelines/pipe/offsets", `{"to": 4, "reason": "replay after bug 7"}`).decode(t, &mr)
	if mr.DryRun || mr.Operator != alice || len(mr.Changes) != 1 || *mr.Changes[0].From != 10 || mr.Changes[0].To != 4 {
		t.Fatalf("apply: %+v", mr)
	}
	if err := b.db.QueryRow(ctx, "SELECT next_offset, epoch FROM "+offsetsTable+" WHERE pipeline = 'pipe'").Scan(&next, &epoch); err != nil || next != 4 || epoch != 4 {
		t.Fatalf("after the move: next %d epoch %d (%v), want 4 and 4", next, epoch, err)
	}
	var op, reason, change string
	if err := b.db.QueryRow(ctx, "SELECT operator, reason, change FROM "+pgx.Identifier{b.schema, "offsets_audit"}.Sanitize()+
		" WHERE pipeline = 'pipe' AND to_offset = 4").Scan(&op, &reason, &change); err != nil || op != alice || reason != "replay after bug 7" || change != "update" {
		t.Fatalf("audit row: %q %q %q %v", op, reason, change, err)
	}
	var page console.AuditPage
	b.must(t, 200, "GET", "/api/v1/audit?pipeline=pipe&operator="+strings.ReplaceAll(alice, " ", "+"), "").decode(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Operator != alice || *page.Entries[0].From != 10 || *page.Entries[0].To != 4 ||
		*page.Entries[0].ToEpoch != 4 || page.Entries[0].DBUser == "" || page.NextBeforeID != nil {
		t.Fatalf("audit: %+v", page)
	}
	// Paging back: the newest first, then the ones before.
	b.must(t, 200, "POST", "/api/v1/pipelines/pipe/offsets", `{"to": "latest", "reason": "skip again"}`)
	b.must(t, 200, "GET", "/api/v1/audit?pipeline=pipe&limit=1", "").decode(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Reason != "skip again" || page.NextBeforeID == nil {
		t.Fatalf("audit page 1: %+v", page)
	}
	b.must(t, 200, "GET", fmt.Sprintf("/api/v1/audit?pipeline=pipe&limit=1&before_id=%d", *page.NextBeforeID), "").decode(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Reason != "replay after bug 7" {
		t.Fatalf("audit page 2: %+v", page)
	}
	if !strings.Contains(b.logs.String(), `operator="Alice Operator" action="offsets set"`) {
		t.Errorf("no mutation log line:\n%s", b.logs.String())
	}
}

// TestBadInput: every kind of bad input is a 4xx that names the field, never a 500, and
// changes nothing.
func TestBadInput(t *testing.T) {
	b := newBed(t, nil)
	offsets := "/api/v1/pipelines/pipe/offsets"
	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
		headers            []string
	}{
		{"GET", "/api/v1/pipelines?verbose=1", "", 400, "verbose", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?limit=0", "", 400, "limit", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?limit=5000", "", 400, "limit", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?partition=x", "", 400, "partition", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?partition=-1", "", 400, "partition", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?after_id=-3", "", 400, "after_id", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?limit=1&limit=2", "", 400, "limit", nil},
		{"GET", "/api/v1/dead-letters/abc", "", 400, "id", nil},
		{"GET", "/api/v1/dead-letters/0", "", 400, "id", nil},
		{"GET", "/api/v1/dead-letters/99999999999999999999", "", 400, "id", nil},
		{"POST", "/api/v1/dead-letters/abc/replay", "", 400, "id", nil},
		{"POST", "/api/v1/dead-letters/1/discard", `{"all": true}`, 400, "all", nil},
		{"GET", "/api/v1/audit?limit=x", "", 400, "limit", nil},
		{"GET", "/api/v1/audit?before_id=y", "", 400, "before_id", nil},
		{"GET", "/api/v1/audit?pipline=pipe", "", 400, "pipline", nil},
		{"POST", offsets, "", 400, "body", nil},
		{"POST", offsets, `{"reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": null, "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": "soon", "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": -1, "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": 1.5, "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": "earliest"}`, 400, "reason", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "  "}`, 400, "reason", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "partition": 0}`, 400, "partition", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "t", "partition": -2}`, 400, "partition", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "t", "partition": "zero"}`, 400, "partition", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "t", "partition": 99999999999}`, 400, "partition", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "dry_run": "yes"}`, 400, "dry_run", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "operator": "mallory"}`, 400, "operator", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r"} {}`, 400, "body", nil},
		{"POST", offsets, `{"to": "earliest", "reason": `, 400, "body", nil},
		{"POST", offsets, `[1]`, 400, "body", nil},
		{"POST", offsets, `{"to": 999, "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": 999, "reason": "r", "dry_run": true}`, 400, "to", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "no-such-topic-here"}`, 400, "topic", nil},
		{"POST", "/api/v1/pipelines/nobody/offsets", `{"to": "earliest", "reason": "r"}`, 400, "topic", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "TOPIC", "partition": 7}`, 400, "partition", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r"}`, 415, "Content-Type", []string{"Content-Type", "text/plain"}},
		{"POST", offsets, `{"to": "earliest", "reason": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "body", nil},
		{"DELETE", "/api/v1/pipelines", "", 405, "method", nil},
		{"PUT", "/api/v1/dead-letters/1", "", 405, "method", nil},
		{"GET", "/api/v1/dead-letters/1/replay", "", 405, "method", nil},
		{"GET", "/api/v2/pipelines", "", 404, "path", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?topic=%00", "", 400, "topic", nil},
		{"GET", "/api/v1/pipelines/pipe/dead-letters?topic=%ff", "", 400, "topic", nil},
		{"GET", "/api/v1/pipelines/%00", "", 400, "pipeline", nil},
		{"GET", "/api/v1/pipelines/%ff%fe/dead-letters", "", 400, "pipeline", nil},
		{"GET", "/api/v1/audit?operator=a%00b", "", 400, "operator", nil},
		{"GET", "/api/v1/audit?pipeline=%c3%28", "", 400, "pipeline", nil},
		{"POST", "/api/v1/pipelines/a%00/offsets", `{"to": "earliest", "reason": "r"}`, 400, "pipeline", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r\u0000"}`, 400, "reason", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "\u0000"}`, 400, "topic", nil},
		{"POST", offsets, `{"to": "earliest\u0000", "reason": "r"}`, 400, "to", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "not a/topic"}`, 400, "topic", nil},
		{"POST", offsets, `{"to": "earliest", "reason": "r", "topic": "` + strings.Repeat("t", 300) + `"}`, 400, "topic", nil},
	} {
		path, body := c.path, strings.ReplaceAll(c.body, "TOPIC", b.topic)
		r := b.req(t, c.method, path, body, c.headers...)
		e := r.errorBody(t)
		if r.status != c.status || e.Field != c.field || e.Error == "" {
			t.Errorf("%s %s %.80s: %d %+v, want %d naming %q", c.method, path, body, r.status, e, c.status, c.field)
		}
	}
	var next int64
	if err := b.db.QueryRow(context.Background(), "SELECT next_offset FROM "+pgx.Identifier{b.schema, "offsets"}.Sanitize()+" WHERE pipeline = 'pipe'").Scan(&next); err != nil || next != 10 {
		t.Fatalf("next offset %d (%v) after the refused moves, want 10", next, err)
	}
	if r := b.req(t, "DELETE", "/api/v1/pipelines", ""); r.header.Get("Allow") != "GET" {
		t.Errorf("405 Allow: %q", r.header.Get("Allow"))
	}
}

// TestSecurity: without a token or with a wrong one every request is 401; a mutation
// without the CSRF header, or from another origin, is 403 and changes nothing; with
// mutations disabled every mutation is 403 and reads work; every response carries the
// security headers.
func TestSecurity(t *testing.T) {
	b := newBed(t, nil)
	replay := fmt.Sprintf("/api/v1/dead-letters/%d/discard", b.dead[0])
	for _, c := range []struct {
		method, path string
		status       int
		field        string
		headers      []string
	}{
		{"GET", "/api/v1/pipelines", 401, "Authorization", []string{"Authorization", ""}},
		{"GET", "/api/v1/audit", 401, "Authorization", []string{"Authorization", "Bearer not-a-token-of-the-file"}},
		{"GET", "/api/v1/audit", 401, "Authorization", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))}},
		{"GET", "/api/v1/audit", 401, "Authorization", []string{"Authorization", "Bearer "}},
		{"POST", replay, 401, "Authorization", []string{"Authorization", ""}},
		{"POST", replay, 403, console.CSRFHeader, []string{console.CSRFHeader, ""}},
		{"POST", replay, 403, console.CSRFHeader, []string{console.CSRFHeader, "yes"}},
		{"POST", replay, 403, "Origin", []string{"Sec-Fetch-Site", "cross-site"}},
		{"POST", replay, 403, "Origin", []string{"Origin", "https://evil.example"}},
	} {
		r := b.req(t, c.method, c.path, "", c.headers...)
		if e := r.errorBody(t); r.status != c.status || e.Field != c.field {
			t.Errorf("%s %s %v: %d %+v, want %d naming %q", c.method, c.path, c.headers, r.status, e, c.status, c.field)
		}
		if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", c.method, c.path)
		}
	}
	b.must(t, 200, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", b.dead[0]), "") // still there
	// Same origin (a page the console served, or a client that says none) passes; bob's
	// token names bob.
	var dr console.DiscardResult
	b.must(t, 200, "POST", replay, "", "Sec-Fetch-Site", "same-origin", "Origin", b.srv.URL, "Authorization", "Bearer "+bobToken).decode(t, &dr)
	if dr.Operator != "bob" || dr.Discarded != 1 {
		t.Fatalf("discard by bob: %+v", dr)
	}
	for _, path := range []string{"/api/v1/pipelines", "/api/v1/nothing", "/api/v1/audit?x=1"} {
		for _, auth := range []string{"Bearer " + aliceToken, ""} {
			r := b.req(t, "GET", path, "", "Authorization", auth)
			h := r.header
			if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s (%d): security headers %v", path, r.status, h)
			}
		}
	}

	ro := newBed(t, func(_ *bed, c *console.Config) { c.Mutations = false })
	for _, path := range []string{"/api/v1/pipelines/pipe/offsets", fmt.Sprintf("/api/v1/dead-letters/%d/replay", ro.dead[0]),
		fmt.Sprintf("/api/v1/dead-letters/%d/discard", ro.dead[0])} {
		if r := ro.req(t, "POST", path, `{"to": "earliest", "reason": "r"}`); r.status != 403 || !strings.Contains(r.errorBody(t).Error, "mutations are disabled") {
			t.Errorf("read-only POST %s: %d %s", path, r.status, r.body)
		}
	}
	ro.must(t, 200, "GET", "/api/v1/pipelines", "")
	ro.must(t, 200, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", ro.dead[0]), "")

	// Without tokens: reads are open, mutations cannot be enabled.
	open := newBed(t, func(_ *bed, c *console.Config) { c.Mutations, c.Tokens = false, nil })
	open.must(t, 200, "GET", "/api/v1/pipelines", "", "Authorization", "")
	if _, err := console.New(console.Config{Admin: open.admin, Mutations: true}); err != console.ErrMutationsNeedTokens {
		t.Fatalf("mutations without tokens: %v", err)
	}
}
