// Package stage bounds the temporary staging tables a PostgreSQL session keeps, and
// chooses how each is emptied.
//
// The table plugin's upsert and the cdc plugin stage each batch in a temporary table (CREATE
// TEMP TABLE ... AS ... WITH NO DATA), made on the session's first batch for that target and
// kept until the session ends or Sessions has it dropped; the merge empties it with DELETE
// ... RETURNING, and Ready empties it again before each copy. Two ways to keep such a table, each with its cost:
//
//   - ON COMMIT DELETE ROWS. At every commit of a transaction that touched a temporary
//     table, PostgreSQL empties every such table of the session, each under an
//     AccessExclusiveLock with its TOAST table, and rebuilds the TOAST table's index, which
//     sends a relcache invalidation: every session then checks it against each of its
//     cached plans, and replans those that read the table. With hundreds of targets (a
//     pattern over many Debezium topics) each pooled session came to hold all of them, past
//     max_locks_per_transaction the commit failed with 53200 (out of shared memory); Sessions
//     keeps the most recently used MaxPerSession tables of each session and names the ones
//     to drop. Cheap per row, the emptying is a fixed cost per commit: with batches of 50
//     rows into a thousand tables it was 16% of PostgreSQL's CPU, and the replanning it
//     caused 14% more.
//   - A plain temporary table, emptied by DELETE. It keeps its dead rows' pages (autovacuum
//     does not vacuum temporary tables, and an insert does not reuse a pruned page's space),
//     every merge reads them, and an explicit TRUNCATE (a new file, catalog updates, the
//     invalidations) is dearer than the one at commit. Sessions counts the bytes copied in
//     since it was made or last truncated and has the caller TRUNCATE it before a copy
//     that would take it past TruncateBytes.
//
// So the size of the copy decides: a table is made ON COMMIT DELETE ROWS for copies of
// SmallBytes or more and plain for smaller ones, and is made again the other way after
// Switch copies in a row of the other kind. What Sessions believes of a table's kind can be
// wrong (a DROP or CREATE rolled back, two Sessions on one pool); so it truncates a table it
// believes emptied at commit too, once SwitchBytes were copied into it: one more TRUNCATE
// per SwitchBytes if the belief is right, a bound on the dead pages if not.
package stage

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Conn is a session's connection: *pgconn.PgConn. Its CleanupDone channel is closed once
// the connection is closed; unlike IsClosed, it may be read from any goroutine while
// another uses the connection.
type Conn interface{ CleanupDone() chan struct{} }

// MaxPerSession is how many staging tables a session keeps.
const MaxPerSession = 8

// SmallBytes: a copy of fewer bytes of COPY text than this is small, and goes to a plain
// table; 256 KiB is about 2,000 rows of 120 bytes (the cdc plugin's default batch is 5,000
// records, the sink's default for the other plugins 500: sink.DefaultMaxBatchRecords).
const SmallBytes = 256 << 10

// TruncateBytes bounds the bytes of COPY text a plain staging table takes between
// truncates: Use has the caller truncate it before a copy that would take it past them
// (unless it holds none: a single copy may be larger). 1 MiB, about 2 MB of pages.
const TruncateBytes = 1 << 20

// SwitchBytes is TruncateBytes for a table believed ON COMMIT DELETE ROWS (see the package
// doc).
const SwitchBytes = 16 * TruncateBytes

// Switch is how many copies in a row of the other kind make a table be made again the
// other way (dropped, then made anew).
const Switch = 16

// Sessions is the staging tables of each session (by its connection), least recently
// used first. Its zero value is ready; it is safe for concurrent use.
type Sessions struct {
	mu sync.Mutex
	by map[Conn]*session
}

type session struct {
	order *list.List // of *table, most recently used at the front
	at    map[string]*list.Element
}

type table struct {
	name     string
	onCommit bool // made ON COMMIT DELETE ROWS
	copied   int  // bytes copied in since it was made or last truncated (rolled back or not)
	against  int  // copies in a row of the other kind
}

