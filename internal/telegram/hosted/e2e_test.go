package hosted_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
	"github.com/switchboard-hub/switchboard/internal/telegram"
	"github.com/switchboard-hub/switchboard/internal/telegram/tgfake"
)

var en = replyctl.TextsFor(replyctl.LocaleEN)

// Every reply carries Continue / Stop on its last chunk only; a newer reply
// takes over the live keyboard; the per-reply opt-out sends none; labels
// follow the user's language.
func TestButtonsOnEveryReply(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		first := w.reply(w.dm, client.TelegramReply{Text: "Short answer."})
		if len(first.MessageIDs) != 1 || !first.Controls || first.Reason != replyctl.ReasonAttach {
			t.Fatalf("first reply %+v", first)
		}
		kb := w.message(w.dm, first.MessageIDs[0]).Keyboard
		if len(kb) != 2 || kb[0][0].Text != en.Continue || kb[1][0].Text != en.Stop {
			t.Fatalf("keyboard %+v, want Continue / Stop", kb)
		}

		long := strings.Repeat("Paragraph of a long answer that needs splitting.\n", 250) // ~12,500 characters
		second := w.reply(w.dm, client.TelegramReply{Text: long})
		if len(second.MessageIDs) != 4 || !second.Controls {
			t.Fatalf("long reply %+v, want 4 chunks with controls", second)
		}
		var got strings.Builder
		for i, id := range second.MessageIDs {
			m := w.message(w.dm, id)
			if tgfake.VisibleLength(m.Text) > telegram.MaxMessageLength {
				t.Fatalf("chunk %d is %d long", i, tgfake.VisibleLength(m.Text))
			}
			got.WriteString(m.Text + "\n") // the whitespace at a cut is dropped
			last := i == len(second.MessageIDs)-1
			if last != (len(m.Keyboard) == 2) {
				t.Fatalf("chunk %d keyboard %+v: only the last chunk carries the controls", i, m.Keyboard)
			}
		}
		if strings.Join(strings.Fields(got.String()), " ") != strings.Join(strings.Fields(long), " ") {
			t.Fatal("the chunks do not add up to the reply")
		}
		if first.Conversation != second.Conversation {
			t.Fatalf("conversations %q and %q", first.Conversation, second.Conversation)
		}
		w.waitKeyboard(w.dm, first.MessageIDs[0], "the first reply's keyboard to be removed", noKeyboard)

		off := false
		bare := w.reply(w.dm, client.TelegramReply{Text: "Pick one of my own options.", Controls: &off})
		if bare.Controls || bare.Reason != replyctl.ReasonReplyOptOut || len(w.message(w.dm, bare.MessageIDs[0]).Keyboard) != 0 {
			t.Fatalf("opt-out reply %+v", bare)
		}
		if len(w.message(w.dm, second.MessageIDs[3]).Keyboard) != 2 {
			t.Fatal("a reply without controls must leave the live keyboard alone")
		}

		zh := w.reply(w.dm, client.TelegramReply{Text: "好的。", LanguageCode: "zh-hant"})
		kb = w.message(w.dm, zh.MessageIDs[0]).Keyboard
		tw := replyctl.TextsFor(replyctl.LocaleZhTW)
		if len(kb) != 2 || kb[0][0].Text != tw.Continue || kb[1][0].Text != tw.Stop {
			t.Fatalf("zh-hant keyboard %+v", kb)
		}
	})
}

