// Package kafkaconf holds the librdkafka conventions that package sink, its plugins and the
// config file's loader share: which topic entries are patterns, and which consumer
// properties eosink sets itself.
package kafkaconf

import "strings"

// IsTopicPattern reports whether a topic entry (sink.Config.Topics, a plugin's route) is a
// regular expression: it starts with ^, as librdkafka's subscriptions take patterns.
func IsTopicPattern(topic string) bool { return strings.HasPrefix(topic, "^") }

// ManagedProperties returns the librdkafka properties eosink sets on its consumer and
// refuses other values for in sink.Config.Kafka: enable.auto.commit=false and
// auto.offset.reset=error (positions come from the database, and a position outside the log
// must stop the partition, not move it). The map is a new one at each call.
func ManagedProperties() map[string]string {
	return map[string]string{
		"enable.auto.commit": "false",
		"auto.offset.reset":  "error",
	}
}
