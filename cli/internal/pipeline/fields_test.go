package pipeline

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/eosink/eosink/sink"
)

// Every sink.Config field is set by a key of the file (a config tag in raw.go) or listed in
// notInFile, so that a new field cannot be forgotten silently.
func TestConfigTagsCoverEveryField(t *testing.T) {
	ct := reflect.TypeFor[sink.Config]()
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		_, tagged := configFields[name]
		_, listed := notInFile[name]
		if tagged == listed {
			t.Errorf("sink.Config.%s: tagged in raw.go %t, in notInFile %t; want exactly one", name, tagged, listed)
		}
	}
	if len(configFields) != len(fileFields) {
		t.Errorf("%d keys set %d fields: a field is set by two keys", len(fileFields), len(configFields))
	}
	l := &loader{x: &expander{}, broken: map[string]bool{}, lines: map[string]int{}}
	for _, f := range fileFields {
		field, ok := ct.FieldByName(f.field)
		if !ok {
			t.Errorf("%s: config tag names %s, which sink.Config lacks", f.path, f.field)
			continue
		}
		if f.kind == "" {
			continue
		}
		conv := conversions[f.kind]
		if conv == nil {
			t.Errorf("%s: unknown conversion %q", f.path, f.kind)
			continue
		}
		if got := reflect.TypeOf(conv(l, f.path, &yaml.Node{})); !got.ConvertibleTo(field.Type) {
			t.Errorf("%s: conversion %q gives %s, not assignable to %s %s", f.path, f.kind, got, f.field, field.Type)
		}
	}
}

func TestFileKeysSetTheirFields(t *testing.T) {
	p, err := parse(t, minimal+"batch: {max_records: 7, max_bytes: 1KiB, max_wait: 2s}\ntimeouts: {claim: 9s}\nretry: {max_backoff: 1m}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	if c.MaxBatchRecords != 7 || c.MaxBatchBytes != 1024 || c.MaxBatchWait.String() != "2s" || c.ClaimTimeout.String() != "9s" ||
		c.MaxRetryBackoff.String() != "1m0s" || c.MaxBufferedBytes != 0 {
		t.Fatalf("config: %+v", c)
	}
}

// The rules between fields are sink.Config's; the file names its own keys and their lines.
func TestCrossFieldRulesNameTheFileKeys(t *testing.T) {
	for text, want := range map[string]string{
		minimal + "batch:\n  max_bytes: 2MiB\n  max_buffered_bytes: 1MiB\n": "pipeline.yaml: batch.max_buffered_bytes: 1048576 bytes is less than batch.max_bytes (2097152 bytes); set it at least as large (line 13)",
		minimal + "retry: {backoff: 10s}\n":                                 "pipeline.yaml: retry.max_backoff: 5s (the default) is less than retry.backoff (10s)",
		minimal + "retry:\n  max_backoff: 10ms\n":                           "pipeline.yaml: retry.max_backoff: 10ms is less than retry.backoff (100ms) (line 12)",
	} {
		if got := parseErr(t, text, nil); got != want {
			t.Errorf("error:\n%s\nwant:\n%s", got, want)
		}
	}
}

func TestFileReason(t *testing.T) {
	for reason, want := range map[string]string{
		"set GroupID instead":                      "set kafka.group instead",
		"1s is less than RetryBackoff (2s)":        "1s is less than retry.backoff (2s)",
		"required (Kafka bootstrap servers)":       "required (Kafka bootstrap servers)",
		`"x" is not a valid PostgreSQL identifier`: `"x" is not a valid PostgreSQL identifier`,
	} {
		if got := fileReason(reason); got != want {
			t.Errorf("fileReason(%q) = %q, want %q", reason, got, want)
		}
	}
	if !strings.Contains(fieldPath("Handler"), "sink") || fieldPath("TracerProvider") != "Config.TracerProvider" {
		t.Errorf("fieldPath: Handler %q, TracerProvider %q", fieldPath("Handler"), fieldPath("TracerProvider"))
	}
}
