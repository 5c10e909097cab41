package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// stdin is what eosink produce reads without -file; tests replace it.
var stdin io.Reader = os.Stdin

var produceHelp = help{
	usage: "eosink produce -topic T [-file FILE] [-key-field F | -tab-key] [-create-topic [-partitions N]] [-config FILE | -brokers HOSTS] [-kafka key=value]",
	desc:  "Produce each JSON line of standard input (or FILE) as a record's value, to try a pipeline; empty lines are skipped.",
	flags: []string{"topic", "file", "key-field", "tab-key", "create-topic", "partitions", "brokers", "kafka", "config"},
}

// maxLine is the longest line produce reads: 8 MiB, above Kafka's default record limit.
const maxLine = 8 << 20

// produceCmd: eosink produce. The broker and its connection properties come as for the
// operator commands (opsFlags); no database is needed. Nothing it prints holds a property
// value.
func produceCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	topic := fs.String("topic", "", "the topic to produce to (required; with -config, default the file's topic when it lists one, not a pattern)")
	file := fs.String("file", "", "read the lines from `FILE` (default: standard input)")
	keyField := fs.String("key-field", "", "the record key is this top-level `field` of each line's JSON object (a string as is, anything else as JSON)")
	tabKey := fs.Bool("tab-key", false, "each line is KEY<TAB>JSON: the text before the first tab is the key")
	create := fs.Bool("create-topic", false, "create the topic first (the broker's default replication factor); an existing topic is used as it is")
	var partitions int
	intVar(fs, &partitions, "partitions", 1, 1, math.MaxInt32, "a number of partitions (1 or more)", "with -create-topic: create the topic with `N` partitions")
	fs.Usage = func() { produceHelp.print(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if err := produceHelp.check(fs, "eosink produce"); err != nil {
		return err
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("produce: unexpected arguments %v", fs.Args())}
	case *keyField != "" && *tabKey:
		return usageError{errors.New("produce: -key-field and -tab-key exclude each other")}
	case setFlags["partitions"] && !*create:
		return usageError{errors.New("produce: -partitions needs -create-topic")}
	}
	if err := o.load(fs, stderr, nil); err != nil {
		return err
	}
	if ts := o.topics(); *topic == "" && len(ts) == 1 && !strings.HasPrefix(ts[0], "^") {
		*topic = ts[0]
	}
	if *topic == "" {
		return usageError{errors.New("produce: -topic is required")}
	}
	if o.brokers == "" && o.file == nil {
		o.brokers = os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	}
	kc := o.kafkaConfig()
	if s, _ := kc["bootstrap.servers"].(string); s == "" {
		return usageError{errors.New("produce: no Kafka: set KAFKA_BOOTSTRAP_SERVERS, -brokers or -config")}
	}
	in := stdin
	if *file != "" && *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		defer f.Close()
		in = f
	}
	err := produce(ctx, kc, *topic, *create, partitions, in, lineParser(*keyField, *tabKey), stdout)
	if err != nil && o.file != nil {
		err = errors.New(o.file.Redact(err.Error()))
	}
	return err
}

// topics are the -config file's topics; none without one.
func (o *opsFlags) topics() []string {
	if o.file == nil {
		return nil
	}
	return o.file.Config.Topics
}

// lineParser returns the key and value of a line, or why the line is not one.
func lineParser(keyField string, tabKey bool) func(line []byte) (key, value []byte, err error) {
	return func(line []byte) ([]byte, []byte, error) {
		var key []byte
		value := line
		if tabKey {
			k, v, ok := bytes.Cut(line, []byte("\t"))
			if !ok {
				return nil, nil, errors.New("no tab: -tab-key wants KEY<TAB>JSON")
			}
			key, value = k, v
		}
		if !json.Valid(value) {
			return nil, nil, errors.New("the value is not JSON")
		}
		if keyField != "" {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(value, &obj); err != nil {
				return nil, nil, fmt.Errorf("-key-field %s: the value is not a JSON object", keyField)
			}
			raw, ok := obj[keyField]
			if !ok {
				return nil, nil, fmt.Errorf("-key-field %s: the object has no such field", keyField)
			}
			key = raw
			var s string
			if json.Unmarshal(raw, &s) == nil {
				key = []byte(s)
			}
		}
		return key, value, nil
	}
}

