// Package store is the hub's storage layer: one interface over two
// implementations, an embedded SQLite file (the default) and PostgreSQL (for
// several nodes sharing one database).
//
// Subsystems write their SQL once, with `?` placeholders, against Q; the DB
// rebinds placeholders for PostgreSQL and offers the few dialect-specific
// fragments (SkipLocked, full-text search) through methods.
//
// All writes go through DB.Write, which group-commits: concurrent callers are
// batched into one database transaction (each in its own savepoint, so one
// caller's failure does not undo another's work) and share one fsync. On
// SQLite a single writer connection does this; on PostgreSQL a few writers
// do. Reads use a separate pool and never wait for the writer.
//
// Notifications (Tx.Notify) are delivered after commit to in-process
// listeners, and on PostgreSQL also to every other node through one
// pg_notify per channel per commit.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Dialect identifies the SQL implementation behind a DB.
type Dialect int

// The two supported dialects.
const (
	SQLite Dialect = iota + 1
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "unknown"
}

// Q is the query surface shared by transactions and the read pool. SQL uses
// `?` placeholders on both dialects.
type Q interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	Query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) *sql.Row
	Dialect() Dialect
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("store: closed")

// Options tune a DB. Zero values pick sensible defaults.
type Options struct {
	Logger      *slog.Logger
	MaxBatch    int    // most write requests group-committed together (default 256)
	Writers     int    // concurrent writer transactions (SQLite: always 1; PostgreSQL default 4)
	ReadConns   int    // reader pool size (default 8)
	NodeID      string // identifies this process in cross-node notifications
	ChannelBase string // prefix of notification channel names (PostgreSQL); defaults to "sb"
}

// DB is an open store.
type DB struct {
	dialect Dialect
	write   *sql.DB
	read    *sql.DB
	log     *slog.Logger
	opts    Options

	reqs     chan *writeReq
	wg       sync.WaitGroup
	closing  chan struct{}
	closeMu  sync.RWMutex
	closed   bool
	rebindMu sync.RWMutex
	rebinds  map[string]string

	lmu       sync.RWMutex
	listeners map[string][]func(payload string)

	// listenStop stops the PostgreSQL LISTEN loop.
	listenStop context.CancelFunc
	listenDone chan struct{}
	connString string
	schema     string

	stats Stats
	smu   sync.Mutex

	// wconn is SQLite's single writer connection, held for the life of
	// the DB so statements can be prepared once on it (see stmt).
	wconn *sql.Conn
	stmu  sync.Mutex
	stmts map[string]*sql.Stmt
	// ckpt is SQLite's checkpointing connection (see checkpointer).
	ckpt *sql.DB
}

// checkpointInterval is how often SQLite's WAL is copied into the database
// file.
const checkpointInterval = 250 * time.Millisecond

// checkpointer checkpoints SQLite's WAL beside the writer until Close. A
// PASSIVE checkpoint runs concurrently with the writer and with readers; it
// copies what no reader still needs and syncs the database file, and the
// writer starts the WAL over once all of it was copied. With SQLite's
// automatic checkpoint the commit that crossed 1,000 WAL pages did this
// itself, holding every write of its batch meanwhile (a p99 of 9 ms for
// 1 ms commits, under a hundred turns a second).
func (db *DB) checkpointer() {
	defer db.wg.Done()
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-db.closing:
			return
		case <-t.C:
		}
		if _, err := db.ckpt.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			db.log.Warn("sqlite checkpoint failed", "err", err)
		}
	}
}

// maxCachedStmts bounds the writer's prepared statements; queries built
// with a variable number of placeholders beyond it are prepared per call.
const maxCachedStmts = 1024

// Stats are counters of the group committer, for metrics and benchmarks.
type Stats struct {
	Batches  int64 // committed transactions
	Requests int64 // write requests run (committed or not)
}

