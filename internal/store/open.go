package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations
var migrations embed.FS

// Open opens the store named by dsn: a postgres:// or postgresql:// URL
// selects PostgreSQL, anything else is a SQLite file path. Migrations are
// applied before it returns.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return OpenPostgres(ctx, dsn, opts)
	}
	return OpenSQLite(ctx, dsn, opts)
}

// OpenSQLite opens (creating if needed) the SQLite database at path in WAL
// mode with synchronous=FULL, so an acknowledged write survives a crash.
// One connection writes; a separate pool reads. Temporary storage is in
// memory: every group-committed request runs in a savepoint, whose
// sub-journal would otherwise spill to a temporary file (a write syscall
// per journaled page) once a batch passes 64 KiB.
func OpenSQLite(ctx context.Context, path string, opts Options) (*DB, error) {
	common := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)"
	// The writer never checkpoints: a checkpoint (copying the WAL into the
	// database file and syncing it) inside a commit would hold every caller
	// of that batch for its duration. A connection of its own does it
	// beside the writer (see checkpointer).
	write, err := sql.Open("sqlite", path+"?"+common+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := migrate(ctx, write, SQLite, ""); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite reader %s: %w", path, err)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 8
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	db := newDB(SQLite, write, read, opts)
	if db.wconn, err = write.Conn(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.stmts = map[string]*sql.Stmt{}
	ckpt, err := sql.Open("sqlite", path+"?"+common)
	if err != nil {
		db.wconn.Close()
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open sqlite checkpointer %s: %w", path, err)
	}
	ckpt.SetMaxOpenConns(1)
	db.ckpt = ckpt
	db.startWriters(1)
	db.wg.Add(1)
	go db.checkpointer()
	return db, nil
}

// OpenPostgres connects to PostgreSQL with a pgx pool, applies migrations
// (serialized across nodes with an advisory lock), and starts listening for
// other nodes' notifications.
func OpenPostgres(ctx context.Context, dsn string, opts Options) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pool := stdlib.OpenDB(*cfg)
	if opts.ReadConns <= 0 {
		opts.ReadConns = 8
	}
	if opts.Writers <= 0 {
		opts.Writers = 4
	}
	pool.SetMaxOpenConns(opts.ReadConns + opts.Writers)
	pool.SetMaxIdleConns(opts.ReadConns + opts.Writers)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	schema := cfg.RuntimeParams["search_path"]
	if err := migrate(ctx, pool, Postgres, schema); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.ChannelBase == "" {
		opts.ChannelBase = "sb"
		if schema != "" {
			opts.ChannelBase = "sb_" + sanitizeIdent(schema)
		}
	}
	db := newDB(Postgres, pool, pool, opts)
	db.connString = dsn
	db.schema = schema
	db.startWriters(opts.Writers)
	if err := db.startListener(ctx, cfg); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func sanitizeIdent(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

// migrate applies the embedded migrations. On PostgreSQL, nodes starting
// together serialize on an advisory lock; its id is derived from the schema
// so stores in different schemas of one database (tests, tenants) do not
// wait for each other.
func migrate(ctx context.Context, db *sql.DB, d Dialect, schema string) error {
	sub, err := fs.Sub(migrations, "migrations/"+d.String())
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	dialect := goose.DialectSQLite3
	popts := []goose.ProviderOption{goose.WithAllowOutofOrder(true), goose.WithDisableGlobalRegistry(true)}
	if d == Postgres {
		dialect = goose.DialectPostgres
		h := fnv.New64a()
		h.Write([]byte("switchboard-migrations:" + schema))
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
		if err != nil {
			return fmt.Errorf("migrations: locker: %w", err)
		}
		popts = append(popts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, db, sub, popts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations (%s): %w", d, err)
	}
	return nil
}

// ---- PostgreSQL notifications -----------------------------------------------

const noteSep = "\x1f"

// maxNotifyPayload stays under PostgreSQL's 8000-byte NOTIFY payload limit.
const maxNotifyPayload = 7000

func (db *DB) pgNotify(ctx context.Context, tx *sql.Tx, notes map[string][]string) error {
	for ch, payloads := range notes {
		prefix := db.opts.NodeID + noteSep + ch + noteSep
		var chunk strings.Builder
		flush := func() error {
			if chunk.Len() == 0 {
				return nil
			}
			_, err := tx.ExecContext(ctx, "SELECT pg_notify($1, $2)", db.opts.ChannelBase, prefix+chunk.String())
			chunk.Reset()
			return err
		}
		for _, p := range payloads {
			if chunk.Len()+len(p)+len(prefix)+1 > maxNotifyPayload {
				if err := flush(); err != nil {
					return err
				}
			}
			if chunk.Len() > 0 {
				chunk.WriteByte('\n')
			}
			chunk.WriteString(p)
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) startListener(ctx context.Context, cfg *pgx.ConnConfig) error {
	lctx, cancel := context.WithCancel(context.Background())
	db.listenStop = cancel
	db.listenDone = make(chan struct{})
	ready := make(chan error, 1)
	go func() {
		defer close(db.listenDone)
		first := true
		backoff := 100 * time.Millisecond
		for lctx.Err() == nil {
			conn, err := pgx.ConnectConfig(lctx, cfg.Copy())
			if err == nil {
				_, err = conn.Exec(lctx, "LISTEN "+pgx.Identifier{db.opts.ChannelBase}.Sanitize())
			}
			if err != nil {
				if first {
					ready <- fmt.Errorf("postgres listener: %w", err)
					return
				}
				if conn != nil {
					conn.Close(context.Background())
				}
				db.log.Warn("postgres listener reconnecting", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-lctx.Done():
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			if first {
				ready <- nil
				first = false
			} else {
				// Notifications may have been missed while disconnected.
				db.dispatchAll()
			}
			backoff = 100 * time.Millisecond
			for {
				n, err := conn.WaitForNotification(lctx)
				if err != nil {
					break
				}
				db.handlePGNote(n.Payload)
			}
			conn.Close(context.Background())
		}
	}()
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (db *DB) handlePGNote(payload string) {
	parts := strings.SplitN(payload, noteSep, 3)
	if len(parts) != 3 || parts[0] == db.opts.NodeID {
		return // malformed, or our own (already delivered locally after commit)
	}
	for _, p := range strings.Split(parts[2], "\n") {
		db.dispatch(parts[1], p)
	}
}

// PostgresSchemaURL returns dsn with search_path set to schema, for running
// isolated stores (tests, benchmarks) in one database.
func PostgresSchemaURL(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// ErrLocked is returned when another process holds the data directory.
var ErrLocked = errors.New("data directory is in use by another switchboard process")
