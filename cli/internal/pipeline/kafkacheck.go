package pipeline

import (
	"regexp"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/kafkaconf"
)

// checkKafka has librdkafka check the properties, as the sink's consumer would get them,
// without connecting: it builds a consumer from them without bootstrap.servers (so that it
// has no broker to reach), and closes it at once. librdkafka then refuses unknown
// properties, values out of range or not of the property's kind, and combinations it cannot
// use (an unknown SASL mechanism, SASL without credentials, a CA file it cannot read).
// The properties sink.Config.Validate refused (refused holds their paths) are left out: the
// sink would not take them. Skipped when a property could not be read, or its value is
// unset (-validate without the environment).
func (l *loader) checkKafka(props map[string]string, lineOf int, refused map[string]bool) {
	if len(props) == 0 || l.unknown("kafka.properties") {
		return
	}
	cm := kafka.ConfigMap{}
	for k, v := range props {
		if k != "bootstrap.servers" && k != "metadata.broker.list" && !refused["kafka.properties["+k+"]"] {
			cm[k] = v
		}
	}
	// What the sink sets: a group, its managed keys; and no log lines from the check.
	cm["group.id"] = "eosink-validate"
	for k, v := range kafkaconf.ManagedProperties() {
		cm[k] = v
	}
	cm["log_level"] = 0
	c, err := kafka.NewConsumer(&cm)
	if err == nil {
		c.Close()
		return
	}
	msg := strings.TrimSpace(err.Error())
	path, line := "kafka.properties", lineOf
	if m := propertyRE.FindStringSubmatch(msg); m != nil {
		if _, ok := props[m[1]]; ok {
			path = "kafka.properties[" + m[1] + "]"
			if n, ok := l.lines[path]; ok {
				line = n
			}
		}
	}
	l.fail(path, line, "librdkafka refuses it: %s", l.secrets.Redact(msg))
}

// propertyRE finds the property a librdkafka configuration error names.
var propertyRE = regexp.MustCompile(`(?:property:? |property )"([^"]+)"`)
