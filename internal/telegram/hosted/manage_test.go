package hosted_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// wantErr checks a hub error's status, code and (optionally) field.
func wantErr(t *testing.T, what string, err error, status int, code, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %d %s", what, status, code)
	}
	if client.Code(err) != code || client.Status(err) != status {
		t.Fatalf("%s: %v, want %d %s", what, err, status, code)
	}
	var ce *client.Error
	if field != "" && (!errors.As(err, &ce) || ce.Body.FieldErrors[field] == "") {
		t.Fatalf("%s: no field error for %s: %v", what, field, err)
	}
}

// Bad registrations are refused with the field to fix and keep nothing.
func TestAddBotRefusals(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		w := newWorld(t, dsn, "poll")
		other := w.fake.AddBot("other_bot")
		good := client.AddTelegramBotParams{Token: other.Token, AgentID: w.agent.ID, APIURL: w.fake.URL()}
		cases := []struct {
			name   string
			edit   func(p *client.AddTelegramBotParams)
			status int
			code   string
			field  string
		}{
			{"no token", func(p *client.AddTelegramBotParams) { p.Token = "" }, 400, "validation_failed", "token"},
			{"malformed token", func(p *client.AddTelegramBotParams) { p.Token = "not a token" }, 400, "validation_failed", "token"},
			{"token Telegram does not know", func(p *client.AddTelegramBotParams) { p.Token = "123:" + strings.Repeat("z", 35) }, 422, "invalid_bot_token", "token"},
			{"no agent", func(p *client.AddTelegramBotParams) { p.AgentID = "" }, 400, "validation_failed", "agentId"},
			{"unknown agent", func(p *client.AddTelegramBotParams) { p.AgentID = "agt_nobody" }, 422, "unknown_agent", "agentId"},
			{"bad mode", func(p *client.AddTelegramBotParams) { p.Mode = "push" }, 400, "validation_failed", "mode"},
			{"bad scope", func(p *client.AddTelegramBotParams) { p.Scope = "some" }, 400, "validation_failed", "scope"},
			{"bad api url", func(p *client.AddTelegramBotParams) { p.APIURL = "ftp://x" }, 400, "validation_failed", "apiUrl"},
			{"bad resolve", func(p *client.AddTelegramBotParams) { p.Resolve = "explode" }, 400, "validation_failed", "resolve"},
			{"bad locale", func(p *client.AddTelegramBotParams) { p.DefaultLocale = "fr" }, 400, "validation_failed", "defaultLocale"},
			{"already hosted", func(p *client.AddTelegramBotParams) { p.Token = w.tg.Token }, 409, "bot_exists", ""},
		}
		for _, c := range cases {
			p := good
			c.edit(&p)
			_, err := w.hub.Admin.AddTelegramBot(w.ctx, p)
			wantErr(t, c.name, err, c.status, c.code, c.field)
			if c.field == "token" && p.Token != "" && strings.Contains(err.Error(), p.Token) {
				t.Fatalf("%s: the error echoes the token", c.name)
			}
		}
		if _, err := w.rtc.AddTelegramBot(w.ctx, good); client.Status(err) != http.StatusForbidden {
			t.Fatalf("an agent added a bot: %v", err)
		}
		bots, err := w.hub.Admin.TelegramBots(w.ctx, "")
		if err != nil || len(bots) != 1 {
			t.Fatalf("refusals kept bots: %+v %v", bots, err)
		}
		// The webhook is registered only in webhook mode; a refused
		// registration leaves no webhook behind.
		if n := len(other.Calls("setWebhook")); n != 0 {
			t.Fatalf("setWebhook called %d times for refused registrations", n)
		}
	})
}

