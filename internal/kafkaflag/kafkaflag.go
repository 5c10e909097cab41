// Package kafkaflag is a repeatable -kafka key=value command-line flag for librdkafka
// properties.
package kafkaflag

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Properties collects key=value pairs; *Properties implements flag.Value. Its zero value is
// ready to use.
//
// Values may be secrets (sasl.password=...), and the flag package prints the argument of a
// flag whose Set fails: Set therefore never fails. An argument that is not key=value
// (sasl.password:X) is counted, without its text, and Err reports it after parsing.
type Properties struct {
	m         kafka.ConfigMap
	malformed int
}

// String lists the keys only: values may be secrets (SASL passwords), and flag prints String
// in messages.
func (p *Properties) String() string {
	if p == nil {
		return ""
	}
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// Set adds one key=value. An argument without "=" or without a key is counted for Err.
func (p *Properties) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(key) == "" {
		p.malformed++
		return nil
	}
	if p.m == nil {
		p.m = kafka.ConfigMap{}
	}
	p.m[key] = v
	return nil
}

// Err reports the arguments that were not key=value, without their text (it may be a
// secret), naming the flag name.
func (p *Properties) Err(name string) error {
	if p == nil || p.malformed == 0 {
		return nil
	}
	return fmt.Errorf("-%s: %d argument(s) not of the form key=value (not shown: they may hold a secret); write -%s key=value", name, p.malformed, name)
}

// ConfigMap returns a copy of the properties set.
func (p *Properties) ConfigMap() kafka.ConfigMap {
	if p == nil {
		return kafka.ConfigMap{}
	}
	m := kafka.ConfigMap{}
	maps.Copy(m, p.m)
	return m
}