func newDB(d Dialect, write, read *sql.DB, opts Options) *DB {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.ChannelBase == "" {
		opts.ChannelBase = "sb"
	}
	if opts.NodeID == "" {
		opts.NodeID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	db := &DB{
		dialect:   d,
		write:     write,
		read:      read,
		log:       opts.Logger,
		opts:      opts,
		reqs:      make(chan *writeReq, 4096),
		closing:   make(chan struct{}),
		rebinds:   map[string]string{},
		listeners: map[string][]func(string){},
	}
	return db
}

func (db *DB) startWriters(n int) {
	for i := 0; i < n; i++ {
		db.wg.Add(1)
		go db.writer()
	}
}

// Dialect reports which SQL implementation this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// NodeID identifies this process among the nodes sharing the database.
func (db *DB) NodeID() string { return db.opts.NodeID }

// Stats returns a snapshot of the group-commit counters.
func (db *DB) Stats() Stats {
	db.smu.Lock()
	defer db.smu.Unlock()
	return db.stats
}

// SQL returns the underlying read pool, for tools (migrations, tests) that
// need database/sql directly.
func (db *DB) SQL() *sql.DB { return db.read }

// Close stops the writers after they drain queued requests, stops
// listening, and closes the pools.
func (db *DB) Close() error {
	db.closeMu.Lock()
	if db.closed {
		db.closeMu.Unlock()
		return nil
	}
	db.closed = true
	close(db.closing)
	db.closeMu.Unlock()
	db.wg.Wait()
	db.stmu.Lock()
	for _, st := range db.stmts {
		st.Close()
	}
	db.stmts = nil
	db.stmu.Unlock()
	if db.wconn != nil {
		db.wconn.Close()
	}
	if db.ckpt != nil {
		db.ckpt.Close()
	}
	if db.listenStop != nil {
		db.listenStop()
		<-db.listenDone
	}
	var errs []error
	if db.write != db.read {
		errs = append(errs, db.write.Close())
	}
	errs = append(errs, db.read.Close())
	return errors.Join(errs...)
}

// ---- reads -------------------------------------------------------------

// Exec runs a statement on the read pool. It exists so that Q is satisfied by
// the DB itself; writes must go through Write.
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.read.ExecContext(ctx, db.rebind(query), args...)
}

// Query runs a read query on the reader pool.
func (db *DB) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return db.read.QueryContext(ctx, db.rebind(query), args...)
}

// QueryRow runs a single-row read query on the reader pool.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return db.read.QueryRowContext(ctx, db.rebind(query), args...)
}

// rebind converts `?` placeholders to `$n` for PostgreSQL, caching results.
// A `?` inside a single-quoted literal is left alone.
func (db *DB) rebind(q string) string {
	if db.dialect != Postgres {
		return q
	}
	db.rebindMu.RLock()
	r, ok := db.rebinds[q]
	db.rebindMu.RUnlock()
	if ok {
		return r
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	inQuote := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			inQuote = !inQuote
			b.WriteByte(c)
		case c == '?' && !inQuote:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	r = b.String()
	db.rebindMu.Lock()
	if len(db.rebinds) < 10000 {
		db.rebinds[q] = r
	}
	db.rebindMu.Unlock()
	return r
}

// ---- writes ------------------------------------------------------------

// Tx is a write transaction handed to a Write callback. It is only valid
// inside the callback.
type Tx struct {
	db          *DB
	tx          *sql.Tx
	ctx         context.Context
	afterCommit []func()
	onRollback  []func()
	notes       []note
}

type note struct{ channel, payload string }

// Statements inside a transaction ignore the caller's cancellation: a
// cancelled statement would break the shared transaction (and, on
// PostgreSQL, its connection) for every other caller in the batch. Write
// checks the context before running the callback instead.

// Exec runs a statement inside the transaction.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if st := t.db.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, t.db.rebind(query), args...)
}

// Query runs a query inside the transaction.
func (t *Tx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if st := t.db.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, t.db.rebind(query), args...)
}

// QueryRow runs a single-row query inside the transaction.
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if st := t.db.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, t.db.rebind(query), args...)
}

// stmt returns the writer connection's prepared statement for query, or
// nil where there is none (PostgreSQL, whose driver caches prepared
// statements itself; a full cache; a query that does not prepare, whose
// error the unprepared path then reports).
//
// Parsing SQL costs SQLite as much as running these small statements, so
// the single writer connection keeps its statements prepared. A statement
// of that connection runs inside whatever transaction the connection has
// open: the batch's transaction, since only the writer uses it.
func (db *DB) stmt(ctx context.Context, query string) *sql.Stmt {
	if db.wconn == nil {
		return nil
	}
	db.stmu.Lock()
	defer db.stmu.Unlock()
	if st, ok := db.stmts[query]; ok {
		return st
	}
	if db.stmts == nil || len(db.stmts) >= maxCachedStmts {
		return nil
	}
	st, err := db.wconn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	db.stmts[query] = st
	return st
}

