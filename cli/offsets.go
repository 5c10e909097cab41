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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/internal/kafkaflag"
)

// opsFlags are the connection flags of the offsets and lag commands.
type opsFlags struct {
	dbURL, schema, brokers string
	kafkaProps             kafkaflag.Properties
	json                   bool
}

func (o *opsFlags) register(fs *flag.FlagSet) {
	// Defaults come from the environment after parsing, so that -h never prints a password.
	fs.StringVar(&o.dbURL, "database-url", "", "PostgreSQL connection string (default: env DATABASE_URL)")
	fs.StringVar(&o.schema, "schema", "eosink", "schema of the offsets table")
	fs.StringVar(&o.brokers, "brokers", "", "Kafka bootstrap servers (default: env KAFKA_BOOTSTRAP_SERVERS)")
	o.kafkaProps = kafkaflag.Properties{}
	fs.Var(o.kafkaProps, "kafka", "librdkafka property key=value for the broker connection (TLS, SASL); repeatable")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

func (o *opsFlags) client(ctx context.Context) (*admin.Client, func(), error) {
	if o.dbURL == "" {
		o.dbURL = os.Getenv("DATABASE_URL")
	}
	if o.brokers == "" {
		o.brokers = os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	}
	if o.dbURL == "" {
		return nil, nil, usageError{errors.New("no database: set DATABASE_URL or -database-url")}
	}
	if o.brokers == "" {
		return nil, nil, usageError{errors.New("no Kafka: set KAFKA_BOOTSTRAP_SERVERS or -brokers")}
	}
	pool, err := connectDB(ctx, o.dbURL)
	if err != nil {
		return nil, nil, err
	}
	kc := kafka.ConfigMap{}
	maps.Copy(kc, o.kafkaProps)
	kc["bootstrap.servers"] = o.brokers
	return admin.New(pool, o.schema, kc), pool.Close, nil
}

// connectDB opens a pool and checks the connection; errors never show the password.
func connectDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		cc := pool.Config().ConnConfig
		return nil, fmt.Errorf("cannot connect to PostgreSQL at %s:%d/%s: %w", cc.Host, cc.Port, cc.Database, err)
	}
	return pool, nil
}

