// Command cdc is the cdc example's helper (examples/cdc/demo.sh, `make cdc`, runs it):
//
//	cdc setup    -source DB -replica SCHEMA [-steps N]   create the source database with its
//	             tables and N transactions of rows, and the replica tables
//	cdc workload -source DB -steps N [-seed S] [-pause D] change the source: inserts, updates,
//	             primary key changes, deletes
//	cdc wait     -source DB -slot S -rest URL -connector NAME -topics T,...  wait until the
//	             Debezium connector runs, its slot exists and its topics are there
//	cdc verify   -source DB -replica SCHEMA [-wait D]    compare the rows' contents, per table;
//	             exit 1 on a mismatch (after waiting up to D for them to match)
//	cdc cleanup  -source DB -slot S -publication P       drop the replication slot, the
//	             publication and the source database
//	cdc free-port                                        print a free TCP port on 127.0.0.1
//
// The source database is a database in the cluster of DATABASE_URL (wal_level=logical); the
// replica schema is in DATABASE_URL's database.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/cdc/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cdc setup|workload|wait|verify|cleanup|free-port [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("cdc "+cmd, flag.ExitOnError)
	source := fs.String("source", "cdc_demo_source", "source database (in the cluster of DATABASE_URL)")
	replica := fs.String("replica", "cdc_demo", "replica schema (in DATABASE_URL's database)")
	steps := fs.Int("steps", 100, "source transactions to run")
	seed := fs.Uint64("seed", 1, "workload seed")
	pause := fs.Duration("pause", 0, "pause between source transactions")
	wait := fs.Duration("wait", 0, "verify: wait up to this long for the tables to match")
	slot := fs.String("slot", "", "replication slot")
	publication := fs.String("publication", "", "publication")
	rest := fs.String("rest", "", "Kafka Connect REST URL")
	connector := fs.String("connector", "", "connector name")
	topics := fs.String("topics", "", "comma-separated topics to wait for")
	_ = fs.Parse(args)
	ctx := context.Background()
	var err error
	switch cmd {
	case "setup":
		err = setup(ctx, *source, *replica, *steps, *seed)
	case "workload":
		err = workload(ctx, *source, *steps, *seed, *pause)
	case "wait":
		err = waitDebezium(ctx, *source, *slot, *rest, *connector, strings.Split(*topics, ","))
	case "verify":
		err = verify(ctx, *source, *replica, *wait)
	case "cleanup":
		err = cleanup(ctx, *source, *slot, *publication)
	case "free-port":
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			fmt.Println(l.Addr().(*net.TCPAddr).Port)
			l.Close()
		}
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cdc "+cmd+":", err)
		os.Exit(1)
	}
}

// sourceURL is DATABASE_URL naming database db instead.
func sourceURL(db string) (string, error) {
	u, err := url.Parse(os.Getenv("DATABASE_URL"))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("DATABASE_URL must be a postgres:// URL")
	}
	u.Path, u.RawPath = "/"+db, ""
	return u.String(), nil
}

func connect(ctx context.Context, db string) (*pgx.Conn, error) {
	if db == "" {
		return pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	}
	u, err := sourceURL(db)
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, u)
}

func setup(ctx context.Context, source, replica string, steps int, seed uint64) error {
	admin, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{source}.Sanitize()); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, app.ReplicaDDL(pgx.Identifier{replica}.Sanitize())); err != nil {
		return err
	}
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, app.SourceDDL+"; INSERT INTO public.nopk VALUES ('before')"); err != nil {
		return err
	}
	if err := run(ctx, src, steps, seed, 0); err != nil {
		return err
	}
	fmt.Printf("source database %s: %d transactions; replica tables in schema %s\n", source, steps, replica)
	return nil
}

func run(ctx context.Context, src *pgx.Conn, steps int, seed uint64, pause time.Duration) error {
	w, err := app.NewWorkload(ctx, src, seed)
	if err != nil {
		return err
	}
	for range steps {
		if err := w.Step(ctx); err != nil {
			return err
		}
		time.Sleep(pause)
	}
	return nil
}