// exec runs a batch-control statement (savepoints) in tx.
func (db *DB) exec(ctx context.Context, tx *sql.Tx, query string) error {
	if st := db.stmt(ctx, query); st != nil {
		_, err := st.ExecContext(ctx)
		return err
	}
	_, err := tx.ExecContext(ctx, query)
	return err
}

// begin starts a batch's transaction on the writer connection.
func (db *DB) begin(ctx context.Context) (*sql.Tx, error) {
	if db.wconn != nil {
		return db.wconn.BeginTx(ctx, nil)
	}
	return db.write.BeginTx(ctx, nil)
}

// Dialect reports the dialect of the database this transaction writes to.
func (t *Tx) Dialect() Dialect { return t.db.dialect }

// AfterCommit registers fn to run once this caller's work has committed. It
// does not run if the callback fails or the commit fails.
func (t *Tx) AfterCommit(fn func()) { t.afterCommit = append(t.afterCommit, fn) }

// OnRollback registers fn to run if this caller's work does not commit:
// its callback failed, or the batch's transaction did. It lets a caller
// that reserved something in memory for a row it wrote (a prefetch slot
// for a delivery leased at accept) give it back. fn runs on the writer and
// must not block.
func (t *Tx) OnRollback(fn func()) { t.onRollback = append(t.onRollback, fn) }

// Notify queues a notification on channel, delivered after commit to
// listeners on this node and (PostgreSQL) every other node. Identical
// notifications in one commit are delivered once.
func (t *Tx) Notify(channel, payload string) {
	t.notes = append(t.notes, note{channel, payload})
}

type writeReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error
	tx   Tx
}

