package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConnectorStatus is the Connect REST API's /connectors/<name>/status.
type ConnectorStatus struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// Status asks the worker's REST API for the connector's and its tasks' states.
func (d *Debezium) Status(ctx context.Context) (ConnectorStatus, error) {
	var st ConnectorStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.RESTURL+"/connectors/"+d.Name+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return st, json.Unmarshal(body, &st)
}

// Exited reports whether the worker process has ended.
func (d *Debezium) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *Debezium) waitRunning(ctx context.Context) error {
	last := "no answer from the REST API yet"
	for {
		if d.Exited() {
			return fmt.Errorf("debezium: Kafka Connect exited during start-up (%v); see %s\n%s", d.waitErr, d.Log, d.LogTail(30))
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := d.Status(sctx)
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case st.Connector.State == "FAILED":
			return fmt.Errorf("debezium: connector %s FAILED: %s; see %s", d.Name, firstLines(st.Connector.Trace, 8), d.Log)
		case len(st.Tasks) == 0:
			last = "connector " + st.Connector.State + ", no task yet"
		case st.Tasks[0].State == "FAILED":
			return fmt.Errorf("debezium: task of %s FAILED: %s; see %s", d.Name, firstLines(st.Tasks[0].Trace, 8), d.Log)
		case st.Tasks[0].State != "RUNNING":
			last = "task " + st.Tasks[0].State
		default:
			ok, why, err := d.slotReady(ctx)
			if err != nil {
				last = err.Error()
			} else if ok {
				return nil
			} else {
				last = "task RUNNING, " + why
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("debezium: connector %s not running (%s) before %v; see %s\n%s", d.Name, last, ctx.Err(), d.Log, d.LogTail(30))
		case <-d.done:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// slotReady reports whether the replication slot and the publication exist in the source database.
func (d *Debezium) slotReady(ctx context.Context) (bool, string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, d.opts.SourceURL)
	if err != nil {
		return false, "", err
	}
	defer c.Close(context.Background())
	var slot, pub bool
	if err := c.QueryRow(cctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()),
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $2)`, d.Slot, d.Publication).Scan(&slot, &pub); err != nil {
		return false, "", err
	}
	switch {
	case !slot:
		return false, "replication slot " + d.Slot + " not created yet", nil
	case !pub:
		return false, "publication " + d.Publication + " not created yet", nil
	}
	return true, "", nil
}

// Stop ends the worker it started (SIGTERM, then SIGKILL after StopTimeout), then drops the
// replication slot (so that the source cluster does not keep WAL for it) and the publication.
// It is safe to call more than once. The source database must still exist.
//
// A worker that ignores SIGTERM for StopTimeout is killed; Killed then reports true. That is
// no error: on a loaded machine Kafka Connect's shutdown can take that long, and it says
// nothing about the sink.
func (d *Debezium) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

// Kill ends the worker at once (SIGKILL) and keeps the replication slot and publication,
// as a crash of Kafka Connect does: offsets not yet flushed are lost, so a worker started
// again with the same Dir sends some events again. Stop may still be called afterwards (it
// only drops the slot then).
func (d *Debezium) Kill() {
	if !d.Exited() {
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// Killed reports whether Stop had to kill the worker after SIGTERM.
func (d *Debezium) Killed() bool { return d.killed }

func (d *Debezium) stop() error {
	var errs []error
	if !d.Exited() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(d.opts.StopTimeout):
			_ = d.cmd.Process.Kill()
			<-d.done
			d.killed = true
		}
	}
	if err := d.dropSlot(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (d *Debezium) dropSlot() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.opts.SourceURL)
	if err != nil {
		return fmt.Errorf("debezium: drop slot %s: %v", d.Slot, err)
	}
	defer c.Close(context.Background())
	for {
		var active *int32
		err := c.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", d.Slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("debezium: drop slot %s: %v", d.Slot, err)
		}
		if active != nil {
			// The worker is gone; its walsender ends a moment later (or is ended here).
			_, _ = c.Exec(ctx, "SELECT pg_terminate_backend($1)", *active)
		} else if _, err := c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", d.Slot); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("debezium: replication slot %s still there after 30s", d.Slot)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := c.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{d.Publication}.Sanitize()); err != nil {
		return fmt.Errorf("debezium: drop publication %s: %v", d.Publication, err)
	}
	return nil
}

// LogTail returns the last n lines of the worker's log.
func (d *Debezium) LogTail(n int) string {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
