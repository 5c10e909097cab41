package cdc

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/sink/internal/mapping"
	"github.com/eosink/eosink/sink/plugin"
)

// Config configures the cdc plugin. See the package documentation for an example.
type Config struct {
	// Format of keys and values: json (Connect's JsonConverter, with or without schemas,
	// detected per record) or avro (Confluent wire format through SchemaRegistry). Default
	// json.
	Format string `yaml:"format"`
	// SchemaRegistry is where avro finds its schemas; required for it. From a config file
	// it is the pipeline's schema_registry section (plugin.Config.SchemaRegistry).
	SchemaRegistry *plugin.SchemaRegistry `yaml:"-"`
	// Table is the target table template; ${source.schema}, ${source.table},
	// ${source.db} and ${topic} are replaced. A name without a schema goes to Schema.
	// Default "${source.schema}.${source.table}".
	Table string `yaml:"table"`
	// Schema is the target schema of a Table template without one. Default public.
	Schema string `yaml:"schema"`
	// Schemas lists the schemas that a template whose schema comes from the event (the
	// default ${source.schema}.${source.table}) may write; such a template is refused
	// without it. A template with a fixed schema (replica.${source.table}) writes that
	// schema only and needs none. eosink's own schemas (PipelineSchema, PositionsSchema),
	// information_schema and the pg_ schemas are refused always. Default none.
	Schemas []string `yaml:"schemas"`
	// TopicCheck is "debezium" to refuse (as poison) an event whose source table is not
	// the one its topic names under Debezium's topic naming, <topic.prefix>.<schema>.<table>,
	// whenever the target depends on the event's source (a ${source.*} variable in a
	// template, or a tables override): the producer of one table's topic then cannot write
	// another table. "off" for topics renamed by a topic-routing transform
	// (ByLogicalTableRouter, RegexRouter). Default "debezium".
	TopicCheck string `yaml:"topic_check"`
	// Tables overrides, per source table ("schema.table"), the target and its columns.
	Tables map[string]TableConfig `yaml:"tables"`
	// Include, when set, lists the only columns replicated; Exclude lists columns never
	// replicated. Both apply to every table unless the table's override sets its own.
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
	// Truncate applies truncate events (op t). Default false: they are skipped and logged.
	Truncate bool `yaml:"truncate"`
	// PositionsSchema holds cdc_positions. Default the pipeline's schema.
	PositionsSchema string `yaml:"positions_schema"`
	// Create creates a missing target table from the change event's schema (the
	// JsonConverter's with schemas.enable=true, or Avro's), with the Kafka key's fields as
	// its primary key, in the transaction of the batch that needs it. Its schema must
	// exist. Default false: a missing table stops the partition.
	Create bool `yaml:"create"`
	// Evolve is "add-columns" to add a nullable column, typed from the change event's
	// schema, when a replicated field has no column, in the transaction of the batch that
	// needs it. Columns are never dropped, narrowed or retyped. Default "" (off): such a
	// field makes its event poison.
	Evolve string `yaml:"evolve"`
	// MaxColumns is the widest table, in columns, that create makes and evolve grows; an
	// event that would need more is poison. Default 250 (DefaultMaxColumns).
	MaxColumns int `yaml:"max_columns"`
	// PipelineSchema is the pipeline's schema (sink.Config.Schema), refused as a target's.
	// From a config file it is the pipeline's. Default "eosink" (sink.DefaultSchema).
	PipelineSchema string `yaml:"-"`
	// UnavailableValuePlaceholder is the connector's unavailable.value.placeholder: what
	// Debezium sends, under the source's default REPLICA IDENTITY, for a TOASTed column an
	// update did not change (its text, its bytes for bytea, a list of it for arrays). A
	// column that holds it keeps its value: the key's earlier value in the batch, else the
	// replica's; with no row to keep it from, the change is poison. It is never written.
	// Default Debezium's, "__debezium_unavailable_value" (DefaultUnavailablePlaceholder).
	UnavailableValuePlaceholder string `yaml:"unavailable_value_placeholder"`
	// DecimalHandling is the connector's decimal.handling.mode: precise, string or double.
	// It matters only for JSON without schemas (schemas.enable=false), whose numeric values
	// do not say how they are encoded: precise's base64 bytes "0000" (-29293.56 in a
	// numeric(12,2)) are also the decimal text 0000. Default "" (unset): each value is read
	// the one way it can be, and the first value that both precise and string could have
	// written stops its partition (*AmbiguousDecimalError), naming this option. A value the
	// set mode never writes is poison. With schemas (JsonConverter schemas.enable=true,
	// Avro) the schema says it and this option is not used.
	DecimalHandling string `yaml:"decimal_handling"`

	// Consistency is how changes reach the replica: "partition" applies each Kafka
	// partition's batches on their own (a source transaction that spans tables or
	// partitions becomes visible in pieces); "transaction" applies every source
	// transaction whole, in source commit order, in one replica transaction with the
	// stored offsets of every partition it involved, from Debezium's transaction metadata
	// (provide.transaction.metadata=true). See docs/cdc.md, "Transaction consistency".
	// Default partition.
	Consistency string `yaml:"consistency"`
	// TransactionTopic is the connector's transaction topic, <topic.prefix>.transaction,
	// which must have one partition. Required with consistency: transaction; the sink reads
	// it besides the pipeline's topics.
	TransactionTopic string `yaml:"transaction_topic"`
	// MaxHeldEvents and MaxHeldBytes bound the changes held while their transactions are
	// assembled, all together. Defaults 100000 events and 64 MiB. The transaction that
	// commits next streams into one open replica transaction rather than pass them; the
	// partitions of later ones pause until there is room (docs/cdc.md, "Large transactions").
	MaxHeldEvents int   `yaml:"max_held_events"`
	MaxHeldBytes  int64 `yaml:"max_held_bytes"`
	// LeaseTimeout is how long the instance that holds the replica's partitions may go
	// without renewing its lease before a standby takes over (consistency: transaction).
	// Default 10s.
	LeaseTimeout *time.Duration `yaml:"lease_timeout"`
	// IncompleteAfter is how long the sink waits for the missing changes of a source
	// transaction whose END it read, with every partition read to its end, before it stops
	// on sink.ErrSetIncomplete (consistency: transaction). Default 2m; at least 1s.
	IncompleteAfter *time.Duration `yaml:"incomplete_after"`
}

