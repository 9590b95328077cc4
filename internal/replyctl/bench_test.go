package replyctl

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// BenchmarkTapSQLite measures a first tap (the write path: lock, check,
// record, history) on the embedded store. Each iteration taps a fresh
// reply in its own conversation; preparing it is not timed.
func BenchmarkTapSQLite(b *testing.B) {
	db := storetest.Open(b, filepath.Join(b.TempDir(), "bench.db"))
	svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
	cfg := BotConfig{BotID: "bot_1", Keys: [][]byte{testKey}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w := Where{ChatID: int64(i + 1), Kind: KindDirect, UserID: int64(i + 1)}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: w})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.ReplyShown(ctx, p.Nonce, 10); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		out, err := svc.Tap(ctx, cfg, TapInput{ChatID: w.ChatID, MessageID: 10, UserID: w.UserID, Data: p.Buttons[i%2].Data})
		if err != nil || out.Result != TapChosen {
			b.Fatalf("%+v %v", out, err)
		}
	}
}

// BenchmarkTapSQLiteDuplicate measures a repeated tap (answered from a read,
// no write), the common case when users tap twice.
func BenchmarkTapSQLiteDuplicate(b *testing.B) {
	db := storetest.Open(b, filepath.Join(b.TempDir(), "bench.db"))
	svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
	cfg := BotConfig{BotID: "bot_1", Keys: [][]byte{testKey}}
	p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: dm})
	if err != nil {
		b.Fatal(err)
	}
	svc.ReplyShown(ctx, p.Nonce, 10)
	in := TapInput{ChatID: dm.ChatID, MessageID: 10, UserID: dm.UserID, Data: p.Buttons[0].Data}
	if _, err := svc.Tap(ctx, cfg, in); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := svc.Tap(ctx, cfg, in)
		if err != nil || out.Result != TapAlreadyChosen {
			b.Fatalf("%+v %v", out, err)
		}
	}
}

// BenchmarkTapSQLiteParallel measures first taps from many goroutines, where
// group commit batches the writes.
func BenchmarkTapSQLiteParallel(b *testing.B) {
	db := storetest.Open(b, filepath.Join(b.TempDir(), "bench.db"))
	svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
	cfg := BotConfig{BotID: "bot_1"}
	type reply struct {
		w Where
		p Prepared
	}
	replies := make([]reply, b.N)
	for i := range replies {
		w := Where{ChatID: int64(i + 1), Kind: KindDirect, UserID: int64(i + 1)}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: w})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.ReplyShown(ctx, p.Nonce, 10); err != nil {
			b.Fatal(err)
		}
		replies[i] = reply{w, p}
	}
	next := make(chan reply, len(replies))
	for _, r := range replies {
		next <- r
	}
	close(next)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := <-next
			out, err := svc.Tap(ctx, cfg, TapInput{ChatID: r.w.ChatID, MessageID: 10, UserID: r.w.UserID, Data: r.p.Buttons[0].Data})
			if err != nil || out.Result != TapChosen {
				b.Errorf("%+v %v", out, err)
				return
			}
		}
	})
}
