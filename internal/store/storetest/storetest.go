// Package storetest runs tests against every store backend: SQLite always,
// PostgreSQL when SWITCHBOARD_TEST_POSTGRES_URL is set. Each test gets a
// fresh database (a temporary SQLite file, or a new PostgreSQL schema that
// is dropped afterwards), so tests run in parallel without sharing state.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver for schema management

	"github.com/switchboard-hub/switchboard/internal/store"
)

// EnvPostgresURL names the variable holding the PostgreSQL test database URL.
const EnvPostgresURL = "SWITCHBOARD_TEST_POSTGRES_URL"

// Backend opens fresh stores of one kind.
type Backend struct {
	Name string
	// DSN returns a fresh, empty database for t (cleaned up when t ends).
	DSN func(t testing.TB) string
}

// Backends lists the backends available in this environment.
func Backends() []Backend {
	bs := []Backend{{Name: "sqlite", DSN: func(t testing.TB) string {
		return filepath.Join(t.TempDir(), "switchboard.db")
	}}}
	if u := os.Getenv(EnvPostgresURL); u != "" {
		bs = append(bs, Backend{Name: "postgres", DSN: func(t testing.TB) string { return PostgresSchema(t, u) }})
	}
	return bs
}

// Each runs fn as a parallel subtest once per backend, with a fresh DB.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, Open(t, b.DSN(t)))
		})
	}
}

// EachDSN runs fn once per backend with a fresh DSN, for tests that open
// the store themselves (several nodes, restarts).
func EachDSN(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.DSN(t))
		})
	}
}

// Open opens dsn and closes it when t ends.
func Open(t testing.TB, dsn string) *store.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var schemaSeq atomic.Int64

// PostgresSchema creates a new schema in the database at baseURL and returns
// a URL whose search_path points at it. The schema is dropped when t ends.
func PostgresSchema(t testing.TB, baseURL string) string {
	t.Helper()
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), schemaSeq.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	admin, err := sql.Open("pgx", baseURL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer admin.Close()
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
		t.Fatalf("postgres: drop schema: %v", err)
	}
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA "`+name+`"`); err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", baseURL)
		if err != nil {
			return
		}
		defer a.Close()
		a.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`)
	})
	u, err := store.PostgresSchemaURL(baseURL, name)
	if err != nil {
		t.Fatalf("postgres url: %v", err)
	}
	return u
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
