package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/cli/internal/pipeline"
	"github.com/eosink/eosink/internal/kafkaflag"
	"github.com/eosink/eosink/internal/pgerr"
)

// opsFlags are the connection flags of the offsets and lag commands.
type opsFlags struct {
	dbURL, schema, brokers string
	config                 string
	kafkaProps             kafkaflag.Properties
	json                   bool

	file *pipeline.Pipeline // loaded from -config by client
}

// opsFlagNames are the flags register adds, for the commands' help.
var opsFlagNames = []string{"database-url", "schema", "brokers", "kafka", "config", "json"}

func (o *opsFlags) register(fs *flag.FlagSet) {
	// Defaults come from the environment after parsing, so that -h never prints a password.
	fs.StringVar(&o.dbURL, "database-url", "", "PostgreSQL connection string (default: env DATABASE_URL)")
	fs.StringVar(&o.schema, "schema", "eosink", "schema of the offsets table")
	fs.StringVar(&o.brokers, "brokers", "", "Kafka bootstrap servers (default: env KAFKA_BOOTSTRAP_SERVERS)")
	o.kafkaProps = kafkaflag.Properties{}
	fs.Var(&o.kafkaProps, "kafka", "librdkafka property key=value for the broker connection (TLS, SASL); repeatable. "+
		"Shows in ps: prefer -config or env "+kafkaEnvPrefix+"<NAME> for secrets")
	fs.StringVar(&o.config, "config", "", "pipeline config file: its database, schema, brokers, Kafka connection properties "+
		"(security.*, sasl.*, ssl.*, ...) and pipeline (the default -pipeline)")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

// kafkaEnvPrefix starts the environment variables that set librdkafka properties of the
// operator commands: EOSINK_KAFKA_PROPERTY_SASL_PASSWORD sets sasl.password ("_" is ".",
// "__" is "_").
const kafkaEnvPrefix = "EOSINK_KAFKA_PROPERTY_"

// envKafkaProperties reads the librdkafka properties set in environ (os.Environ's form).
func envKafkaProperties(environ []string) map[string]string {
	props := map[string]string{}
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		rest, found := strings.CutPrefix(name, kafkaEnvPrefix)
		if !ok || !found || rest == "" {
			continue
		}
		parts := strings.Split(strings.ToLower(rest), "__")
		for i := range parts {
			parts[i] = strings.ReplaceAll(parts[i], "_", ".")
		}
		props[strings.Join(parts, "_")] = v
	}
	return props
}

// connectionProperty reports whether a property of a pipeline file is about reaching the
// cluster (TLS, SASL, sockets, client identity), which the operator commands take from it;
// consumer settings (session.timeout.ms, isolation.level, ...) are the sink's.
func connectionProperty(key string) bool {
	for _, p := range []string{"security.", "sasl.", "ssl.", "ssl_", "socket.", "broker.", "client.", "enable.ssl.", "enable.sasl.", "https."} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return key == "bootstrap.servers"
}

// load reads -config, refusing the flags it replaces. pipelineFlag, when not nil, defaults to
// the file's pipeline.
func (o *opsFlags) load(fs *flag.FlagSet, stderr io.Writer, pipelineFlag *string) error {
	if err := o.kafkaProps.Err("kafka"); err != nil {
		return usageError{err}
	}
	if o.config == "" {
		return nil
	}
	var conflict []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "database-url" || f.Name == "schema" || f.Name == "brokers" {
			conflict = append(conflict, "-"+f.Name)
		}
	})
	if len(conflict) > 0 {
		return usageError{fmt.Errorf("-config names the database, schema and brokers; drop %s", strings.Join(conflict, " and "))}
	}
	p, err := pipeline.Load(o.config, pipeline.Options{LogOutput: stderr})
	if err != nil {
		return err
	}
	o.file = p
	o.dbURL, o.schema, o.brokers = p.Config.DatabaseURL, p.Config.Schema, p.Config.Brokers
	if pipelineFlag != nil && *pipelineFlag == "" {
		*pipelineFlag = p.Config.Pipeline
	}
	return nil
}

// kafkaConfig is the broker connection's configuration: from lowest to highest precedence,
// the EOSINK_KAFKA_PROPERTY_* environment variables, the -config file's connection
// properties, the -kafka flags, then the brokers.
func (o *opsFlags) kafkaConfig() kafka.ConfigMap {
	kc := kafka.ConfigMap{}
	for k, v := range envKafkaProperties(os.Environ()) {
		kc[k] = v
	}
	if o.file != nil {
		for k, v := range o.file.Config.Kafka {
			if connectionProperty(k) {
				kc[k] = v
			}
		}
	}
	maps.Copy(kc, o.kafkaProps.ConfigMap())
	if o.brokers != "" {
		kc["bootstrap.servers"] = o.brokers
	}
	return kc
}

func (o *opsFlags) client(ctx context.Context) (*admin.Client, func(), error) {
	if o.dbURL == "" {
		o.dbURL = os.Getenv("DATABASE_URL")
	}
	if o.brokers == "" && o.file == nil {
		o.brokers = os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	}
	if o.dbURL == "" {
		return nil, nil, usageError{errors.New("no database: set DATABASE_URL, -database-url or -config")}
	}
	kc := o.kafkaConfig()
	if s, _ := kc["bootstrap.servers"].(string); s == "" {
		return nil, nil, usageError{errors.New("no Kafka: set KAFKA_BOOTSTRAP_SERVERS, -brokers or -config")}
	}
	pool, err := connectDB(ctx, o.dbURL)
	if err != nil {
		return nil, nil, err
	}
	return admin.New(pool, o.schema, kc), pool.Close, nil
}

// connectDB opens a pool and checks the connection. Its errors never show a password of url:
// pgerr.RedactError parses url (every libpq form) and removes each one from their text.
func connectDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, pgerr.RedactError(fmt.Errorf("database URL: %w", err), url)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		cc := pool.Config().ConnConfig
		return nil, pgerr.RedactError(fmt.Errorf("cannot connect to PostgreSQL at %s:%d/%s: %w", cc.Host, cc.Port, cc.Database, err), url)
	}
	return pool, nil
}
