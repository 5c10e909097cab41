package plugin

import (
	"strings"
	"testing"
)

func TestConfigDecodeHidesValues(t *testing.T) {
	var v struct {
		Port int `yaml:"port"`
	}
	err := Config{Path: "sink", Raw: map[string]any{"type": "x", "port": "hunter2-secret"}}.Decode(&v)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Decode = %v, want an error that does not quote the value", err)
	}
	err = Config{Path: "sink", Raw: map[string]any{"type": "x", "prot": 1}}.Decode(&v)
	if err == nil || !strings.Contains(err.Error(), "prot") || !strings.Contains(err.Error(), "sink") {
		t.Fatalf("Decode of an unknown key = %v, want it named with the section", err)
	}
}