// The admin manages bots; the bound agent may read its bot, reply and read
// policies; any other agent gets E001. Secrets never leave the hub and are
// stored sealed.
func TestBotAccessAndSecrets(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		w := newWorld(t, dsn, "poll")
		if w.bot.Username != "reply_bot" || w.bot.TelegramID != w.tg.ID || w.bot.AgentID != w.agent.ID ||
			w.bot.Mode != "poll" || w.bot.Scope != "all" || w.bot.Resolve != "mark" || w.bot.WebhookURL != "" {
			t.Fatalf("bot view %+v", w.bot)
		}
		_, stranger := w.hub.NewAgent("stranger")

		var raw json.RawMessage
		if err := w.rtc.Do(w.ctx, http.MethodGet, "/v1/replyctl/bots/"+w.bot.ID, nil, nil, &raw); err != nil {
			t.Fatalf("bound agent reads its bot: %v", err)
		}
		secretPart := strings.SplitN(w.tg.Token, ":", 2)[1]
		if strings.Contains(string(raw), secretPart) || strings.Contains(string(raw), "token") {
			t.Fatalf("bot view leaks secrets: %s", raw)
		}
		var sealed string
		if err := w.hub.App.DB.QueryRow(w.ctx, `SELECT token FROM telegram_bots WHERE id = ?`, w.bot.ID).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sealed, secretPart) || !strings.HasPrefix(sealed, "v1.") {
			t.Fatalf("the token is not sealed at rest: %q", sealed)
		}

		if bots, err := w.rtc.TelegramBots(w.ctx, ""); err != nil || len(bots) != 1 || bots[0].ID != w.bot.ID {
			t.Fatalf("bound agent's list: %+v %v", bots, err)
		}
		if bots, err := stranger.TelegramBots(w.ctx, ""); err != nil || len(bots) != 0 {
			t.Fatalf("stranger's list: %+v %v", bots, err)
		}
		_, err := stranger.TelegramBots(w.ctx, w.agent.ID)
		wantErr(t, "stranger lists another agent's bots", err, 403, "not_your_agent", "")
		_, err = stranger.TelegramBot(w.ctx, w.bot.ID)
		wantErr(t, "stranger reads the bot", err, 403, "not_your_bot", "")
		_, err = stranger.SendTelegramReply(w.ctx, w.bot.ID, client.TelegramReply{ChatID: w.dm.ID, Text: "hi"})
		wantErr(t, "stranger replies", err, 403, "not_your_bot", "")
		_, err = stranger.ReplyPolicy(w.ctx, w.bot.ID, client.PolicyQuery{ChatID: w.dm.ID})
		wantErr(t, "stranger reads a policy", err, 403, "not_your_bot", "")
		key := replyctl.Key{BotID: w.bot.ID, ChatID: w.dm.ID}.String()
		_, err = stranger.ReplyPolicyByKey(w.ctx, key)
		wantErr(t, "stranger reads a policy by key", err, 403, "not_your_bot", "")
		if len(w.tg.Messages(w.dm)) != 0 {
			t.Fatal("a refused reply reached Telegram")
		}

		// The admin may do everything the bound agent may.
		if _, err := w.hub.Admin.ReplyPolicyByKey(w.ctx, key); err != nil {
			t.Fatalf("admin policy: %v", err)
		}
		err = w.rtc.RemoveTelegramBot(w.ctx, w.bot.ID)
		wantErr(t, "the bound agent removes its bot", err, 403, "admin_required", "")

		if err := w.hub.Admin.RemoveTelegramBot(w.ctx, w.bot.ID); err != nil {
			t.Fatalf("remove: %v", err)
		}
		_, err = w.hub.Admin.TelegramBot(w.ctx, w.bot.ID)
		wantErr(t, "read a removed bot", err, 404, "bot_not_found", "")
		err = w.hub.Admin.RemoveTelegramBot(w.ctx, w.bot.ID)
		wantErr(t, "remove twice", err, 404, "bot_not_found", "")
		w.waitFake("polling to stop", func() bool { return !w.tg.Polling() })

		// A removed bot can be hosted again, here in webhook mode.
		again, err := w.hub.Admin.AddTelegramBot(w.ctx, client.AddTelegramBotParams{Token: w.tg.Token, AgentID: w.agent.ID,
			Mode: "webhook", APIURL: w.fake.URL(), Scope: "dm"})
		if err != nil || again.WebhookURL != w.hub.URL+"/v1/telegram/webhook/"+again.ID || again.Scope != "dm" {
			t.Fatalf("re-add in webhook mode: %+v %v", again, err)
		}
		calls := w.tg.Calls("setWebhook")
		if len(calls) == 0 || calls[len(calls)-1].Params["url"] != again.WebhookURL || calls[len(calls)-1].Params["secret_token"] == "" {
			t.Fatalf("setWebhook calls %+v", calls)
		}
		if err := w.hub.Admin.RemoveTelegramBot(w.ctx, again.ID); err != nil {
			t.Fatal(err)
		}
		if n := len(w.tg.Calls("deleteWebhook")); n == 0 {
			t.Fatal("removing a webhook bot must delete its webhook")
		}
	})
}