// Write runs fn in a write transaction and returns after it has committed
// (or failed). fn may run in a batch with other callers' functions; it must
// use only the given Tx, must not call Write itself (that would deadlock),
// and should not block on anything but the database. Its error is returned
// unchanged and undoes only its own work.
func (db *DB) Write(ctx context.Context, fn func(tx *Tx) error) error {
	// PostgreSQL may pick a caller's work as a deadlock victim or refuse it
	// on a serialization conflict with another batch; that work is re-run
	// from scratch in a fresh batch, as callers would otherwise have to.
	var err error
	for attempt := 0; attempt < maxRetries; attempt++ {
		err = db.write1(ctx, fn)
		if !IsRetryable(err) {
			return err
		}
		db.log.Debug("write retried after a conflict", "attempt", attempt+1, "err", err)
		select {
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// maxRetries bounds re-runs of a write that lost a conflict.
const maxRetries = 5

// IsRetryable reports whether err is a PostgreSQL deadlock (40P01) or
// serialization failure (40001): the work may succeed when run again.
func IsRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

func (db *DB) write1(ctx context.Context, fn func(tx *Tx) error) error {
	db.closeMu.RLock()
	if db.closed {
		db.closeMu.RUnlock()
		return ErrClosed
	}
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case db.reqs <- req:
	case <-ctx.Done():
		db.closeMu.RUnlock()
		return ctx.Err()
	}
	db.closeMu.RUnlock()
	// Once queued, the request runs to completion even if ctx is cancelled
	// meanwhile: the caller learns the outcome, never a half-known state.
	return <-req.done
}

func (db *DB) writer() {
	defer db.wg.Done()
	batch := make([]*writeReq, 0, db.opts.MaxBatch)
	for {
		var first *writeReq
		select {
		case first = <-db.reqs:
		case <-db.closing:
			// Drain what is queued, then stop.
			select {
			case first = <-db.reqs:
			default:
				return
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < db.opts.MaxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		db.runBatch(batch)
	}
}

func (db *DB) runBatch(batch []*writeReq) {
	db.smu.Lock()
	db.stats.Requests += int64(len(batch))
	db.smu.Unlock()
	results := make([]error, len(batch))
	ctx := context.Background()
	tx, err := db.begin(ctx)
	if err != nil {
		for _, r := range batch {
			r.done <- fmt.Errorf("store: begin: %w", err)
		}
		return
	}
	useSavepoints := len(batch) > 1
	for i, r := range batch {
		r.tx = Tx{db: db, tx: tx, ctx: r.ctx}
		if useSavepoints {
			if err := db.exec(ctx, tx, "SAVEPOINT sb"); err != nil {
				results[i] = fmt.Errorf("store: savepoint: %w", err)
				continue
			}
		}
		err := db.call(r)
		results[i] = err
		if useSavepoints {
			if err != nil {
				if rerr := db.exec(ctx, tx, "ROLLBACK TO SAVEPOINT sb"); rerr != nil {
					results[i] = errors.Join(err, fmt.Errorf("store: rollback to savepoint: %w", rerr))
				}
			}
			if rerr := db.exec(ctx, tx, "RELEASE SAVEPOINT sb"); rerr != nil && err == nil {
				results[i] = fmt.Errorf("store: release savepoint: %w", rerr)
			}
		}
	}
	if !useSavepoints && results[0] != nil {
		_ = tx.Rollback()
		rolledBack(batch[0])
		batch[0].done <- results[0]
		return
	}
	// Cross-node notifications ride inside the transaction: PostgreSQL
	// delivers them on commit, one pg_notify per channel per batch.
	notes := db.collectNotes(batch, results)
	if db.dialect == Postgres && len(notes) > 0 {
		if err := db.pgNotify(ctx, tx, notes); err != nil {
			_ = tx.Rollback()
			for _, r := range batch {
				rolledBack(r)
				r.done <- fmt.Errorf("store: notify: %w", err)
			}
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, r := range batch {
			rolledBack(r)
			r.done <- fmt.Errorf("store: commit: %w", err)
		}
		return
	}
	db.smu.Lock()
	db.stats.Batches++
	db.smu.Unlock()
	db.deliverLocal(notes)
	for i, r := range batch {
		if results[i] == nil {
			for _, fn := range r.tx.afterCommit {
				fn()
			}
		} else {
			rolledBack(r)
		}
		r.done <- results[i]
	}
}

// rolledBack runs the OnRollback functions of a request whose work did not
// commit.
func rolledBack(r *writeReq) {
	for _, fn := range r.tx.onRollback {
		fn()
	}
}

// call runs one request's function, converting a panic into an error so a
// bug in one caller cannot stop the writer.
func (db *DB) call(r *writeReq) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: write callback panicked: %v", p)
			db.log.Error("write callback panicked", "panic", p)
		}
	}()
	if err := r.ctx.Err(); err != nil {
		return err
	}
	return r.fn(&r.tx)
}

func (db *DB) collectNotes(batch []*writeReq, results []error) map[string][]string {
	var out map[string][]string
	seen := map[note]bool{}
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		for _, n := range r.tx.notes {
			if seen[n] {
				continue
			}
			seen[n] = true
			if out == nil {
				out = map[string][]string{}
			}
			out[n.channel] = append(out[n.channel], n.payload)
		}
	}
	return out
}

// ---- notifications -----------------------------------------------------

// Listen registers fn for notifications on channel. fn runs on the
// committing goroutine (or the PostgreSQL listener) and must not block.
func (db *DB) Listen(channel string, fn func(payload string)) {
	db.lmu.Lock()
	db.listeners[channel] = append(db.listeners[channel], fn)
	db.lmu.Unlock()
}

func (db *DB) dispatch(channel, payload string) {
	db.lmu.RLock()
	fns := db.listeners[channel]
	db.lmu.RUnlock()
	for _, fn := range fns {
		fn(payload)
	}
}

// dispatchAll tells every listener of every channel that it may have missed
// notifications (after a lost PostgreSQL LISTEN connection): payload "*".
func (db *DB) dispatchAll() {
	db.lmu.RLock()
	chans := make([]string, 0, len(db.listeners))
	for c := range db.listeners {
		chans = append(chans, c)
	}
	db.lmu.RUnlock()
	for _, c := range chans {
		db.dispatch(c, "*")
	}
}

func (db *DB) deliverLocal(notes map[string][]string) {
	for ch, payloads := range notes {
		for _, p := range payloads {
			db.dispatch(ch, p)
		}
	}
}

// ---- helpers -----------------------------------------------------------

// Millis converts a time to the integer milliseconds stored in *_at columns.
// The zero time is stored as 0.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis converts a stored *_at column back to a UTC time; 0 is the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// SkipLocked is the clause that lets concurrent claimers on PostgreSQL skip
// rows another node is claiming; SQLite has a single writer and needs none.
func (db *DB) SkipLocked() string {
	if db.dialect == Postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// IsUniqueViolation reports whether err is a unique-constraint violation on
// either dialect.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "SQLSTATE 23505") ||
		strings.Contains(s, "duplicate key value violates unique constraint")
}

// InClause returns "?, ?, ?" with n placeholders, for IN lists.
func InClause(n int) string {
	if n <= 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
