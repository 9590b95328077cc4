package replyctl

import (
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func TestConversationsListing(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		h := newHarness(t, dsn, BotConfig{BotID: "bot_1"})
		chosen := h.prepare(dm)
		h.shown(chosen)
		if _, err := h.svc.Tap(ctx, h.cfg, TapInput{ChatID: dm.ChatID, MessageID: h.msgs[chosen], UserID: dm.UserID, Data: h.data(chosen, ActionContinue)}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		other := BotConfig{BotID: "bot_2"}
		p, err := h.svc.Prepare(ctx, other, PrepareInput{Where: group, ReplyID: "msg_g"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.ReplyShown(ctx, p.Nonce, 77); err != nil {
			t.Fatal(err)
		}
		st := h.svc.Store().(*DBStore)

		all, err := st.Conversations(ctx, nil, 0)
		if err != nil || len(all) != 2 {
			t.Fatalf("all conversations %+v %v", all, err)
		}
		if all[0].Key.BotID != "bot_2" || all[0].LiveMessageID != 77 || all[0].LastChoice != ChoiceNone {
			t.Fatalf("newest first: %+v", all[0])
		}
		if all[1].Key != h.cfg.KeyOf(dm) || all[1].LastChoice != ChoiceContinue || all[1].Source != SourceButton || all[1].At.IsZero() {
			t.Fatalf("chosen conversation %+v", all[1])
		}
		one, err := st.Conversations(ctx, []string{"bot_1"}, 10)
		if err != nil || len(one) != 1 || one[0].Key.BotID != "bot_1" {
			t.Fatalf("bot_1 conversations %+v %v", one, err)
		}
		none, err := st.Conversations(ctx, []string{}, 10)
		if err != nil || len(none) != 0 {
			t.Fatalf("no bots: %+v %v", none, err)
		}
		if lim, _ := st.Conversations(ctx, nil, 1); len(lim) != 1 {
			t.Fatalf("limit 1 gave %d", len(lim))
		}
	})
}
