package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/console"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
)

type fakeBots []console.TelegramBot

func (f fakeBots) ConsoleBots(_ context.Context, agentID string) ([]console.TelegramBot, error) {
	var out []console.TelegramBot
	for _, b := range f {
		if agentID == "" || b.AgentID == agentID {
			out = append(out, b)
		}
	}
	return out, nil
}

// The Telegram page: bots by agent, and each conversation's last choice
// with its source; an agent sees only its bots' conversations.
func TestTelegramPage(t *testing.T) {
	h := apptest.Start(t, "")
	ctx := context.Background()
	y, _ := h.NewAgent("Y")
	z, _ := h.NewAgent("Z")
	svc := replyctl.New(replyctl.NewDBStore(h.App.DB), replyctl.Options{})
	for i, bot := range []string{"bot_yyy", "bot_other"} {
		cfg := replyctl.BotConfig{BotID: bot}
		where := replyctl.Where{ChatID: int64(4242 + i), Kind: replyctl.KindDirect, UserID: int64(4242 + i)}
		p, err := svc.Prepare(ctx, cfg, replyctl.PrepareInput{Where: where, ReplyID: "msg_r"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ReplyShown(ctx, p.Nonce, 900); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := svc.Typed(ctx, cfg, replyctl.TypedInput{Where: where}); err != nil {
				t.Fatal(err)
			}
		}
	}

	admin := signIn(t, h, apptest.AdminToken)
	if p := admin.get("/console/telegram"); p.status != 200 || !strings.Contains(p.body, "No bots") || !strings.Contains(p.body, "4243") {
		t.Fatalf("without bots: %d\n%s", p.status, p.body)
	}
	h.App.Console.SetBots(fakeBots{{ID: "bot_yyy", AgentID: y.ID, Username: "y_helper_bot", Mode: "poll", CreatedAt: time.Now()},
		{ID: "bot_other", AgentID: "agt_someone", Username: "other_bot", Mode: "webhook"}})
	p := admin.get("/console/telegram")
	for _, want := range []string{"@y_helper_bot", "@other_bot", "4242", "4243", "superseded_by_message", "typed", "on message 900"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("admin's Telegram page lacks %q\n%s", want, p.body)
		}
	}
	yp := signIn(t, h, y.Token).get("/console/telegram")
	if !strings.Contains(yp.body, "@y_helper_bot") || !strings.Contains(yp.body, "4242") || strings.Contains(yp.body, "other_bot") || strings.Contains(yp.body, "4243") {
		t.Fatalf("Y's Telegram page shows the wrong bots or chats\n%s", yp.body)
	}
	zp := signIn(t, h, z.Token).get("/console/telegram")
	if strings.Contains(zp.body, "4242") || strings.Contains(zp.body, "bot_yyy") || !strings.Contains(zp.body, "No bots serve this agent") {
		t.Fatalf("Z's Telegram page\n%s", zp.body)
	}
}
