package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/sink"
)

// hostile is record data that drives a terminal: clear the screen, retitle the window, a
// fake line, a bidi override, DEL and C1 controls.
const hostile = "ok\x1b[2J\x1b]0;pwned\x07\r\nfake: line\u202etxt\x7f\u009b31m"

// noControls fails when out holds a control character other than the layout's newlines and
// tabs (tabwriter pads with spaces).
func noControls(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e') {
			t.Fatalf("%s prints control character %U raw:\n%q", what, r, out)
		}
	}
	if strings.Contains(out, "\nfake: line") {
		t.Fatalf("%s lets record data forge a line:\n%s", what, out)
	}
}

// TestHumanOutputEscapesControlCharacters: dlq show, dlq list, lag, offsets list and
// status print record data (keys, values, headers, errors quoting them, topics, owners)
// with control characters escaped; -json already escapes them.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	hk := hostile
	dl := admin.DeadLetter{ID: 1, Pipeline: "p" + hostile, Topic: "t" + hostile, Error: "bad value " + hostile,
		Record: &sink.Record{Key: []byte(hostile), Value: []byte(hostile), Timestamp: time.Unix(0, 0),
			Headers: []sink.Header{{Key: hk, Value: []byte(hostile)}}}}
	// An edited, resolved dead letter with an audit: the operator's words are data too.
	at := time.Unix(0, 0)
	dl.State, dl.ResolvedBy, dl.ResolvedAt = admin.StateReplayed, "op"+hostile, &at
	dl.Edited, dl.EditedBy, dl.EditedAt = true, "op"+hostile, &at
	edited := *dl.Record
	edited.Value = []byte("edited" + hostile)
	dl.Replayed = &edited
	audit := []admin.AuditEntry{{Action: "edit", Operator: "op" + hostile, Reason: "why" + hostile, DBUser: "u" + hostile, At: at}}
	var b bytes.Buffer
	if err := printDeadLetter(&b, dl, audit, false); err != nil {
		t.Fatal(err)
	}
	noControls(t, "dlq show", b.String())
	if !strings.Contains(b.String(), `ok\x1b[2J`) || !strings.Contains(b.String(), `edited value:  editedok\x1b[2J`) ||
		!strings.Contains(b.String(), `edit by opok\x1b[2J`) {
		t.Fatalf("dlq show does not show the escapes of the record, the edit and the audit visibly:\n%s", b.String())
	}
	for _, withState := range []bool{false, true} {
		b.Reset()
		if err := printDeadLetters(&b, []admin.DeadLetter{dl}, false, withState); err != nil {
			t.Fatal(err)
		}
		noControls(t, "dlq list", b.String())
		if got := strings.Contains(b.String(), "replayed, edited"); got != withState {
			t.Fatalf("dlq list (state column %v) shows the state: %v, want %v:\n%s", withState, got, withState, b.String())
		}
	}

	ps := []admin.Position{{Pipeline: "p" + hostile, Topic: "t" + hostile, Owner: "o" + hostile, Error: "e" + hostile,
		Stopped: &admin.Stop{Reason: "handler error", Error: "value " + hostile, By: "o" + hostile, Remedy: "fix"}}}
	for _, lagOnly := range []bool{true, false} {
		b.Reset()
		if err := printPositions(&b, ps, false, lagOnly); err != nil {
			t.Fatal(err)
		}
		noControls(t, "lag / offsets list", b.String())
	}
	b.Reset()
	if err := printStatus(&b, ps, map[string]int64{}, []admin.Lease{{Pipeline: "p\x1b[2J", Name: "t\x07", Holder: "h\x1b]0;x\x07"}}, false); err != nil {
		t.Fatal(err)
	}
	noControls(t, "status", b.String())
}
