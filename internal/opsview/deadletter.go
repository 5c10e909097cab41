package opsview

import (
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
}

// DeadLetterOf returns the view of d, which has its record (admin.Client.ShowDeadLetter).
func DeadLetterOf(d admin.DeadLetter) DeadLetter {
	out := DeadLetter{DeadLetter: d, Headers: []Header{}}
	r := d.Record
	if r == nil {
		return out
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
