package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/testbed"
)

// withStdin makes text produce's standard input for the test.
func withStdin(t *testing.T, text string) {
	old := stdin
	stdin = strings.NewReader(text)
	t.Cleanup(func() { stdin = old })
}

// records reads topic back: "partition key value" per record, sorted.
func records(t *testing.T, e testbed.Env, topic string) []string {
	var out []string
	testbed.ReadCommitted(t, e, topic, 30*time.Second, func(m *kafka.Message) {
		out = append(out, fmt.Sprintf("%d %s %s", m.TopicPartition.Partition, m.Key, m.Value))
	})
	sort.Strings(out)
	return out
}

// TestProduceCommand produces JSON lines to a real broker: the topic created with its
// partitions, keys from a field or before a tab, empty lines skipped, the broker and topic
// from a pipeline file, and refusals with their reasons.
func TestProduceCommand(t *testing.T) {
	e := testbed.Require(t)
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	topic := testbed.Name(t, "t")
	t.Cleanup(func() {
		a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
		if err == nil {
			defer a.Close()
			_, _ = a.DeleteTopics(t.Context(), []string{topic})
		}
	})

	// No such topic yet: refused, naming the flag that creates it.
	withStdin(t, `{"sku":"a"}`+"\n")
	if code, _, errOut := runCLI("produce", "-brokers", e.Brokers, "-topic", topic); code != 2 ||
		!strings.Contains(errOut, "eosink: produce: topic "+topic+" does not exist: add -create-topic") {
		t.Fatalf("missing topic: exit %d, %q", code, errOut)
	}

	withStdin(t, "{\"sku\":\"a\",\"qty\":1}\n\n{\"sku\":\"b\",\"qty\":2}\r\n{\"sku\":7,\"qty\":3}\n")
	code, out, errOut := runCLI("produce", "-brokers", e.Brokers, "-topic", topic, "-create-topic", "-partitions", "3", "-key-field", "sku")
	if code != 0 || !strings.Contains(out, "topic "+topic+": created with 3 partition(s)\n") || !strings.Contains(out, ": 3 record(s) produced (partition ") {
		t.Fatalf("produce -create-topic: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	md, err := a.GetMetadata(&topic, false, 10000)
	a.Close()
	if err != nil || len(md.Topics[topic].Partitions) != 3 {
		t.Fatalf("the topic has %d partitions (%v), want 3", len(md.Topics[topic].Partitions), err)
	}

	// A file of KEY<TAB>JSON lines, to the existing topic (kept as it is), with the brokers and
	// the topic from a pipeline file.
	lines := filepath.Join(t.TempDir(), "lines.jsonl")
	if err := os.WriteFile(lines, []byte("k-1\t{\"sku\":\"c\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, fmt.Sprintf("kafka: {brokers: %q, group: g, topics: [%s]}\ndatabase: {url: \"postgres://u@127.0.0.1/db\"}\nsink: {type: clitest}\n", e.Brokers, topic))
	code, out, errOut = runCLI("produce", "-config", cfg, "-file", lines, "-tab-key", "-create-topic")
	if code != 0 || !strings.Contains(out, "topic "+topic+": exists already, not created\n") || !strings.Contains(out, ": 1 record(s) produced") {
		t.Fatalf("produce -config -file -tab-key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A line that is not JSON stops the command; the lines before it are delivered.
	withStdin(t, "{\"sku\":\"d\"}\nnot json\n{\"sku\":\"e\"}\n")
	code, out, errOut = runCLI("produce", "-brokers", e.Brokers, "-topic", topic)
	if code != 1 || !strings.Contains(errOut, "eosink: produce: line 2: the value is not JSON") || !strings.Contains(out, ": 1 record(s) produced") {
		t.Fatalf("a bad line: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	got := records(t, e, topic)
	var keysValues []string
	for _, r := range got {
		_, kv, _ := strings.Cut(r, " ")
		keysValues = append(keysValues, kv)
	}
	sort.Strings(keysValues)
	want := []string{` {"sku":"d"}`, `7 {"sku":7,"qty":3}`, `a {"sku":"a","qty":1}`, `b {"sku":"b","qty":2}`, `k-1 {"sku":"c"}`}
	if strings.Join(keysValues, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records (key value):\n%s\nwant:\n%s", strings.Join(keysValues, "\n"), strings.Join(want, "\n"))
	}
}

// TestProduceRefusals: produce's usage errors, before connecting, and a broker that cannot be
// reached, whose error never shows a secret property.
func TestProduceRefusals(t *testing.T) {
	t.Setenv("KAFKA_BOOTSTRAP_SERVERS", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-brokers", "127.0.0.1:1"}, "produce: -topic is required"},
		{[]string{"-topic", "t"}, "produce: no Kafka: set KAFKA_BOOTSTRAP_SERVERS, -brokers or -config"},
		{[]string{"-topic", "t", "-key-field", "id", "-tab-key"}, "produce: -key-field and -tab-key exclude each other"},
		{[]string{"-topic", "t", "-partitions", "3"}, "produce: -partitions needs -create-topic"},
		{[]string{"-topic", "t", "-partitions", "0", "-create-topic"}, "not a number of partitions"},
		{[]string{"-topic", "t", "-pipeline", "p"}, "flag provided but not defined: -pipeline"},
		{[]string{"-topic", "t", "-schema", "s"}, "eosink produce does not take -schema"},
	} {
		code, _, errOut := runCLI(append([]string{"produce"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("eosink produce %v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	withStdin(t, "{}\n")
	code, out, errOut := runCLI("produce", "-topic", "t", "-brokers", "127.0.0.1:1", "-kafka", "security.protocol=SASL_PLAINTEXT",
		"-kafka", "sasl.mechanism=PLAIN", "-kafka", "sasl.username=u", "-kafka", "sasl.password=pw-secret-in-flag")
	if code != 1 || strings.Contains(out+errOut, "pw-secret") || !strings.Contains(errOut, "eosink: produce: topic t: ") {
		t.Fatalf("unreachable broker: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
