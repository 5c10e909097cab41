package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/kafkaconf"
)

// Topics and routes.
//
// Config.Topics lists topic names and, like librdkafka, patterns: an entry starting with ^
// is a regular expression, and the consumer subscribes to every topic it matches, now and
// later (librdkafka finds new topics by refreshing its metadata every
// topic.metadata.refresh.interval.ms, 5 minutes by default). A new topic is new
// (topic, partition) claims: nothing else in the engine assumes a fixed set of topics.
//
// A plugin that writes each topic somewhere of its own implements TopicRouter. Its routes
// are checked for every topic the sink is about to consume: listed names in New (a
// *ConfigError naming Topics[i]), the topics a pattern matches when Run starts (Run
// returns the *NoRouteError values, joined, before it subscribes), and a topic created
// later when its partitions are claimed (the partition stops loudly, reason no_route; the
// other partitions go on). A record is never dropped for want of a route.

// ErrNoRoute matches every *NoRouteError.
var ErrNoRoute = errors.New("eosink: no route for the topic")

// NoRouteError says that a plugin has nowhere to write a topic's records.
type NoRouteError struct {
	Topic string
	// Pattern is the Topics pattern that matched Topic; empty for a listed name.
	Pattern string
	// Reason is the plugin's explanation, for example which routes there are.
	Reason string
}

func (e *NoRouteError) Error() string {
	via := ""
	if e.Pattern != "" {
		via = fmt.Sprintf(" (matched by the subscription %q)", e.Pattern)
	}
	return fmt.Sprintf("eosink: no route for topic %q%s: %s", e.Topic, via, e.Reason)
}

// Is reports whether target is ErrNoRoute.
func (e *NoRouteError) Is(target error) bool { return target == ErrNoRoute }

// TopicRouter is implemented by plugins that choose where to write by topic (the table and
// upsert plugins' routes). The sink calls CheckTopic, which must do no I/O, for every topic
// it will consume: in New for listed topic names, in Run for the topics the patterns of
// Config.Topics match at start, and on the partition's goroutine before Open for every
// claimed partition. A non-nil error means the plugin has no route for the topic: a
// *ConfigError from New, an error from Run before anything is consumed, or, for a topic
// that appeared later, a stopped partition (reason no_route). Return a *NoRouteError, or
// any error, which is then wrapped in one.
type TopicRouter interface {
	CheckTopic(topic string) error
}

// checkRoute asks p about topic; nil when p does not route by topic.
func checkRoute(p Plugin, topic, pattern string) error {
	r, ok := p.(TopicRouter)
	if !ok {
		return nil
	}
	err := r.CheckTopic(topic)
	if err == nil {
		return nil
	}
	var nr *NoRouteError
	if errors.As(err, &nr) {
		if nr.Pattern == "" && pattern != "" {
			c := *nr
			c.Pattern = pattern
			return &c
		}
		return err
	}
	return &NoRouteError{Topic: topic, Pattern: pattern, Reason: err.Error()}
}

// subscription is Config.Topics split into names and compiled patterns, with the topics
// librdkafka's topic.blacklist hides from pattern matches.
type subscription struct {
	names    []string
	patterns []*regexp.Regexp
	ignored  []*regexp.Regexp
}

// ignore sets the topic.blacklist property: regular expressions separated by commas, as
// librdkafka reads them (one that does not compile is left to librdkafka to refuse).
func (s *subscription) ignore(blacklist any) {
	list, _ := blacklist.(string)
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if re, err := regexp.Compile(p); err == nil {
			s.ignored = append(s.ignored, re)
		}
	}
}

func newSubscription(topics []string) (subscription, error) {
	var s subscription
	for _, t := range topics {
		if !kafkaconf.IsTopicPattern(t) {
			s.names = append(s.names, t)
			continue
		}
		re, err := regexp.Compile(t)
		if err != nil {
			return subscription{}, err
		}
		s.patterns = append(s.patterns, re)
	}
	return s, nil
}

// pattern returns the first pattern matching topic, "" for none (or when topic.blacklist
// hides the topic).
func (s subscription) pattern(topic string) string {
	for _, re := range s.ignored {
		if re.MatchString(topic) {
			return ""
		}
	}
	for _, re := range s.patterns {
		if re.MatchString(topic) {
			return re.String()
		}
	}
	return ""
}

// checkTopics fails fast, with a clear message, when the broker cannot be reached or a
// listed topic does not exist, and returns the topics the sink is about to consume: the
// listed ones and those the patterns match now. A topic that is unknown is asked for
// again for up to topicWait, since a topic created a moment ago may not be in the broker's
// metadata yet. A pattern that matches nothing yet is no error (its topics may be created
// later); it is logged.
func (s *Sink) checkTopics(ctx context.Context) ([]string, error) {
	const topicWait = 10 * time.Second
	deadline := time.Now().Add(topicWait)
	brokerTimeout := func() time.Duration {
		timeout := time.Until(deadline)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
			timeout = time.Until(d)
		}
		return max(timeout, time.Second)
	}
	sub, err := newSubscription(s.cfg.Topics)
	if err != nil {
		return nil, err // Validate compiled them already
	}
	sub.ignore(s.cfg.Kafka["topic.blacklist"])
	topics := slices.Clone(sub.names)
	for _, t := range sub.names {
		for {
			md, err := s.metadata(ctx, &t, false, brokerTimeout())
			if err != nil {
				return nil, err
			}
			tm, ok := md.Topics[t]
			if ok && tm.Error.Code() == kafka.ErrNoError {
				break
			}
			unknown := !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic
			if !unknown {
				return nil, fmt.Errorf("eosink: topic %q: %w", t, tm.Error)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("eosink: topic %q does not exist on %s", t, s.brokers())
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	if len(sub.patterns) == 0 {
		return topics, nil
	}
	md, err := s.metadata(ctx, nil, true, brokerTimeout())
	if err != nil {
		return nil, err
	}
	matched := map[string][]string{}
	for name, tm := range md.Topics {
		if tm.Error.Code() != kafka.ErrNoError || slices.Contains(sub.names, name) {
			continue
		}
		if p := sub.pattern(name); p != "" {
			topics = append(topics, name)
			matched[p] = append(matched[p], name)
		}
	}
	for _, re := range sub.patterns {
		p := re.String()
		if len(matched[p]) == 0 {
			s.log.Warn("no topic matches the pattern yet; new matching topics are picked up at librdkafka's next metadata refresh (topic.metadata.refresh.interval.ms)",
				"pattern", p)
		} else {
			slices.Sort(matched[p])
			s.log.Info("topics matching the pattern", "pattern", p, "topics", matched[p])
		}
	}
	slices.Sort(topics[len(sub.names):])
	return topics, nil
}

// checkRoutes asks a routing plugin about every topic about to be consumed (Run, before
// subscribing). Listed names were checked by New already; patterns' matches are checked
// here.
func (s *Sink) checkRoutes(topics []string) error {
	sub, _ := newSubscription(s.cfg.Topics)
	sub.ignore(s.cfg.Kafka["topic.blacklist"])
	var errs []error
	for _, t := range topics {
		p := sub.pattern(t)
		if slices.Contains(sub.names, t) {
			p = ""
		}
		if err := checkRoute(s.plugin, t, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Sink) brokers() string {
	if s.cfg.Brokers != "" {
		return s.cfg.Brokers
	}
	return fmt.Sprint(s.cfg.Kafka["bootstrap.servers"])
}
