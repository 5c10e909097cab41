// Package kafkaflag is a repeatable -kafka key=value command-line flag for librdkafka
// properties.
package kafkaflag

import (
	"fmt"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Properties collects key=value pairs; it implements flag.Value.
type Properties kafka.ConfigMap

func (p Properties) String() string { return fmt.Sprint(kafka.ConfigMap(p)) }

// Set adds one key=value.
func (p Properties) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[key] = v
	return nil
}
