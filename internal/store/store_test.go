package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func insertSetting(ctx context.Context, tx *store.Tx, k, v string) error {
	_, err := tx.Exec(ctx, "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)", k, v, 1)
	return err
}

func countSettings(t *testing.T, db *store.DB, prefix string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT COUNT(*) FROM settings WHERE key LIKE ?", prefix+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWriteThenRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, "a", "1") }); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := db.QueryRow(ctx, "SELECT value FROM settings WHERE key = ?", "a").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "1" {
			t.Fatalf("got %q, want 1", v)
		}
	})
}

// A failing callback undoes only its own work, even when it was batched
// with successful ones; its AfterCommit hooks never run and its OnRollback
// hooks do (and only its).
func TestGroupCommitIsolatesFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const n = 64
		var wg sync.WaitGroup
		var mu sync.Mutex
		committed := map[string]bool{}
		rolledBack := map[string]bool{}
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				key := fmt.Sprintf("g%03d", i)
				errs[i] = db.Write(ctx, func(tx *store.Tx) error {
					if err := insertSetting(ctx, tx, key, "x"); err != nil {
						return err
					}
					tx.AfterCommit(func() { mu.Lock(); committed[key] = true; mu.Unlock() })
					tx.OnRollback(func() { mu.Lock(); rolledBack[key] = true; mu.Unlock() })
					if i%4 == 0 {
						return fmt.Errorf("fail %d", i)
					}
					return nil
				})
			}(i)
		}
		wg.Wait()
		for i, err := range errs {
			if (i%4 == 0) != (err != nil) {
				t.Fatalf("request %d: err=%v", i, err)
			}
		}
		if got, want := countSettings(t, db, "g"), n-n/4; got != want {
			t.Fatalf("rows = %d, want %d", got, want)
		}
		if len(committed) != n-n/4 {
			t.Fatalf("after-commit hooks ran %d times, want %d", len(committed), n-n/4)
		}
		for k := range committed {
			var i int
			fmt.Sscanf(k, "g%03d", &i)
			if i%4 == 0 {
				t.Fatalf("hook ran for failed request %s", k)
			}
		}
		if len(rolledBack) != n/4 {
			t.Fatalf("rollback hooks ran %d times, want %d", len(rolledBack), n/4)
		}
		for k := range rolledBack {
			if committed[k] {
				t.Fatalf("rollback hook ran for committed request %s", k)
			}
		}
		st := db.Stats()
		if st.Requests < n || st.Batches > st.Requests {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A unique violation inside one caller's savepoint must not poison the
// shared transaction.
func TestConstraintErrorInBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, "dup", "1") }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var dupErrs, okCount int
		var mu sync.Mutex
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				key := "dup"
				if i%2 == 1 {
					key = fmt.Sprintf("ok%02d", i)
				}
				err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, key, "2") })
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if !store.IsUniqueViolation(err) {
						t.Errorf("unexpected error: %v", err)
					}
					dupErrs++
				} else {
					okCount++
				}
			}(i)
		}
		wg.Wait()
		if dupErrs != 20 || okCount != 20 || countSettings(t, db, "ok") != 20 {
			t.Fatalf("dupErrs=%d ok=%d rows=%d", dupErrs, okCount, countSettings(t, db, "ok"))
		}
	})
}

func TestPanicInCallbackIsAnError(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		err := db.Write(ctx, func(tx *store.Tx) error { panic("boom") })
		if err == nil || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("err = %v", err)
		}
		if err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, "after", "1") }); err != nil {
			t.Fatalf("writer unusable after panic: %v", err)
		}
	})
}

func TestCancelledContextBeforeRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, "c", "1") })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if countSettings(t, db, "c") != 0 {
			t.Fatal("cancelled write was applied")
		}
	})
}

func TestNotifyAfterCommitOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		got := make(chan string, 10)
		db.Listen("wake", func(p string) { got <- p })
		_ = db.Write(ctx, func(tx *store.Tx) error { tx.Notify("wake", "rolled-back"); return errors.New("no") })
		if err := db.Write(ctx, func(tx *store.Tx) error {
			tx.Notify("wake", "a")
			tx.Notify("wake", "a") // deduplicated within a commit
			tx.Notify("wake", "b")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var seen []string
		timeout := time.After(2 * time.Second)
		for len(seen) < 2 {
			select {
			case p := <-got:
				seen = append(seen, p)
			case <-timeout:
				t.Fatalf("notifications: %v", seen)
			}
		}
		select {
		case p := <-got:
			t.Fatalf("unexpected extra notification %q (seen %v)", p, seen)
		case <-time.After(50 * time.Millisecond):
		}
		if strings.Join(seen, ",") != "a,b" && strings.Join(seen, ",") != "b,a" {
			t.Fatalf("seen %v", seen)
		}
	})
}

// Two stores on one PostgreSQL database behave as two nodes: a commit on
// one wakes listeners on the other.
func TestNotifyCrossNode(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		a := storetest.Open(t, dsn)
		if a.Dialect() != store.Postgres {
			t.Skip("cross-node notifications need PostgreSQL")
		}
		b := storetest.Open(t, dsn)
		got := make(chan string, 10)
		b.Listen("wake", func(p string) { got <- p })
		ctx := context.Background()
		if err := a.Write(ctx, func(tx *store.Tx) error { tx.Notify("wake", "agt_1"); return nil }); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p != "agt_1" {
				t.Fatalf("payload %q", p)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("node b was not notified")
		}
	})
}

func TestWriteAfterClose(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := db.Write(ctx, func(tx *store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("err = %v", err)
		}
	})
}

