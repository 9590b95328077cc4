package replyctl

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// hookTable is a table the hooks write to, standing in for another
// subsystem's table (the bus) that must commit with the state change.
func hookTable(t *testing.T, db *store.DB) {
	t.Helper()
	err := db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE hook_rows (note TEXT NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hookRows(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM hook_rows`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func insertHookRow(ctx context.Context, tx *store.Tx, note string) error {
	_, err := tx.Exec(ctx, `INSERT INTO hook_rows (note) VALUES (?)`, note)
	return err
}

var errHook = errors.New("hook refused")

// Tap's OnChange runs only for taps that change the conversation, inside
// their transaction: its writes commit with the choice, and its failure
// undoes the choice too.
func TestTapOnChangeIsAtomic(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		h := newHarness(t, dsn, BotConfig{BotID: "bot_1", Keys: [][]byte{testKey}})
		hookTable(t, h.db)
		r := h.prepare(dm)
		h.shown(r)
		tap := TapInput{ChatID: dm.ChatID, MessageID: h.msgs[r], UserID: dm.UserID, Data: h.data(r, ActionStop)}

		// A failing hook: Tap fails, nothing is recorded, the hook's row is gone.
		tap.OnChange = func(ctx context.Context, tx *store.Tx, out TapOutcome) error {
			if err := insertHookRow(ctx, tx, "failed"); err != nil {
				return err
			}
			return errHook
		}
		if _, err := h.svc.Tap(ctx, h.cfg, tap); !errors.Is(err, errHook) {
			t.Fatalf("Tap with a failing hook: %v", err)
		}
		if d, _ := h.svc.Policy(ctx, h.cfg.KeyOf(dm)); d.LastChoice != ChoiceNone {
			t.Fatalf("a failed hook left lastChoice %q", d.LastChoice)
		}
		if n := hookRows(t, h.db); n != 0 {
			t.Fatalf("a failed hook left %d rows", n)
		}

		// A working hook sees the decision and commits with it.
		var seen []TapOutcome
		tap.OnChange = func(ctx context.Context, tx *store.Tx, out TapOutcome) error {
			seen = append(seen, out)
			return insertHookRow(ctx, tx, "ok")
		}
		out, err := h.svc.Tap(ctx, h.cfg, tap)
		if err != nil || out.Result != TapChosen {
			t.Fatalf("Tap: %+v %v", out, err)
		}
		if len(seen) != 1 || seen[0].Decision == nil || seen[0].Decision.LastChoice != ChoiceStop || !seen[0].Decision.Closed {
			t.Fatalf("hook saw %+v", seen)
		}
		if n := hookRows(t, h.db); n != 1 {
			t.Fatalf("hook rows = %d, want 1", n)
		}

		// A repeated tap changes nothing: the hook does not run.
		out, err = h.svc.Tap(ctx, h.cfg, tap)
		if err != nil || out.Result != TapAlreadyChosen || out.Changed {
			t.Fatalf("repeat Tap: %+v %v", out, err)
		}
		if len(seen) != 1 || hookRows(t, h.db) != 1 {
			t.Fatalf("hook ran for a tap that changed nothing")
		}
	})
}

// Typed's Forward runs inside a transaction for every typed message, even
// one with nothing to supersede, and a failure undoes the supersede.
func TestTypedForwardIsAtomic(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		h := newHarness(t, dsn, BotConfig{BotID: "bot_1"})
		hookTable(t, h.db)
		forward := func(note string, fail bool, seen *[]TypedOutcome) func(context.Context, *store.Tx, TypedOutcome) error {
			return func(ctx context.Context, tx *store.Tx, out TypedOutcome) error {
				*seen = append(*seen, out)
				if err := insertHookRow(ctx, tx, note); err != nil {
					return err
				}
				if fail {
					return errHook
				}
				return nil
			}
		}
		var seen []TypedOutcome

		// Nothing to supersede: Forward still runs and commits.
		out, err := h.svc.Typed(ctx, h.cfg, TypedInput{Where: dm, Forward: forward("first", false, &seen)})
		if err != nil || out.Changed || len(seen) != 1 || hookRows(t, h.db) != 1 {
			t.Fatalf("first Typed: %+v %v, seen %d, rows %d", out, err, len(seen), hookRows(t, h.db))
		}
		if out.Decision.LastChoice != ChoiceNone {
			t.Fatalf("decision %+v", out.Decision)
		}

		r := h.prepare(dm)
		h.shown(r)

		// A failing Forward keeps the keyboard live and the choice pending.
		if _, err := h.svc.Typed(ctx, h.cfg, TypedInput{Where: dm, Forward: forward("failed", true, &seen)}); !errors.Is(err, errHook) {
			t.Fatalf("Typed with failing Forward: %v", err)
		}
		st, _, err := h.svc.Store().State(ctx, h.cfg.KeyOf(dm))
		if err != nil || st.LiveNonce != h.replies[r].Nonce || st.LastChoice != ChoiceNone {
			t.Fatalf("state after failed Forward: %+v %v", st, err)
		}
		if hookRows(t, h.db) != 1 {
			t.Fatalf("failed Forward left its row")
		}

		// A working Forward sees the superseded decision and the edit.
		seen = nil
		out, err = h.svc.Typed(ctx, h.cfg, TypedInput{Where: dm, Forward: forward("ok", false, &seen)})
		if err != nil || !out.Changed || len(out.Edits) != 1 || out.Decision.LastChoice != ChoiceSuperseded {
			t.Fatalf("Typed: %+v %v", out, err)
		}
		if len(seen) != 1 || seen[0].Decision.LastChoice != ChoiceSuperseded || hookRows(t, h.db) != 2 {
			t.Fatalf("Forward saw %+v; rows %d", seen, hookRows(t, h.db))
		}
	})
}

// memStoreTx is a ConvTx that is not backed by the Switchboard store.
type memStoreTx struct{ ConvTx }

func TestHooksNeedAStoreTransaction(t *testing.T) {
	if _, err := storeTxOf(memStoreTx{}); err == nil {
		t.Fatal("a ConvTx without a store transaction must be refused")
	}
}