// Consistency values.
const (
	ConsistencyPartition   = "partition"
	ConsistencyTransaction = "transaction"
)

// TableConfig overrides the routing of one source table.
type TableConfig struct {
	Table   string   `yaml:"table"`
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

const defaultTemplate = "${source.schema}.${source.table}"

var templateVar = regexp.MustCompile(`\$\{([^}]*)\}`)

var templateVars = []string{"source.schema", "source.table", "source.db", "topic"}

// template is a target table name with variables, split at its dots into schema and table.
type template struct {
	parts []string
}

func parseTemplate(s, schema string) (template, error) {
	if strings.TrimSpace(s) == "" {
		return template{}, errors.New("empty table name")
	}
	parts := mapping.SplitTableTemplate(s)
	if len(parts) > 2 || slices.Contains(parts, "") {
		return template{}, fmt.Errorf("%q is not table or schema.table", s)
	}
	for _, p := range parts {
		for _, m := range templateVar.FindAllStringSubmatch(p, -1) {
			if !slices.Contains(templateVars, m[1]) {
				return template{}, fmt.Errorf("%q: unknown variable ${%s} (want %s)", s, m[1], strings.Join(templateVars, ", "))
			}
		}
		if strings.Contains(templateVar.ReplaceAllString(p, ""), "$") {
			return template{}, fmt.Errorf("%q: a $ that is not ${variable}", s)
		}
	}
	if len(parts) == 1 {
		parts = []string{schema, parts[0]}
	}
	return template{parts: parts}, nil
}

// fixed reports whether part i (0 the schema, 1 the table) has no variable.
func (t template) fixed(i int) bool { return !strings.Contains(t.parts[i], "${") }

// fromSource reports whether the template takes a variable from the event's source.
func (t template) fromSource() bool {
	for _, p := range t.parts {
		if strings.Contains(p, "${source.") {
			return true
		}
	}
	return false
}

// render returns the target table for a source table.
func (t template) render(db, schema, table, topic string) pgx.Identifier {
	vars := map[string]string{"source.schema": schema, "source.table": table, "source.db": db, "topic": topic}
	id := make(pgx.Identifier, len(t.parts))
	for i, p := range t.parts {
		id[i] = templateVar.ReplaceAllStringFunc(p, func(v string) string { return vars[v[2:len(v)-1]] })
	}
	return id
}

// route is what a source table resolves to before the target's catalog is read.
type route struct {
	tmpl             template
	include, exclude []string
	ph               placeholder // the connector's unavailable-value placeholder
	decimals         string      // Config.DecimalHandling
}

// routes holds the default route and the per-table overrides.
type routes struct {
	def  route
	byST map[string]route // "schema.table" of the source
}

func (c *Config) routes() (routes, error) {
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.Table == "" {
		c.Table = defaultTemplate
	}
	t, err := parseTemplate(c.Table, c.Schema)
	if err != nil {
		return routes{}, fmt.Errorf("table: %w", err)
	}
	if len(c.Include) > 0 && len(c.Exclude) > 0 {
		return routes{}, errors.New("include and exclude are exclusive")
	}
	rs := routes{def: route{tmpl: t, include: c.Include, exclude: c.Exclude, ph: newPlaceholder(c.UnavailableValuePlaceholder)},
		byST: map[string]route{}}
	rs.def.decimals = c.DecimalHandling
	for st, tc := range c.Tables {
		if s, tb, ok := strings.Cut(st, "."); !ok || s == "" || tb == "" {
			return routes{}, fmt.Errorf("tables: key %q is not schema.table of a source table", st)
		}
		r := rs.def
		if tc.Table != "" {
			if r.tmpl, err = parseTemplate(tc.Table, c.Schema); err != nil {
				return routes{}, fmt.Errorf("tables.%s.table: %w", st, err)
			}
		}
		if len(tc.Include) > 0 && len(tc.Exclude) > 0 {
			return routes{}, fmt.Errorf("tables.%s: include and exclude are exclusive", st)
		}
		if len(tc.Include) > 0 || len(tc.Exclude) > 0 {
			r.include, r.exclude = tc.Include, tc.Exclude
		}
		rs.byST[st] = r
	}
	return rs, nil
}

func (rs routes) lookup(schema, table string) route {
	if r, ok := rs.byST[schema+"."+table]; ok {
		return r
	}
	return rs.def
}

// replicated reports whether column col is replicated under r.
func (r route) replicated(col string) bool {
	if len(r.include) > 0 {
		return slices.Contains(r.include, col)
	}
	return !slices.Contains(r.exclude, col)
}