// produce creates the topic when asked, checks that it exists, then produces a record per
// non-empty line of in (idempotent, acks=all), waits for every delivery and prints how many
// records went to which partitions. A line that is not a record stops the command before
// anything more is produced; the lines before it are delivered.
func produce(ctx context.Context, kc kafka.ConfigMap, topic string, create bool, partitions int, in io.Reader,
	parse func([]byte) ([]byte, []byte, error), stdout io.Writer) error {
	kc["enable.idempotence"] = true
	kc["acks"] = "all"
	pr, err := kafka.NewProducer(&kc)
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	defer pr.Close()
	if err := ensureTopic(ctx, pr, topic, create, partitions, stdout); err != nil {
		return err
	}
	events := make(chan kafka.Event, 1024)
	type result struct {
		delivered int
		perPart   map[int32]int
		err       error
		failed    int
	}
	sent, done := 0, make(chan result)
	expect := make(chan int, 1)
	go func() {
		r := result{perPart: map[int32]int{}}
		total := -1
		for n := 0; total < 0 || n < total; {
			select {
			case t := <-expect:
				total = t
			case ev := <-events:
				n++
				m, ok := ev.(*kafka.Message)
				switch {
				case !ok:
				case m.TopicPartition.Error != nil:
					r.failed++
					if r.err == nil {
						r.err = m.TopicPartition.Error
					}
				default:
					r.delivered++
					r.perPart[m.TopicPartition.Partition]++
				}
			}
		}
		done <- r
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var stop error
	for line := 1; sc.Scan(); line++ {
		if ctx.Err() != nil {
			stop = ctx.Err()
			break
		}
		text := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		key, value, err := parse(text)
		if err != nil {
			stop = fmt.Errorf("produce: line %d: %w", line, err)
			break
		}
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: bytes.Clone(key), Value: bytes.Clone(value)}
		for {
			err := pr.Produce(msg, events)
			if kerr, ok := err.(kafka.Error); ok && kerr.Code() == kafka.ErrQueueFull {
				pr.Flush(100) // wait for deliveries to make room
				continue
			}
			if err != nil {
				stop = fmt.Errorf("produce: line %d: %w", line, err)
			}
			break
		}
		if stop != nil {
			break
		}
		sent++
	}
	if err := sc.Err(); err != nil && stop == nil {
		stop = fmt.Errorf("produce: reading the lines: %w", err)
	}
	expect <- sent
	r := <-done
	fmt.Fprintf(stdout, "topic %s: %d record(s) produced%s\n", term(topic), r.delivered, partitionCounts(r.perPart))
	if r.err != nil {
		return fmt.Errorf("produce: %d of %d record(s) not delivered: %w", r.failed, sent, r.err)
	}
	return stop
}

// partitionCounts writes how many records went to each partition: " (partition 0: 3, 1: 2)".
func partitionCounts(per map[int32]int) string {
	if len(per) == 0 {
		return ""
	}
	var b bytes.Buffer
	for p := int32(0); len(per) > 0; p++ {
		n, ok := per[p]
		if !ok {
			continue
		}
		delete(per, p)
		if b.Len() == 0 {
			fmt.Fprintf(&b, " (partition %d: %d", p, n)
		} else {
			fmt.Fprintf(&b, ", %d: %d", p, n)
		}
	}
	return b.String() + ")"
}

// ensureTopic creates topic with -create-topic (an existing one is kept, and said so) and
// refuses a topic the broker does not have.
func ensureTopic(ctx context.Context, pr *kafka.Producer, topic string, create bool, partitions int, stdout io.Writer) error {
	a, err := kafka.NewAdminClientFromProducer(pr)
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	defer a.Close()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if create {
		res, err := a.CreateTopics(actx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}},
			kafka.SetAdminOperationTimeout(20*time.Second))
		if err != nil {
			return fmt.Errorf("produce: create topic %s: %w", term(topic), err)
		}
		switch code := res[0].Error.Code(); code {
		case kafka.ErrNoError:
			fmt.Fprintf(stdout, "topic %s: created with %d partition(s)\n", term(topic), partitions)
		case kafka.ErrTopicAlreadyExists:
			fmt.Fprintf(stdout, "topic %s: exists already, not created\n", term(topic))
		default:
			return fmt.Errorf("produce: create topic %s: %w", term(topic), res[0].Error)
		}
	}
	// The metadata may lag behind a topic just created: ask again until it has it.
	for {
		md, err := a.GetMetadata(&topic, false, 5000)
		if err != nil {
			return fmt.Errorf("produce: topic %s: %w", term(topic), err)
		}
		if tm, ok := md.Topics[topic]; ok && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) > 0 {
			return nil
		}
		if !create {
			return usageError{fmt.Errorf("produce: topic %s does not exist: add -create-topic (and -partitions N)", term(topic))}
		}
		select {
		case <-actx.Done():
			return fmt.Errorf("produce: topic %s is not in the broker's metadata after its creation", term(topic))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
