// Package stage bounds the temporary staging tables a PostgreSQL session keeps.
//
// The table plugin's upsert and the cdc plugin stage each batch in a temporary table per
// target table (CREATE TEMP TABLE ... ON COMMIT DELETE ROWS), made on the session's first
// batch for that target and kept for the session's life. At every commit of a transaction
// that touched a temporary table, PostgreSQL empties every ON COMMIT DELETE ROWS table of
// the session, each under an AccessExclusiveLock with its TOAST table: with hundreds of
// targets (a pattern over many Debezium topics) each pooled session came to hold all of
// them, every commit paid for all of them, and past max_locks_per_transaction the commit
// failed with 53200 (out of shared memory). Sessions keeps the most recently used staging
// tables of each session, MaxPerSession of them, and names the ones to drop.
package stage

import (
	"container/list"
	"sync"
)

// Conn is a session's connection: *pgconn.PgConn. Its CleanupDone channel is closed once
// the connection is closed; unlike IsClosed, it may be read from any goroutine while
// another uses the connection.
type Conn interface{ CleanupDone() chan struct{} }

// MaxPerSession is how many staging tables a session keeps: its commits empty at most
// these, and take at most twice as many locks for them.
const MaxPerSession = 8

// Sessions is the staging tables of each session (by its connection), least recently
// used first. Its zero value is ready; it is safe for concurrent use.
type Sessions struct {
	mu sync.Mutex
	by map[Conn]*session
}

type session struct {
	order *list.List // of string, most recently used at the front
	at    map[string]*list.Element
}

// Use records that conn's session is about to use the staging table name (as the SQL
// names it) and returns the tables it should drop first, the least recently used past
// MaxPerSession. The caller drops them in the same transaction (DROP TABLE IF EXISTS): a
// drop that rolls back leaves one table more than counted, until the session ends.
func (s *Sessions) Use(conn Conn, name string) (drop []string) {
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
	if e := ss.at[name]; e != nil {
		ss.order.MoveToFront(e)
		return nil
	}
	ss.at[name] = ss.order.PushFront(name)
	for ss.order.Len() > MaxPerSession {
		e := ss.order.Back()
		old := ss.order.Remove(e).(string)
		delete(ss.at, old)
		drop = append(drop, old)
	}
	return drop
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