// Continue and Stop: the tap is answered with its toast, the state is set,
// the keyboard resolved, the runtime notified, and the policy says so.
func TestContinueAndStop(t *testing.T) {
	cases := []struct {
		choice    replyctl.Choice
		button    int // 0 Continue, 1 Stop
		toast     string
		resolved  string
		followUp  bool
		proactive bool
		closed    bool
	}{
		{replyctl.ChoiceContinue, 0, en.ToastContinue, en.ResolvedContinue, true, true, false},
		{replyctl.ChoiceStop, 1, en.ToastStop, en.ResolvedStop, false, false, true},
	}
	eachMode(t, modes, func(t *testing.T, w *world) {
		for i, c := range cases {
			chat := w.dm
			if i == 1 {
				chat = w.tg.PrivateChat(w.bob)
			}
			res := w.reply(chat, client.TelegramReply{Text: "Done. Anything else?", ReplyID: fmt.Sprintf("reply-%d", i)})
			id := res.MessageIDs[0]
			cont, stop := w.controls(chat, id)
			user := w.alice
			if i == 1 {
				user = w.bob
			}
			a := w.tap(chat, id, user, []string{cont, stop}[c.button])
			if a.Text != c.toast {
				t.Fatalf("%s: toast %q, want %q", c.choice, a.Text, c.toast)
			}
			w.waitKeyboard(chat, id, "the keyboard to resolve", resolvedTo(c.resolved))

			pushed := w.rt.waitChoice(t, func(ch client.ReplyChoice) bool { return ch.Conversation == res.Conversation })
			if pushed.LastChoice != c.choice || pushed.Source != replyctl.SourceButton || pushed.ReplyID != res.ReplyID ||
				pushed.MessageID != id || pushed.UserID != user.ID || pushed.BotID != w.bot.ID || pushed.ChatID != chat.ID ||
				pushed.Closed != c.closed || pushed.Hint == "" {
				t.Fatalf("%s: pushed %+v", c.choice, pushed)
			}
			for _, d := range []client.Decision{
				w.policy(client.PolicyQuery{ChatID: chat.ID}),
				mustPolicyByKey(t, w, res.Conversation),
			} {
				if d.LastChoice != c.choice || d.Source != replyctl.SourceButton || d.FollowUpAllowed != c.followUp ||
					d.ProactiveAllowed != c.proactive || d.Closed != c.closed || d.ReplyID != res.ReplyID || d.At.IsZero() {
					t.Fatalf("%s: policy %+v", c.choice, d)
				}
			}
		}
	})
}

func mustPolicyByKey(t *testing.T, w *world, key string) client.Decision {
	t.Helper()
	d, err := w.rtc.ReplyPolicyByKey(w.ctx, key)
	if err != nil {
		t.Fatalf("policy by key: %v", err)
	}
	return d
}

// A typed message after Stop wins: it reaches the runtime, supersedes the
// choice, and the keyboard still waiting for a tap goes away for good.
func TestTypedMessageAfterStop(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		r1 := w.reply(w.dm, client.TelegramReply{Text: "First answer."})
		_, stop := w.controls(w.dm, r1.MessageIDs[0])
		w.tap(w.dm, r1.MessageIDs[0], w.alice, stop)
		w.rt.waitChoice(t, func(c client.ReplyChoice) bool { return c.LastChoice == replyctl.ChoiceStop })

		r2 := w.reply(w.dm, client.TelegramReply{Text: "A follow-up nobody asked for."})
		cont2, _ := w.controls(w.dm, r2.MessageIDs[0])

		msg := w.typeText(w.dm, w.alice, "Actually, one more task: book a table.", tgfake.MessageOpts{})
		if msg.Text != "Actually, one more task: book a table." || msg.UserID != w.alice.ID || msg.Username != "alice" ||
			msg.ChatType != "private" || msg.BotID != w.bot.ID || msg.ConversationKey != r2.Conversation || msg.LanguageCode != "en" {
			t.Fatalf("forwarded message %+v", msg)
		}
		if msg.Policy.LastChoice != replyctl.ChoiceSuperseded || msg.Policy.Source != replyctl.SourceTyped {
			t.Fatalf("forwarded policy %+v", msg.Policy)
		}
		req := w.rt.requestFor(msg)
		if req == nil || req.From.Agent != client.TelegramSender || req.Type != "request" {
			t.Fatalf("forwarded envelope %+v", req)
		}
		w.waitKeyboard(w.dm, r2.MessageIDs[0], "the pending keyboard to be removed", noKeyboard)
		d := w.policy(client.PolicyQuery{ChatID: w.dm.ID})
		if d.LastChoice != replyctl.ChoiceSuperseded || d.Closed || !d.FollowUpAllowed || d.ProactiveAllowed {
			t.Fatalf("policy after typing %+v", d)
		}
		// The removed keyboard's data, replayed by a stale client, is no longer current.
		if a := w.forge(w.dm, r2.MessageIDs[0], w.alice, cont2); a.Text != en.ToastNotCurrent {
			t.Fatalf("tap on the overridden reply: %q", a.Text)
		}
		if d2 := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d2.LastChoice != replyctl.ChoiceSuperseded || !d2.At.Equal(d.At) {
			t.Fatalf("a stale tap changed the policy: %+v", d2)
		}
	})
}