// Reopening applies no migration twice and keeps data.
func TestReopenKeepsData(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *store.Tx) error { return insertSetting(ctx, tx, "keep", "1") }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		db2 := storetest.Open(t, dsn)
		if countSettings(t, db2, "keep") != 1 {
			t.Fatal("data lost across reopen")
		}
	})
}

func TestInClause(t *testing.T) {
	for n, want := range map[int]string{0: "NULL", 1: "?", 3: "?, ?, ?"} {
		if got := store.InClause(n); got != want {
			t.Errorf("InClause(%d) = %q, want %q", n, got, want)
		}
	}
}

// The writer's prepared statements run inside the batch's transaction: a
// failed request's rows are rolled back, a request reads its own writes,
// bad SQL reports its error without harming later writes, and queries
// beyond the statement cache still run.
func TestPreparedStatementsStayInTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		for i := 0; i < 3; i++ { // warm the statement cache, then reuse it
			err := db.Write(ctx, func(tx *store.Tx) error {
				if err := insertSetting(ctx, tx, fmt.Sprintf("rb%d", i), "x"); err != nil {
					return err
				}
				var v string
				if err := tx.QueryRow(ctx, "SELECT value FROM settings WHERE key = ?", fmt.Sprintf("rb%d", i)).Scan(&v); err != nil || v != "x" {
					t.Errorf("own write not visible: %q, %v", v, err)
				}
				return errors.New("undo")
			})
			if err == nil || err.Error() != "undo" {
				t.Fatalf("write %d: err = %v, want undo", i, err)
			}
		}
		if n := countSettings(t, db, "rb"); n != 0 {
			t.Fatalf("%d rows of failed writes survived", n)
		}
		err := db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO no_such_table VALUES (?)", 1)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "no_such_table") {
			t.Fatalf("bad SQL: err = %v", err)
		}
		const distinct = 600 // more than the writer caches
		err = db.Write(ctx, func(tx *store.Tx) error {
			for i := 0; i < distinct; i++ {
				var got int
				if err := tx.QueryRow(ctx, fmt.Sprintf("SELECT %d + ?", i), 1).Scan(&got); err != nil {
					return err
				}
				if got != i+1 {
					return fmt.Errorf("query %d answered %d", i, got)
				}
			}
			return insertSetting(ctx, tx, "after", "1")
		})
		if err != nil {
			t.Fatal(err)
		}
		if countSettings(t, db, "after") != 1 {
			t.Fatal("write after bad SQL and a full cache was lost")
		}
	})
}

// Two writers locking the same rows in opposite orders deadlock on
// PostgreSQL; the victim's work is re-run and both commit.
func TestDeadlockVictimIsRetried(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		if db.Dialect() != store.Postgres {
			t.Skip("SQLite has one writer: no deadlocks")
		}
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error {
			if err := insertSetting(ctx, tx, "x", "0"); err != nil {
				return err
			}
			return insertSetting(ctx, tx, "y", "0")
		}); err != nil {
			t.Fatal(err)
		}
		// a locks x, then b locks y, then each reaches for the other's row:
		// a deadlock on every run, whatever the machine's speed. Only the
		// first run of each is choreographed; the victim's re-run just
		// does its work.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		var mu sync.Mutex
		runs := map[string]int{}
		aHasX, bHasY := make(chan struct{}), make(chan struct{})
		lockBoth := func(first, second, name string, mine, theirs chan struct{}) {
			defer wg.Done()
			errs <- db.Write(ctx, func(tx *store.Tx) error {
				mu.Lock()
				runs[name]++
				firstRun := runs[name] == 1
				mu.Unlock()
				if _, err := tx.Exec(ctx, "UPDATE settings SET value = value || ? WHERE key = ?", name, first); err != nil {
					return err
				}
				if firstRun {
					close(mine)
					<-theirs
				}
				_, err := tx.Exec(ctx, "UPDATE settings SET value = value || ? WHERE key = ?", name, second)
				return err
			})
		}
		wg.Add(2)
		go lockBoth("x", "y", "a", aHasX, bHasY)
		<-aHasX // a holds x in its own transaction; b must go to another writer
		go lockBoth("y", "x", "b", bHasY, aHasX)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("write failed: %v", err)
			}
		}
		if runs["a"]+runs["b"] != 3 {
			t.Fatalf("expected a deadlock victim to be re-run: %v", runs)
		}
		var x, y string
		db.QueryRow(ctx, "SELECT value FROM settings WHERE key = 'x'").Scan(&x)
		db.QueryRow(ctx, "SELECT value FROM settings WHERE key = 'y'").Scan(&y)
		if len(x) != 3 || len(y) != 3 {
			t.Fatalf("x=%q y=%q: each write applied exactly once", x, y)
		}
	})
}

// SQLite's WAL is copied into the database file beside the writer, which
// never checkpoints in a commit: rows reach the database file within a
// checkpoint interval or two.
func TestSQLiteCheckpointsBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.db")
	db := storetest.Open(t, path)
	ctx := context.Background()
	var autockpt int
	if err := db.Write(ctx, func(tx *store.Tx) error {
		return tx.QueryRow(ctx, "PRAGMA wal_autocheckpoint").Scan(&autockpt)
	}); err != nil || autockpt != 0 {
		t.Fatalf("the writer's wal_autocheckpoint is %d (%v), want 0", autockpt, err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4000)
	for i := 0; i < 4; i++ {
		err := db.Write(ctx, func(tx *store.Tx) error {
			for j := 0; j < 100; j++ {
				if err := insertSetting(ctx, tx, fmt.Sprintf("ck%d-%03d", i, j), big); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= before.Size()+1500000 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after 1.6 MB of writes (was %d): nothing checkpointed", st.Size(), before.Size())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
