// Package kafkaflag is a repeatable -kafka key=value command-line flag for librdkafka
// properties.
package kafkaflag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Properties collects key=value pairs; it implements flag.Value.
type Properties kafka.ConfigMap

// String lists the keys only: values may be secrets (SASL passwords), and flag prints String
// in messages.
func (p Properties) String() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// Set adds one key=value.
func (p Properties) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[key] = v
	return nil
}