// A double tap and a redelivered update change the state once, notify the
// runtime once, and every callback is answered.
func TestDoubleTapAndDuplicateUpdate(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		res := w.reply(w.dm, client.TelegramReply{Text: "Done."})
		id := res.MessageIDs[0]
		_, stop := w.controls(w.dm, id)
		q1, err := w.tg.TapButton(w.dm, int(id), w.alice, stop)
		if err != nil {
			t.Fatal(err)
		}
		firstUpdate := w.tg.LastUpdateID()
		// The second tap comes from a client that has not seen the edit yet.
		q2, err := w.tg.ForgeCallback(w.dm, int(id), w.alice, stop)
		if err != nil {
			t.Fatal(err)
		}
		toasts := []string{w.answer(q1).Text, w.answer(q2).Text}
		slices.Sort(toasts)
		want := []string{en.ToastStop, en.ToastAlreadyChosen}
		slices.Sort(want)
		if !slices.Equal(toasts, want) {
			t.Fatalf("toasts %q, want %q", toasts, want)
		}
		if err := w.tg.InjectDuplicate(firstUpdate); err != nil {
			t.Fatal(err)
		}
		if w.mode == "webhook" {
			w.waitFake("the duplicate to be delivered", func() bool {
				n := 0
				for _, d := range w.tg.Deliveries() {
					if d.UpdateID == firstUpdate && d.Status == http.StatusOK {
						n++
					}
				}
				return n == 2
			})
		} else {
			w.waitFake("the duplicate to be fetched", func() bool { return w.tg.PendingUpdates() == 0 })
		}
		// A typed message is a barrier: once the runtime has it, anything the
		// duplicate could have caused would have arrived before it.
		w.typeText(w.dm, w.alice, "thanks", tgfake.MessageOpts{})

		if n := len(w.tg.Answers()); n != 2 {
			t.Fatalf("%d callback answers, want 2 (the duplicate is dropped, not answered twice)", n)
		}
		if n := len(w.rt.choices()); n != 1 {
			t.Fatalf("the runtime got %d choices, want 1", n)
		}
		chosen := 0
		for _, h := range w.history(res.Conversation) {
			if h.Source == replyctl.SourceButton {
				chosen++
			}
		}
		if chosen != 1 {
			t.Fatalf("%d recorded button choices, want 1", chosen)
		}
	})
}

// A tap on an older reply's buttons (a stale client view) is answered "no
// longer current" and changes nothing.
func TestStaleTapOnOlderReply(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		r1 := w.reply(w.dm, client.TelegramReply{Text: "Older answer."})
		_, stop1 := w.controls(w.dm, r1.MessageIDs[0])
		r2 := w.reply(w.dm, client.TelegramReply{Text: "Newer answer."})
		w.waitKeyboard(w.dm, r1.MessageIDs[0], "the older keyboard to go", noKeyboard)
		if a := w.forge(w.dm, r1.MessageIDs[0], w.alice, stop1); a.Text != en.ToastNotCurrent {
			t.Fatalf("stale tap toast %q", a.Text)
		}
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("a stale tap changed the policy: %+v", d)
		}
		cont2, _ := w.controls(w.dm, r2.MessageIDs[0])
		if a := w.tap(w.dm, r2.MessageIDs[0], w.alice, cont2); a.Text != en.ToastContinue {
			t.Fatalf("tap on the live reply: %q", a.Text)
		}
	})
}

