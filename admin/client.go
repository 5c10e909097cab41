package admin

import (
	"maps"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/offsets"
)

// Client runs the operator commands on one schema of eosink tables and, for positions, lag
// and moves, on the Kafka cluster. It is safe for concurrent use. Create it with New.
type Client struct {
	pool   *pgxpool.Pool
	schema string
	ops    *offsets.Operator // the statements on the offsets and instances tables
	kafka  kafka.ConfigMap
	redact bool          // SetRedactErrorValues
	group  GroupSettings // what Unowned assumes of the groups (SetGroupSettings)
}

// New returns a Client on pool for the eosink tables in schema ("" means "eosink", the
// default of sink.Config.Schema). kafkaConfig configures the Kafka admin client and consumer
// that List, Plan and Reset open for the duration of a call: bootstrap.servers, plus TLS or
// SASL properties as needed. It may be nil for a Client used for dead letters only. New
// copies kafkaConfig and connects to nothing; the caller keeps owning pool.
func New(pool *pgxpool.Pool, schema string, kafkaConfig kafka.ConfigMap) *Client {
	if schema == "" {
		schema = "eosink"
	}
	m := kafka.ConfigMap{}
	maps.Copy(m, kafkaConfig)
	return &Client{pool: pool, schema: schema, ops: offsets.NewOperator(pool, schema), kafka: m}
}

// SetRedactErrorValues says how Replay writes the error of a record that fails again to its
// dead letter: without the record data PostgreSQL quotes when on, as the sink does with
// sink.Config.RedactErrorValues (see sink.ErrorText). Off by default. Set it before use.
func (c *Client) SetRedactErrorValues(on bool) { c.redact = on }

func (c *Client) table(name string) string { return pgx.Identifier{c.schema, name}.Sanitize() }

// kafkaConfig returns a copy of the Kafka configuration, for a client to add to.
func (c *Client) kafkaConfig() *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	maps.Copy(m, c.kafka)
	return &m
}

// brokers names the cluster in messages.
func (c *Client) brokers() string {
	s, _ := c.kafka["bootstrap.servers"].(string)
	return s
}
