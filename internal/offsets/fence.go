package offsets

// The fence: every statement that takes ownership of a partition's row (the claim, which
// bumps the epoch, and its conditional forms) or moves its position under that ownership
// (Advance, the compare-and-set on epoch and next offset that each commit runs first).
// Operators bump the epoch too, when they move a position (Operator.Set, operator.go), and
// the owner's stop columns are written on the condition of its owner or epoch (stopped.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Claim is the result of claiming one partition: the epoch this instance now owns it under,
// and the offset to start consuming at.
type Claim struct {
	Topic      string
	Partition  int32
	Epoch      int64
	NextOffset int64
	TopicID    string // as stored; empty when unknown
	Created    bool   // the row was created by this claim from the initial position
}

// Claim takes ownership of a partition: it creates the row if missing (initial is called for
// the starting offset only then), bumps the epoch and returns the stored position. Every
// earlier owner is fenced from the moment the claim commits. topicID, when not empty, is
// stored if the row has none; a different stored id is returned in Claim.TopicID for the
// caller to compare.
func (s *Store) Claim(ctx context.Context, topic string, partition int32, topicID string, initial func() (int64, error)) (Claim, error) {
	c, found, err := s.bump(ctx, topic, partition, topicID, -1)
	if err != nil || found {
		return c, err
	}
	start, err := initial()
	if err != nil {
		return Claim{}, err
	}
	if start < 0 {
		return Claim{}, fmt.Errorf("initial position for %s[%d] resolved to %d", topic, partition, start)
	}
	if err := s.create(ctx, topic, partition, topicID, start); err != nil {
		return Claim{}, err
	}
	c, found, err = s.bump(ctx, topic, partition, topicID, -1)
	if err == nil && !found {
		err = fmt.Errorf("offset row for %s[%d] vanished during claim", topic, partition)
	}
	c.Created = c.Epoch == 1
	return c, err
}

// Epochs returns the stored epoch of each of the partitions of topics[i], partitions[i] that
// has a row, without waiting for locks: the last committed claims. The Balancer reads them
// when an assignment begins, so that each claim it makes for that assignment can be made on
// the condition that no other claim came meanwhile (ClaimAt). Partitions with no row are
// missing from the map.
func (s *Store) Epochs(ctx context.Context, topics []string, partitions []int32) (map[string]map[int32]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT o.topic, o.partition, o.epoch FROM `+s.table+` o
		JOIN unnest($2::text[], $3::int[]) AS a(topic, partition) ON a.topic = o.topic AND a.partition = o.partition
		WHERE o.pipeline = $1`, s.pipeline, topics, partitions)
	if err != nil {
		return nil, fmt.Errorf("read the epochs of the assigned partitions: %w", err)
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var topic string
		var partition int32
		var epoch int64
		if err := rows.Scan(&topic, &partition, &epoch); err != nil {
			return nil, fmt.Errorf("read the epochs of the assigned partitions: %w", err)
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][partition] = epoch
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the epochs of the assigned partitions: %w", err)
	}
	return out, nil
}

// ClaimAt is Claim on the condition that the row is as Epochs read it when the assignment
// began: epoch expect if found, or no row (or one created and never claimed, epoch 0) if not.
// When another claim or an operator's change came in between, it claims nothing and returns
// an error matching ErrClaimTaken: the claim was made for an assignment this instance may no
// longer hold (its rebalance callback ran past the group's timeouts while the partition
// moved on), and taking the partition would fence its rightful owner.
func (s *Store) ClaimAt(ctx context.Context, topic string, partition int32, topicID string, expect int64, found bool, initial func() (int64, error)) (Claim, error) {
	if !found {
		expect = 0 // the default epoch of a new row
	}
	c, ok, err := s.bump(ctx, topic, partition, topicID, expect)
	if err != nil || ok {
		return c, err
	}
	if found {
		return Claim{}, fmt.Errorf("claim %s[%d] at epoch %d: %w", topic, partition, expect, ErrClaimTaken)
	}
	start, err := initial()
	if err != nil {
		return Claim{}, err
	}
	if start < 0 {
		return Claim{}, fmt.Errorf("initial position for %s[%d] resolved to %d", topic, partition, start)
	}
	if err := s.create(ctx, topic, partition, topicID, start); err != nil {
		return Claim{}, err
	}
	c, ok, err = s.bump(ctx, topic, partition, topicID, 0)
	if err == nil && !ok {
		err = fmt.Errorf("claim new row %s[%d]: %w", topic, partition, ErrClaimTaken)
	}
	c.Created = c.Epoch == 1
	return c, err
}

// create inserts a missing row at next offset start (epoch 0); an existing row is kept.
func (s *Store) create(ctx context.Context, topic string, partition int32, topicID string, start int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (pipeline, topic, partition, next_offset, topic_id)
		VALUES ($1, $2, $3, $4, NULLIF($5, '')) ON CONFLICT DO NOTHING`, s.pipeline, topic, partition, start, topicID)
	if err != nil {
		return fmt.Errorf("create offset row for %s[%d]: %w", topic, partition, err)
	}
	return nil
}