// Forged, oversize and foreign callback data is answered and changes
// nothing; the real buttons keep working.
func TestForgedAndOversizeCallbackData(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		res := w.reply(w.dm, client.TelegramReply{Text: "Answer."})
		id := res.MessageIDs[0]
		cont, stop := w.controls(w.dm, id)
		parts := strings.Split(stop, ":") // rec1:s:<nonce>:<tag>
		if len(parts) != 4 {
			t.Fatalf("callback data %q is not signed", stop)
		}
		cases := []struct{ name, data, toast string }{
			{"bad tag", "rec1:s:" + parts[2] + ":AAAAAAAAAAAAAAAA", en.ToastInvalid},
			{"no tag", "rec1:s:" + parts[2], en.ToastInvalid},
			{"other nonce", "rec1:c:abcdefgh12345678:" + parts[3], en.ToastInvalid},
			{"oversize", "rec1:s:" + parts[2] + ":" + strings.Repeat("A", 80), en.ToastInvalid},
			{"future version", "rec9:s:" + parts[2], en.ToastInvalid},
			{"not ours", "menu:open", ""},
		}
		for _, c := range cases {
			if a := w.forge(w.dm, id, w.alice, c.data); a.Text != c.toast {
				t.Fatalf("%s: toast %q, want %q", c.name, a.Text, c.toast)
			}
		}
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("forged data changed the policy: %+v", d)
		}
		if kb := w.message(w.dm, id).Keyboard; len(kb) != 2 || kb[0][0].CallbackData != cont {
			t.Fatalf("forged data touched the keyboard: %+v", kb)
		}
		if a := w.tap(w.dm, id, w.alice, cont); a.Text != en.ToastContinue {
			t.Fatalf("the real button after forgeries: %q", a.Text)
		}
	})
}

// In a group, only the user a reply answers may choose.
func TestGroupTapByAnotherUser(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		group := w.tg.Supergroup("Team", false)
		msg := w.typeText(group, w.alice, "@reply_bot summarize the thread", tgfake.MessageOpts{})
		if msg.ChatType != "supergroup" || msg.UserID != w.alice.ID {
			t.Fatalf("group message %+v", msg)
		}
		res := w.reply(group, client.TelegramReply{Text: "Summary: ...", UserID: msg.UserID})
		id := res.MessageIDs[0]
		cont, stop := w.controls(group, id)
		if a := w.tap(group, id, w.bob, stop); a.Text != en.ToastNotForYou {
			t.Fatalf("bob's tap: %q", a.Text)
		}
		if d := w.policy(client.PolicyQuery{ChatID: group.ID}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("bob's tap changed the policy: %+v", d)
		}
		if kb := w.message(group, id).Keyboard; len(kb) != 2 {
			t.Fatalf("bob's tap touched the keyboard: %+v", kb)
		}
		if a := w.tap(group, id, w.alice, cont); a.Text != en.ToastContinue {
			t.Fatalf("alice's tap: %q", a.Text)
		}
		if d := w.policy(client.PolicyQuery{ChatID: group.ID}); d.LastChoice != replyctl.ChoiceContinue {
			t.Fatalf("policy after alice's tap: %+v", d)
		}
	})
}

