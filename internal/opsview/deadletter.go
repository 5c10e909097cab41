package opsview

import (
	"bytes"
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/eosink/eosink/admin"
)

// Bytes is a record's key, value or header as JSON: Text holds the bytes as a string only
// when they are valid UTF-8 (never escaped for HTML, never altered), Base64 always holds
// them (standard encoding); both are null when the bytes are null (a record without key, a
// tombstone). A reader that needs the exact bytes takes Base64.
type Bytes struct {
	Text   *string
	Base64 *string
}

// bytesOf returns b's Bytes.
func bytesOf(b []byte) Bytes {
	if b == nil {
		return Bytes{}
	}
	enc := base64.StdEncoding.EncodeToString(b)
	out := Bytes{Base64: &enc}
	if utf8.Valid(b) {
		s := string(b)
		out.Text = &s
	}
	return out
}

// Header is one record header.
type Header struct {
	Key         *string `json:"key"` // as text when valid UTF-8
	KeyBase64   string  `json:"key_base64"`
	Value       *string `json:"value"` // as text when valid UTF-8; null when null or not UTF-8
	ValueBase64 *string `json:"value_base64"`
}

// DeadLetter is a dead letter with its record, as `eosink dlq show -json` and GET
// /api/v1/dead-letters/{id} write it.
type DeadLetter struct {
	admin.DeadLetter
	Key         *string   `json:"key"` // as text when valid UTF-8; null when null or not UTF-8
	KeyBase64   *string   `json:"key_base64"`
	Value       *string   `json:"value"`
	ValueBase64 *string   `json:"value_base64"`
	Headers     []Header  `json:"headers"`
	Timestamp   time.Time `json:"timestamp"`
	// The edit an operator stored (admin.Client.EditDeadLetter), which a replay applies:
	// null when none, or for the part it left alone.
	EditedKey         *string `json:"edited_key"`
	EditedKeyBase64   *string `json:"edited_key_base64"`
	EditedValue       *string `json:"edited_value"`
	EditedValueBase64 *string `json:"edited_value_base64"`
	// Audit lists its edits, replays and discards, oldest first.
	Audit []AuditEntry `json:"audit"`
}

// AuditEntry is one row of the dead letters' audit, with an edit's keys and values as Bytes.
type AuditEntry struct {
	admin.AuditEntry
	OldKey         *string `json:"old_key"`
	OldKeyBase64   *string `json:"old_key_base64"`
	NewKey         *string `json:"new_key"`
	NewKeyBase64   *string `json:"new_key_base64"`
	OldValue       *string `json:"old_value"`
	OldValueBase64 *string `json:"old_value_base64"`
	NewValue       *string `json:"new_value"`
	NewValueBase64 *string `json:"new_value_base64"`
}

// DeadLetterOf returns the view of d, which has its record (admin.Client.ShowDeadLetter),
// with its audit (admin.Client.DeadLetterAudit).
func DeadLetterOf(d admin.DeadLetter, audit []admin.AuditEntry) DeadLetter {
	out := DeadLetter{DeadLetter: d, Headers: []Header{}, Audit: []AuditEntry{}}
	for _, a := range audit {
		ok, nk, ov, nv := bytesOf(a.OldKey), bytesOf(a.NewKey), bytesOf(a.OldValue), bytesOf(a.NewValue)
		out.Audit = append(out.Audit, AuditEntry{AuditEntry: a, OldKey: ok.Text, OldKeyBase64: ok.Base64, NewKey: nk.Text, NewKeyBase64: nk.Base64,
			OldValue: ov.Text, OldValueBase64: ov.Base64, NewValue: nv.Text, NewValueBase64: nv.Base64})
	}
	r := d.Record
	if r == nil {
		return out
	}
	if e := d.Replayed; e != nil && d.Edited {
		if !bytes.Equal(e.Key, r.Key) {
			k := bytesOf(e.Key)
			out.EditedKey, out.EditedKeyBase64 = k.Text, k.Base64
		}
		if !bytes.Equal(e.Value, r.Value) {
			v := bytesOf(e.Value)
			out.EditedValue, out.EditedValueBase64 = v.Text, v.Base64
		}
	}
	k, v := bytesOf(r.Key), bytesOf(r.Value)
	out.Key, out.KeyBase64, out.Value, out.ValueBase64, out.Timestamp = k.Text, k.Base64, v.Text, v.Base64, r.Timestamp
	for _, h := range r.Headers {
		hk, hv := bytesOf([]byte(h.Key)), bytesOf(h.Value)
		kb := base64.StdEncoding.EncodeToString([]byte(h.Key))
		out.Headers = append(out.Headers, Header{Key: hk.Text, KeyBase64: kb, Value: hv.Text, ValueBase64: hv.Base64})
	}
	return out
}