func workload(ctx context.Context, source string, steps int, seed uint64, pause time.Duration) error {
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	return run(ctx, src, steps, seed, pause)
}

func verify(ctx context.Context, source, replica string, wait time.Duration) error {
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	db, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	deadline, last := time.Now().Add(wait), time.Now()
	for {
		rs, diff, err := app.Compare(ctx, src, db, replica)
		if err != nil {
			return err
		}
		if app.Equal(rs) || time.Now().After(deadline) {
			for _, r := range rs {
				fmt.Printf("%s:\n  source rows: %d\n  replica rows: %d\n  mismatches: %d\n", r.Table, r.Source, r.Replica, r.Mismatches)
			}
			if !app.Equal(rs) {
				return fmt.Errorf("the replica differs from the source; some rows (+: only on the source, -: only on the replica):\n  %s", strings.Join(diff, "\n  "))
			}
			return nil
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			var s []string
			for _, r := range rs {
				s = append(s, fmt.Sprintf("%s %d/%d rows, %d differ", r.Table, r.Replica, r.Source, r.Mismatches))
			}
			fmt.Printf("catching up: %s ...\n", strings.Join(s, "; "))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func waitDebezium(ctx context.Context, source, slot, rest, connector string, topics []string) error {
	src, err := connect(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": os.Getenv("KAFKA_BOOTSTRAP_SERVERS")})
	if err != nil {
		return err
	}
	defer a.Close()
	deadline, last, state := time.Now().Add(3*time.Minute), time.Now(), "starting"
	for time.Now().Before(deadline) {
		state = debeziumState(ctx, src, a, slot, rest, connector, topics)
		if state == "" {
			return nil
		}
		if strings.HasPrefix(state, "FAILED") {
			return errors.New(state)
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			fmt.Printf("waiting for Debezium: %s ...\n", state)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("Debezium not ready after 3 minutes: %s", state)
}

// debeziumState returns "" when the connector's task runs, its slot exists and its topics
// are there; else what is missing.
func debeziumState(ctx context.Context, src *pgx.Conn, a *kafka.AdminClient, slot, rest, connector string, topics []string) string {
	resp, err := http.Get(rest + "/connectors/" + connector + "/status")
	if err != nil {
		return "no answer from Kafka Connect yet"
	}
	defer resp.Body.Close()
	var st struct {
		Connector struct{ State, Trace string }
		Tasks     []struct{ State, Trace string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("connector status: %s %v", resp.Status, err)
	}
	switch {
	case st.Connector.State == "FAILED":
		return "FAILED: connector: " + st.Connector.Trace
	case len(st.Tasks) == 0:
		return "connector " + st.Connector.State + ", no task yet"
	case st.Tasks[0].State == "FAILED":
		return "FAILED: task: " + st.Tasks[0].Trace
	case st.Tasks[0].State != "RUNNING":
		return "task " + st.Tasks[0].State
	}
	var ok bool
	if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", slot).Scan(&ok); err != nil || !ok {
		return "no replication slot " + slot + " yet"
	}
	md, err := a.GetMetadata(nil, true, 5000)
	if err != nil {
		return err.Error()
	}
	for _, t := range topics {
		if m, ok := md.Topics[t]; !ok || m.Error.Code() != kafka.ErrNoError {
			return "no topic " + t + " yet"
		}
	}
	return ""
}

func cleanup(ctx context.Context, source, slot, publication string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	admin, err := connect(ctx, "")
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	for slot != "" {
		var active *int32
		err := admin.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		} else if err != nil {
			return err
		}
		if active != nil { // the walsender of a stopped Debezium ends a moment later
			_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend($1)", *active)
		} else if _, err := admin.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replication slot %s still there: %v", slot, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if publication != "" {
		if src, err := connect(ctx, source); err == nil {
			_, _ = src.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{publication}.Sanitize())
			src.Close(ctx)
		}
	}
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{source}.Sanitize()+" WITH (FORCE)")
	return err
}