// A webhook POST with a wrong or missing secret is refused with 401 before
// anything is read or recorded.
func TestWrongWebhookSecret(t *testing.T) {
	eachMode(t, []string{"webhook"}, func(t *testing.T, w *world) {
		res := w.reply(w.dm, client.TelegramReply{Text: "Answer."})
		id := res.MessageIDs[0]
		_, stop := w.controls(w.dm, id)
		update := map[string]any{"update_id": 999000001, "callback_query": map[string]any{
			"id": "77", "chat_instance": "1", "data": stop,
			"from":    map[string]any{"id": w.alice.ID, "is_bot": false, "first_name": "Alice"},
			"message": map[string]any{"message_id": id, "date": 1, "chat": map[string]any{"id": w.dm.ID, "type": "private"}},
		}}
		body, _ := json.Marshal(update)
		post := func(secret string) int {
			req, _ := http.NewRequestWithContext(w.ctx, http.MethodPost, w.bot.WebhookURL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if secret != "" {
				req.Header.Set(telegram.SecretHeader, secret)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, secret := range []string{"", "wrong-secret", strings.Repeat("x", 300)} {
			if code := post(secret); code != http.StatusUnauthorized {
				t.Fatalf("secret %q: status %d, want 401", secret, code)
			}
		}
		req, _ := http.NewRequestWithContext(w.ctx, http.MethodPost, w.hub.URL+"/v1/telegram/webhook/bot_nosuchbot", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown bot: %d", resp.StatusCode)
		}
		// Nothing happened: no answer, no choice, keyboard live, and the
		// update id was not consumed.
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("a refused webhook changed the policy: %+v", d)
		}
		if n := len(w.tg.Calls("answerCallbackQuery")); n != 0 {
			t.Fatalf("%d callback answers after refused webhooks", n)
		}
		if dup, err := w.hub.App.Telegram.Controls().SeenUpdate(w.ctx, w.bot.ID, 999000001); err != nil || dup {
			t.Fatalf("a refused webhook recorded its update id: %v %v", dup, err)
		}
		if a := w.tap(w.dm, id, w.alice, stop); a.Text != en.ToastStop {
			t.Fatalf("a real tap afterwards: %q", a.Text)
		}
	})
}

// State survives a restart between sending a reply and the tap on it.
func TestRestartBetweenSendAndTap(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		res := w.reply(w.dm, client.TelegramReply{Text: "Sent before the restart."})
		id := res.MessageIDs[0]
		_, stop := w.controls(w.dm, id)
		w.hub.Restart()
		if w.mode == "poll" {
			w.waitFake("the restarted hub to poll", w.tg.Polling)
		}
		if a := w.tap(w.dm, id, w.alice, stop); a.Text != en.ToastStop {
			t.Fatalf("tap after restart: %q", a.Text)
		}
		w.waitKeyboard(w.dm, id, "the keyboard to resolve", resolvedTo(en.ResolvedStop))
		c := w.rt.waitChoice(t, func(c client.ReplyChoice) bool { return c.Conversation == res.Conversation })
		if c.LastChoice != replyctl.ChoiceStop {
			t.Fatalf("pushed after restart: %+v", c)
		}
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d.LastChoice != replyctl.ChoiceStop || !d.Closed {
			t.Fatalf("policy after restart: %+v", d)
		}
	})
}

// Forum topics and business connections are conversations of their own:
// each keeps its own live keyboard and its own choice.
func TestTopicAndBusinessIsolation(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		forum := w.tg.Supergroup("Forum", true)
		t1, err := w.tg.CreateTopic(forum, "Travel")
		if err != nil {
			t.Fatal(err)
		}
		t2, err := w.tg.CreateTopic(forum, "Food")
		if err != nil {
			t.Fatal(err)
		}
		m1 := w.typeText(forum, w.alice, "plan a trip", tgfake.MessageOpts{ThreadID: t1})
		m2 := w.typeText(forum, w.alice, "find a recipe", tgfake.MessageOpts{ThreadID: t2})
		if m1.ThreadID != int64(t1) || m2.ThreadID != int64(t2) || m1.ConversationKey == m2.ConversationKey {
			t.Fatalf("topic messages %+v / %+v", m1, m2)
		}
		r1 := w.reply(forum, client.TelegramReply{Text: "Trip plan.", ThreadID: int64(t1), UserID: w.alice.ID})
		r2 := w.reply(forum, client.TelegramReply{Text: "Recipe.", ThreadID: int64(t2), UserID: w.alice.ID})
		if r1.Conversation != m1.ConversationKey || r2.Conversation != m2.ConversationKey {
			t.Fatalf("reply conversations %q %q", r1.Conversation, r2.Conversation)
		}
		if got := w.message(forum, r1.MessageIDs[0]); got.ThreadID != t1 {
			t.Fatalf("reply landed in topic %d", got.ThreadID)
		}
		_, stop1 := w.controls(forum, r1.MessageIDs[0])
		w.controls(forum, r2.MessageIDs[0]) // the second topic's reply did not take over the first's keyboard
		w.tap(forum, r1.MessageIDs[0], w.alice, stop1)
		if d := w.policy(client.PolicyQuery{ChatID: forum.ID, ThreadID: int64(t1)}); d.LastChoice != replyctl.ChoiceStop {
			t.Fatalf("topic 1: %+v", d)
		}
		if d := w.policy(client.PolicyQuery{ChatID: forum.ID, ThreadID: int64(t2)}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("topic 2 changed with topic 1: %+v", d)
		}

		bc := w.tg.ConnectBusiness(w.bob)
		biz, err := w.tg.BusinessChat(bc, w.alice)
		if err != nil {
			t.Fatal(err)
		}
		bm := w.typeText(biz, w.alice, "is the shop open?", tgfake.MessageOpts{})
		if bm.BusinessConnectionID != bc || bm.ChatID != w.dm.ID || bm.ConversationKey == "" {
			t.Fatalf("business message %+v", bm)
		}
		rd := w.reply(w.dm, client.TelegramReply{Text: "Direct answer."})
		rb := w.reply(biz, client.TelegramReply{Text: "Business answer."})
		if rd.Conversation == rb.Conversation || rb.Conversation != bm.ConversationKey {
			t.Fatalf("direct %q and business %q conversations", rd.Conversation, rb.Conversation)
		}
		contB, _ := w.controls(biz, rb.MessageIDs[0])
		w.controls(w.dm, rd.MessageIDs[0])
		if a := w.tap(biz, rb.MessageIDs[0], w.alice, contB); a.Text != en.ToastContinue {
			t.Fatalf("business tap: %q", a.Text)
		}
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID, BusinessConnectionID: bc}); d.LastChoice != replyctl.ChoiceContinue {
			t.Fatalf("business conversation: %+v", d)
		}
		if d := w.policy(client.PolicyQuery{ChatID: w.dm.ID}); d.LastChoice != replyctl.ChoiceNone {
			t.Fatalf("the direct conversation changed with the business one: %+v", d)
		}
		if kb := w.message(w.dm, rd.MessageIDs[0]).Keyboard; len(kb) != 2 {
			t.Fatalf("the direct reply lost its keyboard: %+v", kb)
		}
	})
}