// Replies and policy queries with bad input get a structured error naming
// the field; Telegram's refusals come back mapped.
func TestReplyAndPolicyValidation(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		w := newWorld(t, dsn, "poll")
		cases := []struct {
			name   string
			r      client.TelegramReply
			status int
			code   string
			field  string
		}{
			{"no chat", client.TelegramReply{Text: "x"}, 400, "validation_failed", "chatId"},
			{"no text", client.TelegramReply{ChatID: w.dm.ID, Text: "  "}, 400, "validation_failed", "text"},
			{"huge text", client.TelegramReply{ChatID: w.dm.ID, Text: strings.Repeat("x", 70000)}, 400, "validation_failed", "text"},
			{"bad parse mode", client.TelegramReply{ChatID: w.dm.ID, Text: "x", ParseMode: "LaTeX"}, 400, "validation_failed", "parseMode"},
			{"negative thread", client.TelegramReply{ChatID: w.dm.ID, Text: "x", ThreadID: -1}, 400, "validation_failed", "threadId"},
			{"bad reply id", client.TelegramReply{ChatID: w.dm.ID, Text: "x", ReplyID: "has spaces"}, 400, "validation_failed", "replyId"},
			{"unknown chat", client.TelegramReply{ChatID: 424242, Text: "x"}, 422, "telegram_bad_request", ""},
			{"broken markup", client.TelegramReply{ChatID: w.dm.ID, Text: "<b>open", ParseMode: "HTML"}, 422, "telegram_bad_request", ""},
		}
		for _, c := range cases {
			_, err := w.rtc.SendTelegramReply(w.ctx, w.bot.ID, c.r)
			wantErr(t, c.name, err, c.status, c.code, c.field)
		}
		_, err := w.rtc.SendTelegramReply(w.ctx, "bot_nosuchbot", client.TelegramReply{ChatID: w.dm.ID, Text: "x"})
		wantErr(t, "unknown bot", err, 404, "bot_not_found", "")

		var d client.Decision
		err = w.rtc.Do(w.ctx, http.MethodGet, "/v1/replyctl/bots/"+w.bot.ID+"/policy", nil, nil, &d)
		wantErr(t, "policy without chatId", err, 400, "validation_failed", "chatId")
		err = w.rtc.Do(w.ctx, http.MethodGet, "/v1/replyctl/bots/"+w.bot.ID+"/policy?chatId=1&threadId=x", nil, nil, &d)
		wantErr(t, "policy with a bad threadId", err, 400, "validation_failed", "threadId")
		_, err = w.rtc.ReplyPolicyByKey(w.ctx, "not-a-key")
		wantErr(t, "policy with a bad key", err, 400, "invalid_key", "key")
		// An unseen conversation is simply "none".
		if d := w.policy(client.PolicyQuery{ChatID: 777}); d.LastChoice != replyctl.ChoiceNone || !d.FollowUpAllowed || d.ProactiveAllowed {
			t.Fatalf("unseen conversation %+v", d)
		}
		if len(w.tg.Messages(w.dm)) != 0 {
			t.Fatal("refused replies reached the chat")
		}
	})
}