// Use records that conn's session is about to copy n bytes of COPY text into the staging
// table name (as the SQL names it). It returns the tables the caller should drop first
// (the least recently used past MaxPerSession, and name itself when it is to be made the
// other way), whether name is to be (or is) ON COMMIT DELETE ROWS, and whether the caller
// should truncate it before the copy (one that would take a plain table past
// TruncateBytes, or one believed emptied at commit past SwitchBytes).
// The caller drops, makes and truncates in the same transaction (DROP TABLE IF EXISTS,
// CREATE TEMP TABLE IF NOT EXISTS, TRUNCATE). What rolls back costs time, never rows: a
// drop that rolls back leaves one table more than counted, until the session ends, or a
// table of the other kind (bounded by SwitchBytes); a truncate that rolls back leaves its
// pages until the next one.
func (s *Sessions) Use(conn Conn, name string, n int) (drop []string, onCommit, truncate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[Conn]*session{}
	}
	ss := s.by[conn]
	if ss == nil {
		s.sweep()
		ss = &session{order: list.New(), at: map[string]*list.Element{}}
		s.by[conn] = ss
	}
	want := n >= SmallBytes
	if e := ss.at[name]; e != nil {
		ss.order.MoveToFront(e)
		t := e.Value.(*table)
		if t.onCommit == want {
			t.against = 0
		} else if t.against++; t.against >= Switch {
			*t = table{name: name, onCommit: want}
			drop = []string{name}
		}
		bound := TruncateBytes
		if t.onCommit {
			bound = SwitchBytes
		}
		if truncate = t.copied > 0 && t.copied+n > bound; truncate {
			t.copied = 0
		}
		t.copied += n
		return drop, t.onCommit, truncate
	}
	ss.at[name] = ss.order.PushFront(&table{name: name, onCommit: want, copied: n})
	for ss.order.Len() > MaxPerSession {
		old := ss.order.Remove(ss.order.Back()).(*table)
		delete(ss.at, old.name)
		drop = append(drop, old.name)
	}
	return drop, want, false
}

// Ready readies the session's staging table name (as the SQL names it) in tx for a copy of
// n bytes: it drops the session's tables that Use names, runs create (CREATE TEMP TABLE IF
// NOT EXISTS name AS ..., with " ON COMMIT DELETE ROWS" put after name when Use says so),
// and empties the table, of rows left by a merge earlier in the transaction that stopped
// before its DELETE, with DELETE (nothing to read in a table emptied at commit), or with
// TRUNCATE when Use says so. A nil *Sessions keeps every table plain and never truncates
// (tests).
func (s *Sessions) Ready(ctx context.Context, tx pgx.Tx, name, create string, n int) error {
	empty, onCommit := ";\nDELETE FROM "+name, false
	if s != nil {
		drop, oc, truncate := s.Use(tx.Conn().PgConn(), name, n)
		for _, old := range drop {
			if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS pg_temp."+old); err != nil {
				return fmt.Errorf("drop the session's staging table %s (least recently used, or made again): %w", old, err)
			}
		}
		if truncate {
			empty = ";\nTRUNCATE " + name
		}
		onCommit = oc
	}
	if onCommit {
		head := "CREATE TEMP TABLE IF NOT EXISTS " + name
		if !strings.HasPrefix(create, head) {
			return fmt.Errorf("staging table %s: %q does not begin with %q", name, create, head) // a caller's bug
		}
		create = head + " ON COMMIT DELETE ROWS" + create[len(head):]
	}
	if _, err := tx.Exec(ctx, create+empty); err != nil { // no arguments: one simple query of two statements
		return fmt.Errorf("staging table %s: %w", name, err)
	}
	return nil
}

// sweep forgets the sessions of closed connections. Other sessions' connections are in use
// on other goroutines: only their CleanupDone channel is safe to look at.
func (s *Sessions) sweep() {
	for c := range s.by {
		select {
		case <-c.CleanupDone():
			delete(s.by, c)
		default:
		}
	}
}

// Len reports how many sessions are tracked (for tests).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.by)
}