// A 429 on the keyboard edit is waited out (retry_after) and the edit then
// succeeds; the tap itself is answered without waiting for it.
func TestRateLimitedEditThenSuccess(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		res := w.reply(w.dm, client.TelegramReply{Text: "Answer."})
		id := res.MessageIDs[0]
		cont, _ := w.controls(w.dm, id)
		w.tg.FailNext("editMessageReplyMarkup", 1, 3)
		if a := w.tap(w.dm, id, w.alice, cont); a.Text != en.ToastContinue {
			t.Fatalf("toast %q", a.Text)
		}
		w.waitKeyboard(w.dm, id, "the keyboard to resolve after the 429", resolvedTo(en.ResolvedContinue))
		var statuses []int
		for _, c := range w.tg.Calls("editMessageReplyMarkup") {
			statuses = append(statuses, c.Status)
		}
		if !slices.Equal(statuses, []int{http.StatusTooManyRequests, http.StatusOK}) {
			t.Fatalf("edit calls answered %v, want 429 then 200", statuses)
		}
		if !slices.ContainsFunc(w.sleeps.all(), func(d time.Duration) bool { return d > 2*time.Second && d <= 3*time.Second }) {
			t.Fatalf("the client did not wait out retry_after (3s): waits %v", w.sleeps.all())
		}
	})
}