// parseInterleaved parses flags that may stand before and after positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// offsetsCmd: eosink offsets list|set|reset.
func offsetsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eosink offsets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (default: all for list; required for set)")
	topic := fs.String("topic", "", "set: only this topic (needed when the pipeline has no rows yet)")
	partition := fs.Int("partition", -1, "set: only this partition")
	to := fs.String("to", "", "set: earliest, latest, an offset, or an RFC 3339 time")
	operator := fs.String("operator", os.Getenv("USER"), "set: who makes the change, for the audit table (env USER)")
	reason := fs.String("reason", "", "set: why, for the audit table")
	dryRun := fs.Bool("dry-run", false, "set: print the changes without making them")
	acceptNewTopic := fs.Bool("accept-new-topic", false, "set: store the topic's current id (after it was deleted and created again)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage:
  eosink offsets list [-pipeline P] [-json]
  eosink offsets set  -pipeline P [-topic T [-partition N]] -to earliest|latest|OFFSET|TIME -reason TEXT [-operator NAME] [-accept-new-topic] [-dry-run]
  (reset is the same as set)

set moves stored positions in one transaction, writes an audit row per partition, and bumps
each partition's epoch, which fences its current owner: a running sink's next commit on
that partition is rejected, and the sink claims the partition again at the new position
without a restart (a notification tells idle sinks). A target outside the log is refused.
With -accept-new-topic it also stores each topic's current id: the recovery of a topic that
was deleted and created again (the sink stops such partitions with "topic was deleted and
recreated"); restart the sink afterwards for partitions it refused at claim.

flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError{errors.New("offsets: want exactly one of list, set, reset")}
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
			return usageError{fmt.Errorf("offsets set: -to: %w", err)}
		}
		if *partition < -1 || *partition > math.MaxInt32 {
			return usageError{fmt.Errorf("offsets set: -partition %d is not a partition number", *partition)}
		}
		if *partition >= 0 && *topic == "" {
			return usageError{errors.New("offsets set: -partition needs -topic")}
		}
		if !*dryRun && strings.TrimSpace(*reason) == "" {
			return usageError{errors.New("offsets set: -reason is required (it goes to the audit table)")}
		}
		sel := admin.Selector{Pipeline: *pipeline, Topic: *topic, AcceptNewTopic: *acceptNewTopic}
		if *partition >= 0 {
			p := int32(*partition)
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

// listPositions parses the flags shared by lag and status and lists the positions.
func listPositions(ctx context.Context, name string, args []string, stderr io.Writer) ([]admin.Position, bool, error) {
	ps, _, asJSON, err := listPositionsAndDead(ctx, name, args, stderr, false)
	return ps, asJSON, err
}

// listPositionsAndDead is listPositions, with the dead letters per pipeline when withDead.
func listPositionsAndDead(ctx context.Context, name string, args []string, stderr io.Writer, withDead bool) ([]admin.Position, map[string]int64, bool, error) {
	fs := flag.NewFlagSet("eosink "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opsFlags
	o.register(fs)
	pipeline := fs.String("pipeline", "", "pipeline (default: all)")
	if pos, err := parseInterleaved(fs, args); err != nil {
		return nil, nil, false, err
	} else if len(pos) > 0 {
		return nil, nil, false, usageError{fmt.Errorf("%s: unexpected arguments %v (use -pipeline)", name, pos)}
	}
	c, closeFn, err := o.client(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer closeFn()
	ps, err := c.List(ctx, *pipeline)
	if err != nil || !withDead {
		return ps, nil, o.json, err
	}
	dead, err := c.CountDeadLetters(ctx)
	return ps, dead, o.json, err
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
			lag = "error: " + p.Error
		}
		total += p.Lag
		if lagOnly {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", p.Pipeline, p.Topic, p.Partition, p.NextOffset, p.LogEnd, lag)
		} else {
			kc := "-"
			if p.KafkaCommitted != nil {
				kc = fmt.Sprint(*p.KafkaCommitted)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", p.Pipeline, p.Topic, p.Partition, p.NextOffset, p.Epoch,
				p.Owner, p.UpdatedAt.UTC().Format(time.RFC3339), p.LogStart, p.LogEnd, lag, kc)
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
			diverged = append(diverged, fmt.Sprintf("%s %s[%d]: stored %d, Kafka %d", p.Pipeline, p.Topic, p.Partition, p.NextOffset, *p.KafkaCommitted))
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
			to += " (accepting topic id " + c.TopicID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d..%d\n", c.Pipeline, c.Topic, c.Partition, from, to, c.LogStart, c.LogEnd)
	}
	return tw.Flush()
}

// statusCmd: eosink status, one line per pipeline (owners marked alive or gone), then one
// line per stopped partition with its reason and remedy.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ps, dead, asJSON, err := listPositionsAndDead(ctx, "status", args, stderr, true)
	if err != nil {
		return err
	}
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
			owners[i] = o + " (gone)"
			if slices.Contains(s.Alive, o) {
				owners[i] = o + " (alive)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Pipeline, s.Partitions, strings.Join(owners, ","), s.MaxEpoch,
			s.LastCommit.UTC().Format(time.RFC3339), s.Lag, s.Lagging, s.Errors, len(s.Stopped), s.Dead)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range out {
		for _, st := range s.Stopped {
			fmt.Fprintf(stdout, "stopped: %s %s[%d]: %s since %s on %s: %s\n  remedy: %s\n", s.Pipeline, st.Topic, st.Partition, st.Reason,
				st.At.UTC().Format(time.RFC3339), st.By, st.Error, st.Remedy)
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
