package pipeline

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLogProgress(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
	}{{"", 30 * time.Second}, {"log: {progress: 10s}", 10 * time.Second}, {"log: {progress: 0}", 0}, {"log: {progress: off}", 0}, {"log: {progress: 1m30s}", 90 * time.Second}} {
		p, err := parse(t, minimal+c.value+"\n", nil)
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		if p.Progress != c.want {
			t.Errorf("%q: progress %v, want %v", c.value, p.Progress, c.want)
		}
	}
	for _, bad := range []string{"soon", "-5s"} {
		if msg := parseErr(t, minimal+"log: {progress: "+bad+"}\n", nil); !strings.Contains(msg, "log.progress: \""+bad+"\" is not a duration") {
			t.Errorf("%q: %s", bad, msg)
		}
	}
}

// TestAllowUnset: with AllowUnset an unset variable is a warning naming it and its field,
// the field is left unset, and nothing its absence causes is an error; without it, an error.
func TestAllowUnset(t *testing.T) {
	text := strings.Replace(minimal, "127.0.0.1:9092", "${BROKERS}", 1)
	name := filepath.Join(t.TempDir(), "pipeline.yaml")
	p, err := Parse(name, []byte(text), Options{LookupEnv: func(string) (string, bool) { return "", false }, AllowUnset: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || p.Warnings[0].Path != "kafka.brokers" || !strings.Contains(p.Warnings[0].Msg, "environment variable BROKERS is not set") ||
		p.Config.Brokers != "" {
		t.Fatalf("warnings %v, brokers %q", p.Warnings, p.Config.Brokers)
	}
	if _, err := Parse(name, []byte(text), Options{LookupEnv: func(string) (string, bool) { return "", false }}); err == nil ||
		!strings.Contains(err.Error(), "kafka.brokers: environment variable BROKERS is not set") {
		t.Fatalf("without AllowUnset: %v", err)
	}
	// A default is not a warning; neither is a set variable.
	text = strings.Replace(minimal, "127.0.0.1:9092", "${BROKERS:-h:1}", 1)
	if p, err := Parse(name, []byte(text), Options{LookupEnv: func(string) (string, bool) { return "", false }, AllowUnset: true}); err != nil || len(p.Warnings) != 0 || p.Config.Brokers != "h:1" {
		t.Fatalf("with a default: %v %v", err, p)
	}
}
