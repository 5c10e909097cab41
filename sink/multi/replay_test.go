package multi_test

import (
	"strings"
	"testing"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/multi"
	"github.com/eosink/eosink/sink/table"
)

// TestReplayNotes: the payments pipeline of issue 27 (an append-only history with
// on_conflict: nothing, the latest status with only_if_newer) notes that a replay repairs
// neither; with the history keyed on the record's coordinates and on_equal: update, it
// notes nothing.
func TestReplayNotes(t *testing.T) {
	cols := map[string]table.Column{"payment_id": {From: "value.payment_id"}, "status": {From: "value.status"}, "at": {From: "value.at"},
		"src_topic": {From: "topic"}, "src_partition": {From: "partition"}, "src_offset": {From: "offset"}}
	history, err := table.New(table.Config{Table: "pay.history", OnConflict: "nothing", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := table.NewUpsert(table.UpsertConfig{Key: []string{"payment_id"}, OnlyIfNewer: "at", Config: table.Config{Table: "pay.latest", Columns: cols}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := multi.New(history, latest)
	if err != nil {
		t.Fatal(err)
	}
	notes := sink.ReplayNotes(m)
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "sinks[0]: table ") || !strings.Contains(notes[0], "on_conflict: nothing") ||
		!strings.HasPrefix(notes[1], "sinks[1]: upsert ") || !strings.Contains(notes[1], "set on_equal: update") {
		t.Fatalf("notes of the pipeline that repairs nothing:\n%s", strings.Join(notes, "\n"))
	}

	history2, err := table.NewUpsert(table.UpsertConfig{Key: []string{"src_topic", "src_partition", "src_offset"}, Config: table.Config{Table: "pay.history", Columns: cols}})
	if err != nil {
		t.Fatal(err)
	}
	latest2, err := table.NewUpsert(table.UpsertConfig{Key: []string{"payment_id"}, OnlyIfNewer: "at", OnEqual: table.OnEqualUpdate,
		Config: table.Config{Table: "pay.latest", Columns: cols}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = multi.New(history2, latest2); err != nil {
		t.Fatal(err)
	}
	if notes := sink.ReplayNotes(m); len(notes) != 0 {
		t.Fatalf("notes of the pipeline whose replay rewrites every row: %q", notes)
	}
}