// ClaimIf claims a partition again only if its row still has epoch expect: a compare-and-set
// on the epoch read before, so that of several instances that read the same row, one at most
// takes it. It returns an error matching ErrClaimTaken when the epoch moved meanwhile (another
// claim or an operator's change came first) or the row is gone.
func (s *Store) ClaimIf(ctx context.Context, topic string, partition int32, expect int64) (Claim, error) {
	c, found, err := s.bump(ctx, topic, partition, "", expect)
	if err == nil && !found {
		err = fmt.Errorf("claim %s[%d] at epoch %d: %w", topic, partition, expect, ErrClaimTaken)
	}
	return c, err
}

// bump runs the claim UPDATE in a short transaction with lock_timeout set, so that a row lock
// left by a stalled zombie makes the claim fail (and be retried) instead of hanging. With
// expect >= 0 it updates the row only if its epoch is expect (found is false otherwise).
func (s *Store) bump(ctx context.Context, topic string, partition int32, topicID string, expect int64) (c Claim, found bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim %s[%d]: %w", topic, partition, err)
	}
	defer conn.Release()
	if s.TerminateStalled != "" && s.lockTimeout > 0 {
		stop := s.watchBlockers(ctx, conn.Conn().PgConn().PID(), topic, partition)
		defer stop()
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if s.lockTimeout > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.lockTimeout.Milliseconds())); err != nil {
				return err
			}
		}
		var storedID *string
		err := tx.QueryRow(ctx, `UPDATE `+s.table+`
			SET epoch = epoch + 1, owner = $4, claimed_at = now(), topic_id = COALESCE(topic_id, NULLIF($5, ''))
			WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND ($6::bigint < 0 OR epoch = $6)
			RETURNING next_offset, epoch, topic_id`,
			s.pipeline, topic, partition, s.owner, topicID, expect).Scan(&c.NextOffset, &c.Epoch, &storedID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if storedID != nil {
			c.TopicID = *storedID
		}
		return nil
	})
	if err != nil {
		if s.TerminateStalled != "" && isLockTimeout(err) {
			// The watch may not have run: it needs a second pooled connection, and a pool
			// busy with the other partitions' claims and commits can hold none free for
			// the whole wait. This connection is free again now.
			s.endRowHolder(ctx, conn, topic, partition)
		}
		return Claim{}, false, fmt.Errorf("claim %s[%d]: %w", topic, partition, err)
	}
	c.Topic, c.Partition = topic, partition
	return c, found, nil
}

// Range is one partition's part of a commit: the records from Start up to End (exclusive)
// under the epoch the instance claimed.
type Range struct {
	Topic     string
	Partition int32
	Epoch     int64
	Start     int64 // the stored next offset this batch continues from
	End       int64 // last record's offset + 1 (not Start + count: gaps are normal)
}

// Advance moves each range's stored offset from Start to End inside tx, on the condition
// that the row still has the epoch and next offset this instance expects. Rows are updated
// in (topic, partition) order so that concurrent multi-partition commits cannot deadlock.
// It must run before the business writes, so that it takes the row lock first. If any row
// does not match it returns a *FencedError (errors.Is ErrFenced), and the caller must roll
// back.
func (s *Store) Advance(ctx context.Context, tx pgx.Tx, ranges ...Range) error {
	ranges, err := sortRanges(ranges)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		tag, err := tx.Exec(ctx, s.advanceSQL(), r.args(s.pipeline)...)
		if err := s.advanced(r, tag, err); err != nil {
			return err
		}
	}
	return nil
}

// sortRanges returns ranges in (topic, partition) order, checked.
func sortRanges(ranges []Range) ([]Range, error) {
	if len(ranges) > 1 {
		ranges = slices.Clone(ranges)
		slices.SortFunc(ranges, func(a, b Range) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
	}
	for _, r := range ranges {
		if r.End < r.Start {
			return nil, fmt.Errorf("advance %s[%d]: end %d before start %d", r.Topic, r.Partition, r.End, r.Start)
		}
	}
	return ranges, nil
}

// advanceSQL is the conditional update of one row (Range.args are its parameters).
func (s *Store) advanceSQL() string {
	return `UPDATE ` + s.table + ` SET next_offset = $6, updated_at = now()
			WHERE pipeline = $1 AND topic = $2 AND partition = $3 AND epoch = $4 AND next_offset = $5`
}

func (r Range) args(pipeline string) []any {
	return []any{pipeline, r.Topic, r.Partition, r.Epoch, r.Start, r.End}
}

// advanced turns one conditional update's outcome into Advance's error.
func (s *Store) advanced(r Range, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("advance %s[%d]: %w", r.Topic, r.Partition, err)
	}
	if tag.RowsAffected() != 1 {
		return &FencedError{Pipeline: s.pipeline, Topic: r.Topic, Partition: r.Partition, Epoch: r.Epoch, Start: r.Start}
	}
	return nil
}
