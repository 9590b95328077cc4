package hosted_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
	"github.com/switchboard-hub/switchboard/internal/telegram/hosted"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

// BenchmarkTapToAnswer measures a first tap on a live keyboard, from the
// moment the user taps (the fake Bot API queues the callback query) to the
// moment the hub's answerCallbackQuery reaches the fake: the webhook POST
// or the long poll's wake-up over loopback, dedupe, the choice recorded
// with its bus notification in one transaction, and the answer. Nothing of
// Telegram's own network is in it. Each iteration taps a fresh reply in a
// chat of its own; sending the reply is not timed. It reports p50, p90 and
// p99 in milliseconds.
func BenchmarkTapToAnswer(b *testing.B) {
	for _, be := range storetest.Backends() {
		for _, mode := range modes {
			b.Run(be.Name+"/"+mode, func(b *testing.B) { benchTap(b, be.DSN(b), mode) })
		}
	}
}

func benchTap(b *testing.B, dsn, mode string) {
	ctx := context.Background()
	hub := apptest.Start(b, dsn, func(c *app.Config) {
		c.Telegram = hosted.Tuning{PollTimeout: 10 * time.Second, SweepInterval: time.Hour}
	})
	fake := tgfake.New()
	b.Cleanup(fake.Close)
	tg := fake.AddBot("bench_bot")
	agent, rtc := hub.NewAgent("runtime")
	bot, err := hub.Admin.AddTelegramBot(ctx, client.AddTelegramBotParams{Token: tg.Token, AgentID: agent.ID, Mode: mode, APIURL: fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	// The runtime drains its inbox as a real one would.
	sock, err := rtc.Connect(ctx, client.ConnectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	go func() {
		for {
			d, err := sock.Receive(ctx)
			if err != nil {
				return
			}
			_, _ = sock.Ack(ctx, d)
		}
	}()
	wait := func(cond func() bool) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := tg.WaitFor(wctx, cond); err != nil {
			b.Fatal(err)
		}
	}
	if mode == "poll" {
		wait(tg.Polling)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		user := tgfake.User{ID: int64(100000 + i), FirstName: fmt.Sprintf("U%d", i), LanguageCode: "en"}
		chat := tg.PrivateChat(user)
		res, err := rtc.SendTelegramReply(ctx, bot.ID, client.TelegramReply{ChatID: chat.ID, Text: "Done. Anything else?"})
		if err != nil {
			b.Fatal(err)
		}
		m, _ := tg.Message(chat, int(res.MessageIDs[0]))
		if mode == "poll" {
			wait(tg.Polling) // the poller is idle in its long poll, as between real taps
		}
		b.StartTimer()
		start := time.Now()
		q, err := tg.TapButton(chat, m.ID, user, m.Keyboard[1][0].CallbackData)
		if err != nil {
			b.Fatal(err)
		}
		var a tgfake.CallbackAnswer
		wait(func() bool {
			var ok bool
			a, ok = tg.Answer(q)
			return ok
		})
		lat = append(lat, a.At.Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.90), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	mean, p99 := hubTapLatency(b, hub)
	b.ReportMetric(mean, "hub-mean-ms")
	b.ReportMetric(p99, "hub-p99-ms")
}

// hubTapLatency reads the hub's own tap → answered histogram (from the
// update reaching the handler to answerCallbackQuery returning): the mean,
// and the p99 interpolated within its bucket.
func hubTapLatency(b *testing.B, hub *apptest.Hub) (meanMS, p99MS float64) {
	mfs, err := hub.App.Metrics.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_telegram_tap_answer_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		n := float64(h.GetSampleCount())
		if n == 0 {
			return 0, 0
		}
		want := 0.99 * n
		lo, below := 0.0, 0.0
		for _, bk := range h.GetBucket() {
			c, up := float64(bk.GetCumulativeCount()), bk.GetUpperBound()
			if c >= want {
				p99MS = (lo + (up-lo)*(want-below)/max(c-below, 1)) * 1000
				break
			}
			lo, below = up, c
		}
		return h.GetSampleSum() / n * 1000, p99MS
	}
	b.Fatal("no tap latency histogram")
	return 0, 0
}
