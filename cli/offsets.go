package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgconn"
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

// parseInterleaved parses flags that may stand before and after positional arguments.
// onFirst, when not nil, is called with the first positional argument as soon as it is read
// (a subcommand: its -h is then its own).
func parseInterleaved(fs *flag.FlagSet, args []string, onFirst func(string)) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, parseError(err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		if len(pos) == 0 && onFirst != nil {
			onFirst(fs.Arg(0))
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// offsets' subcommands, for their -h.
var offsetsHelp = map[string]help{
	"": {usage: "eosink offsets list|set|reset [flags]",
		desc: "Show or move the stored positions; see eosink offsets list -h and eosink offsets set -h."},
	"list": {usage: "eosink offsets list [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc:  "Print stored positions with epochs, owners, last commit, log range, lag and Kafka's committed offset.",
		flags: append([]string{"pipeline"}, opsFlagNames...)},
	"set": {usage: "eosink offsets set -pipeline P [-topic T [-partition N]] -to earliest|latest|OFFSET|TIME -reason TEXT -operator NAME [-accept-new-topic] [-dry-run]",
		desc:  "Move stored positions in one audited transaction, fencing the current owner, which claims again at the new position (reset is the same).",
		flags: append([]string{"pipeline", "topic", "partition", "to", "operator", "reason", "dry-run", "accept-new-topic"}, opsFlagNames...)},
}

func init() { offsetsHelp["reset"] = offsetsHelp["set"] }

// offsetsCmd: eosink offsets list|set|reset.
func offsetsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink offsets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (list: default all; set: required; with -config, default the file's)")
	topic := fs.String("topic", "", "set: only this topic (needed when the pipeline has no rows yet)")
	var partition int
	intVar(fs, &partition, "partition", -1, -1, math.MaxInt32, "a partition number (0 to 2147483647; -1: every partition)", "set: only partition `N` (needs -topic)")
	to := fs.String("to", "", "set: earliest, latest, an offset, or an RFC 3339 time")
	operator := fs.String("operator", "", "set: who makes the change, for the audit table (default: env USER)")
	reason := fs.String("reason", "", "set: why, for the audit table")
	dryRun := fs.Bool("dry-run", false, "set: print the changes without making them")
	acceptNewTopic := fs.Bool("accept-new-topic", false, "set: store the topic's current id (after it was deleted and created again)")
	h := offsetsHelp[""]
	fs.Usage = func() { h.print(fs.Output(), fs) }
	pos, err := parseInterleaved(fs, args, func(sub string) {
		if sh, ok := offsetsHelp[sub]; ok {
			h = sh
		}
	})
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError{errors.New("offsets: want exactly one of list, set, reset")}
	}
	if _, ok := offsetsHelp[pos[0]]; !ok || pos[0] == "" {
		return usageError{fmt.Errorf("offsets: unknown subcommand %q (want list, set or reset)", pos[0])}
	}
	if err := h.check(fs, "eosink offsets "+pos[0]); err != nil {
		return err
	}
	if err := o.load(fs, stderr, pipeline); err != nil {
		return err
	}
	if *operator == "" {
		*operator = os.Getenv("USER")
	}
	if pos[0] != "list" {
		// Checked before connecting, and naming the flag that is missing.
		switch {
		case *pipeline == "":
			return usageError{errors.New("offsets set: -pipeline is required")}
		case *to == "":
			return usageError{errors.New("offsets set: -to is required (earliest, latest, an offset, or an RFC 3339 time)")}
		case checkTarget(*to) != nil:
			return checkTarget(*to)
		case *dryRun:
		case strings.TrimSpace(*reason) == "":
			return usageError{errors.New("offsets set: -reason is required (it goes to the audit table)")}
		case strings.TrimSpace(*operator) == "":
			return usageError{errors.New("offsets set: -operator is required (it goes to the audit table; USER is not set)")}
		}
	}
	c, closeFn, err := o.client(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	switch pos[0] {
	case "list":
		ps, err := c.List(ctx, *pipeline)
		if err != nil {
			return err
		}
		if err := printPositions(stdout, ps, o.json, false); err != nil {
			return err
		}
		warnDivergence(stderr, ps)
		return nil
	case "set", "reset":
		if *pipeline == "" {
			return usageError{errors.New("offsets set: -pipeline is required")}
		}
		if *to == "" {
			return usageError{errors.New("offsets set: -to is required (earliest, latest, an offset, or an RFC 3339 time)")}
		}
		target, err := admin.ParseTarget(*to)
		if err != nil {
			return checkTarget(*to)
		}
		if partition >= 0 && *topic == "" {
			return usageError{errors.New("offsets set: -partition needs -topic")}
		}
		sel := admin.Selector{Pipeline: *pipeline, Topic: *topic, AcceptNewTopic: *acceptNewTopic}
		if partition >= 0 {
			p := int32(partition)
			sel.Partition = &p
		}
		if *dryRun {
			changes, err := c.Plan(ctx, sel, target)
			if err != nil {
				return err
			}
			if err := printChanges(stdout, changes, o.json); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "dry run: nothing changed")
			return nil
		}
		changes, err := c.Reset(ctx, sel, target, *operator, *reason, 5)
		if err != nil {
			return err
		}
		return printChanges(stdout, changes, o.json)
	default:
		return usageError{fmt.Errorf("offsets: unknown subcommand %q (want list, set or reset)", pos[0])}
	}
}

// checkTarget checks -to before anything connects.
func checkTarget(to string) error {
	if _, err := admin.ParseTarget(to); err != nil {
		return usageError{fmt.Errorf("offsets set: -to: %w", err)}
	}
	return nil
}

// listPositions parses the flags shared by lag and status and lists the positions.
func listPositions(ctx context.Context, name string, args []string, stderr io.Writer) ([]admin.Position, bool, error) {
	ps, _, asJSON, err := listPositionsAndDead(ctx, name, args, stderr, false, nil)
	return ps, asJSON, err
}

// listPositionsAndDead is listPositions, with the dead letters per pipeline when withDead.
// With ob non-nil (status), the schema's outbox status is read too (nil when it has none).
func listPositionsAndDead(ctx context.Context, name string, args []string, stderr io.Writer, withDead bool, ob **admin.OutboxStatus) ([]admin.Position, map[string]int64, bool, error) {
	fs := flag.NewFlagSet("eosink "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (default: all; with -config, the file's)")
	h := lagHelp[name]
	fs.Usage = func() { h.print(fs.Output(), fs) }
	if pos, err := parseInterleaved(fs, args, nil); err != nil {
		return nil, nil, false, err
	} else if len(pos) > 0 {
		return nil, nil, false, usageError{fmt.Errorf("%s: unexpected arguments %v (use -pipeline)", name, pos)}
	}
	if err := o.load(fs, stderr, pipeline); err != nil {
		return nil, nil, false, err
	}
	c, closeFn, err := o.client(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer closeFn()
	if ob != nil {
		if *ob, err = c.Outbox(ctx); err != nil {
			return nil, nil, o.json, err
		}
	}
	ps, err := c.List(ctx, *pipeline)
	var pe *pgconn.PgError
	if err != nil && ob != nil && *ob != nil && errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil, o.json, nil // a schema with an outbox and its relay, but no pipeline
	}
	if err != nil || !withDead {
		return ps, nil, o.json, err
	}
	dead, err := c.CountDeadLetters(ctx)
	return ps, dead, o.json, err
}

var lagHelp = map[string]help{
	"lag": {usage: "eosink lag [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc: "Print the lag of every stored position: the log end minus the stored next offset."},
	"status": {usage: "eosink status [-pipeline P] [-json] [-config FILE | -database-url URL -brokers HOSTS -schema S]",
		desc: "Print one line per pipeline (partitions, owners alive or gone, lag, dead letters), then each stopped partition with its remedy."},
}

// lagCmd: eosink lag.
func lagCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ps, asJSON, err := listPositions(ctx, "lag", args, stderr)
	if err != nil {
		return err
	}
	return printPositions(stdout, ps, asJSON, true)
}

func printPositions(w io.Writer, ps []admin.Position, asJSON, lagOnly bool) error {
	if asJSON {
		return writeJSON(w, ps)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	if lagOnly {
		fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tNEXT OFFSET\tLOG END\tLAG")
	} else {
		fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tNEXT OFFSET\tEPOCH\tOWNER\tLAST COMMIT\tLOG START\tLOG END\tLAG\tKAFKA COMMITTED")
	}
	var total int64
	for _, p := range ps {
		lag := fmt.Sprint(p.Lag)
		if p.Error != "" {
			lag = "error: " + term(p.Error)
		}
		total += p.Lag
		if lagOnly {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, p.LogEnd, lag)
		} else {
			kc := "-"
			if p.KafkaCommitted != nil {
				kc = fmt.Sprint(*p.KafkaCommitted)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, p.Epoch,
				term(p.Owner), p.UpdatedAt.UTC().Format(time.RFC3339), p.LogStart, p.LogEnd, lag, kc)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if lagOnly {
		fmt.Fprintf(w, "total lag: %d\n", total)
	}
	return nil
}

// warnDivergence tells when Kafka's committed offsets (advisory) differ from the stored ones.
func warnDivergence(w io.Writer, ps []admin.Position) {
	var diverged []string
	for _, p := range ps {
		if p.Diverged() {
			diverged = append(diverged, fmt.Sprintf("%s %s[%d]: stored %d, Kafka %d", term(p.Pipeline), term(p.Topic), p.Partition, p.NextOffset, *p.KafkaCommitted))
		}
	}
	if len(diverged) > 0 {
		fmt.Fprintf(w, "warning: Kafka's committed offset differs from the stored position for %d partition(s); Kafka's lag tools are off "+
			"until the sink's next advisory commit (positions come from the database only):\n  %s\n", len(diverged), strings.Join(diverged, "\n  "))
	}
}

func printChanges(w io.Writer, cs []admin.Change, asJSON bool) error {
	if asJSON {
		return writeJSON(w, cs)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tTOPIC\tPARTITION\tFROM\tTO\tLOG")
	for _, c := range cs {
		from := "(no row)"
		if c.From != nil {
			from = fmt.Sprint(*c.From)
		}
		to := fmt.Sprint(c.To)
		if c.TopicID != "" {
			to += " (accepting topic id " + term(c.TopicID) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d..%d\n", term(c.Pipeline), term(c.Topic), c.Partition, from, to, c.LogStart, c.LogEnd)
	}
	return tw.Flush()
}

// statusCmd: eosink status, one line per pipeline (owners marked alive or gone), then one
// line per stopped partition with its reason and remedy.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var ob *admin.OutboxStatus
	ps, dead, asJSON, err := listPositionsAndDead(ctx, "status", args, stderr, true, &ob)
	if err != nil {
		return err
	}
	if err := printStatus(stdout, ps, dead, asJSON); err != nil || asJSON {
		return err
	}
	return printOutbox(stdout, ob)
}

// printStatus prints status's summary of ps with the dead letters per pipeline.
func printStatus(stdout io.Writer, ps []admin.Position, dead map[string]int64, asJSON bool) error {
	type stopped struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		admin.Stop
		OwnerAlive bool `json:"owner_alive"`
	}
	type summary struct {
		Pipeline   string    `json:"pipeline"`
		Partitions int       `json:"partitions"`
		Owners     []string  `json:"owners"`
		MaxEpoch   int64     `json:"max_epoch"`
		LastCommit time.Time `json:"last_commit"`
		Lag        int64     `json:"lag"`
		Lagging    int       `json:"partitions_lagging"`
		Errors     int       `json:"partitions_in_error"`
		Dead       int64     `json:"dead_letters"`
		Alive      []string  `json:"owners_alive"`
		Stopped    []stopped `json:"stopped"`
	}
	var out []*summary
	by := map[string]*summary{}
	for _, p := range ps {
		s := by[p.Pipeline]
		if s == nil {
			s = &summary{Pipeline: p.Pipeline}
			by[p.Pipeline] = s
			out = append(out, s)
		}
		s.Partitions++
		if !slices.Contains(s.Owners, p.Owner) {
			s.Owners = append(s.Owners, p.Owner)
		}
		if p.OwnerAlive && !slices.Contains(s.Alive, p.Owner) {
			s.Alive = append(s.Alive, p.Owner)
		}
		if p.Stopped != nil {
			s.Stopped = append(s.Stopped, stopped{Topic: p.Topic, Partition: p.Partition, Stop: *p.Stopped, OwnerAlive: p.OwnerAlive})
		}
		s.MaxEpoch = max(s.MaxEpoch, p.Epoch)
		if p.UpdatedAt.After(s.LastCommit) {
			s.LastCommit = p.UpdatedAt
		}
		s.Lag += p.Lag
		if p.Lag > 0 {
			s.Lagging++
		}
		if p.Error != "" {
			s.Errors++
		}
	}
	for _, s := range out {
		s.Dead = dead[s.Pipeline]
	}
	if asJSON {
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tPARTITIONS\tOWNERS\tMAX EPOCH\tLAST COMMIT\tLAG\tLAGGING\tIN ERROR\tSTOPPED\tDEAD LETTERS")
	for _, s := range out {
		owners := make([]string, len(s.Owners))
		for i, o := range s.Owners {
			owners[i] = term(o) + " (gone)"
			if slices.Contains(s.Alive, o) {
				owners[i] = term(o) + " (alive)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\n", term(s.Pipeline), s.Partitions, strings.Join(owners, ","), s.MaxEpoch,
			s.LastCommit.UTC().Format(time.RFC3339), s.Lag, s.Lagging, s.Errors, len(s.Stopped), s.Dead)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range out {
		for _, st := range s.Stopped {
			fmt.Fprintf(stdout, "stopped: %s %s[%d]: %s since %s on %s: %s\n  remedy: %s\n", term(s.Pipeline), term(st.Topic), st.Partition, term(st.Reason),
				st.At.UTC().Format(time.RFC3339), term(st.By), term(st.Error), term(st.Remedy))
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printOutbox prints status's outbox lines: the unpublished rows, then one line per relay
// shard as its outbox_relays row records it. Nothing when the schema has no outbox.
func printOutbox(w io.Writer, ob *admin.OutboxStatus) error {
	if ob == nil {
		return nil
	}
	age := "-"
	if !ob.Oldest.IsZero() {
		age = time.Since(ob.Oldest).Round(time.Second).String()
	}
	if _, err := fmt.Fprintf(w, "outbox: %d unpublished, oldest %s\n", ob.Unpublished, age); err != nil {
		return err
	}
	for _, s := range ob.Shards {
		if _, err := fmt.Fprintf(w, "outbox relay %s shard %d: last id %d, published %d, by %s, updated %s ago\n", term(s.Relay), s.Shard, s.LastID,
			s.Published, term(s.Owner), time.Since(s.UpdatedAt).Round(time.Second)); err != nil {
			return err
		}
	}
	return nil
}