// /controls off|on switches a chat's controls; the hub answers in the chat
// and the runtime never sees the command.
func TestOptOutPerChat(t *testing.T) {
	eachMode(t, modes, func(t *testing.T, w *world) {
		command := func(text, answer string) {
			t.Helper()
			before := len(w.tg.Messages(w.dm))
			if _, err := w.tg.TypeMessage(w.dm, w.alice, text, tgfake.MessageOpts{}); err != nil {
				t.Fatal(err)
			}
			w.waitFake("the hub's answer to "+text, func() bool {
				ms := w.tg.Messages(w.dm)
				return len(ms) >= before+2 && ms[len(ms)-1].ByBot && ms[len(ms)-1].Text == answer
			})
		}
		command("/controls off", en.ControlsOff)
		off := w.reply(w.dm, client.TelegramReply{Text: "No buttons now."})
		if off.Controls || off.Reason != replyctl.ReasonChatOff || len(w.message(w.dm, off.MessageIDs[0]).Keyboard) != 0 {
			t.Fatalf("reply in an opted-out chat %+v", off)
		}
		command("/controls@reply_bot on", en.ControlsOn)
		on := w.reply(w.dm, client.TelegramReply{Text: "Buttons again."})
		if !on.Controls || len(w.message(w.dm, on.MessageIDs[0]).Keyboard) != 2 {
			t.Fatalf("reply after /controls on %+v", on)
		}
		// Another chat is unaffected by this chat's switch.
		bobChat := w.tg.PrivateChat(w.bob)
		if r := w.reply(bobChat, client.TelegramReply{Text: "Hi Bob."}); !r.Controls {
			t.Fatalf("another chat lost its controls: %+v", r)
		}
		w.typeText(w.dm, w.alice, "a real message", tgfake.MessageOpts{})
		for _, m := range w.rt.messages() {
			if strings.HasPrefix(m.Text, "/controls") {
				t.Fatalf("the runtime received the command %q", m.Text)
			}
		}
	})
}

// A runtime may answer telegram.message with a response; its result text
// is sent as the reply, with the controls.
func TestResponseBecomesReply(t *testing.T) {
	eachMode(t, []string{"poll"}, func(t *testing.T, w *world) {
		msg := w.typeText(w.dm, w.alice, "what's the weather?", tgfake.MessageOpts{})
		req := w.rt.requestFor(msg)
		resp, err := client.NewResponse(req, "success", map[string]any{"text": "Sunny, 24°C."})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.rt.sock.Send(w.ctx, resp); err != nil {
			t.Fatalf("send response: %v", err)
		}
		var reply tgfake.Message
		w.waitFake("the reply", func() bool {
			for _, m := range w.tg.Messages(w.dm) {
				if m.ByBot && m.Text == "Sunny, 24°C." {
					reply = m
					return true
				}
			}
			return false
		})
		if len(reply.Keyboard) != 2 {
			t.Fatalf("reply keyboard %+v", reply.Keyboard)
		}
		// An invalid result is refused to the runtime, not silently dropped.
		bad, _ := client.NewResponse(req, "success", map[string]any{"text": "x", "parseMode": "LaTeX"})
		bad.ID = "resp-bad"
		if _, err := w.rt.sock.Send(w.ctx, bad); err == nil || !strings.Contains(err.Error(), "parseMode") {
			t.Fatalf("invalid result: %v", err)
		}
	})
}

// When buttons expire untapped, the sweep removes the keyboard and tells
// the runtime (source timeout); a late tap is answered "expired".
func TestExpirySweep(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		clk := clock.NewFake(time.Now().UTC())
		w := newWorld(t, dsn, "poll", func(c *app.Config) { c.Clock = clk })
		res := w.reply(w.dm, client.TelegramReply{Text: "Answer."})
		id := res.MessageIDs[0]
		cont, _ := w.controls(w.dm, id)
		clk.Advance(replyctl.DefaultTTL + time.Minute)
		if err := w.hub.App.Telegram.Sweep(w.ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
		w.waitKeyboard(w.dm, id, "the expired keyboard to go", noKeyboard)
		c := w.rt.waitChoice(t, func(c client.ReplyChoice) bool { return c.Conversation == res.Conversation })
		if c.LastChoice != replyctl.ChoiceExpired || c.Source != replyctl.SourceTimeout || c.UserID != 0 || c.ReplyID != res.ReplyID {
			t.Fatalf("pushed %+v", c)
		}
		if a := w.forge(w.dm, id, w.alice, cont); a.Text != en.ToastExpired {
			t.Fatalf("late tap: %q", a.Text)
		}
		// A second sweep has nothing left to do.
		if err := w.hub.App.Telegram.Sweep(w.ctx); err != nil {
			t.Fatal(err)
		}
		w.typeText(w.dm, w.alice, "barrier", tgfake.MessageOpts{})
		if n := len(w.rt.choices()); n != 1 {
			t.Fatalf("%d choices pushed, want 1", n)
		}
	})
}
