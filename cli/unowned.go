package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/admin"
)

// groupSettings are the consumer-group settings of the -config file's sink, which status
// words an unowned partition's wait with: its session.timeout.ms (0, the default
// admin.DefaultSessionTimeout, without -config, without the property, or with
// group.protocol=consumer, whose session timeout the broker sets), and whether it sets
// group.instance.id.
func (o *opsFlags) groupSettings() admin.GroupSettings {
	if o.file == nil {
		return admin.GroupSettings{}
	}
	k := o.file.Config.Kafka
	gid, _ := k["group.instance.id"].(string)
	return admin.GroupSettings{SessionTimeout: sessionTimeout(k), Static: gid != ""}
}

// sessionTimeout is session.timeout.ms of k, 0 when unset or under group.protocol=consumer.
func sessionTimeout(k kafka.ConfigMap) time.Duration {
	if gp, _ := k["group.protocol"].(string); gp == "consumer" {
		return 0
	}
	var ms int
	switch v := k["session.timeout.ms"].(type) {
	case int:
		ms = v
	case string:
		ms, _ = strconv.Atoi(v)
	}
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// printUnowned prints status's unowned lines: each partition no running instance holds,
// with why and what to do.
func printUnowned(w io.Writer, ps []admin.Position) error {
	for _, p := range ps {
		u := p.Unowned
		if u == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "unowned: %s %s[%d]: %s: %s\n", term(p.Pipeline), term(p.Topic), p.Partition, u.Reason, term(u.Detail)); err != nil {
			return err
		}
	}
	return nil
}
