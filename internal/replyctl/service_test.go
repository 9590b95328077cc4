package replyctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// harness drives a Service over a real store with a fake clock and
// remembers the replies it showed, by index.
type harness struct {
	t       *testing.T
	dsn     string
	db      *store.DB
	svc     *Service
	clk     *clock.Fake
	cfg     BotConfig
	replies []Prepared
	msgs    []int64
	nextMsg int64
}

func newHarness(t *testing.T, dsn string, cfg BotConfig) *harness {
	h := &harness{t: t, dsn: dsn, clk: clock.NewFake(t0), cfg: cfg, nextMsg: 1000}
	h.open()
	return h
}

func (h *harness) open() {
	h.db = storetest.Open(h.t, h.dsn)
	h.svc = New(NewDBStore(h.db), Options{Clock: h.clk})
}

// reopen simulates a restart: a new store connection and a new Service.
func (h *harness) reopen() {
	if err := h.db.Close(); err != nil {
		h.t.Fatalf("close: %v", err)
	}
	h.open()
}

var ctx = context.Background()

var (
	dm       = Where{ChatID: 100, Kind: KindDirect, UserID: 100}
	group    = Where{ChatID: -500, ThreadID: 3, Kind: KindGroup, UserID: 7}
	groupBob = Where{ChatID: -500, ThreadID: 3, Kind: KindGroup, UserID: 8}
)

func (h *harness) prepare(w Where) int {
	h.t.Helper()
	p, err := h.svc.Prepare(ctx, h.cfg, PrepareInput{Where: w, ReplyID: fmt.Sprintf("msg_r%d", len(h.replies)), LanguageCode: "en"})
	if err != nil {
		h.t.Fatalf("Prepare: %v", err)
	}
	if !p.Attach || len(p.Buttons) != 2 {
		h.t.Fatalf("Prepare did not attach controls: %+v", p)
	}
	h.nextMsg++
	h.replies = append(h.replies, p)
	h.msgs = append(h.msgs, h.nextMsg)
	return len(h.replies) - 1
}

func (h *harness) shown(i int) ShownResult {
	h.t.Helper()
	r, err := h.svc.ReplyShown(ctx, h.replies[i].Nonce, h.msgs[i])
	if err != nil {
		h.t.Fatalf("ReplyShown: %v", err)
	}
	return r
}

func (h *harness) data(i int, a Action) string {
	switch a {
	case ActionContinue:
		return h.replies[i].Buttons[0].Data
	case ActionStop:
		return h.replies[i].Buttons[1].Data
	}
	d, err := h.cfg.Codec().Encode(a, h.replies[i].Nonce)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// editedReplies maps edits back to reply indices.
func (h *harness) editedReplies(edits []KeyboardEdit) []int {
	var out []int
	for _, e := range edits {
		i := slices.Index(h.msgs, e.MessageID)
		if i < 0 {
			h.t.Fatalf("edit of unknown message %d", e.MessageID)
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// step is one action in a scenario and what must follow from it.
type step struct {
	do     string // prepare, shown, show, tap, typed, advance, reopen, expire
	where  Where  // prepare/show/typed (default dm)
	reply  int    // tap/shown: which reply
	action Action // tap
	data   string // tap: raw data instead of the reply's button
	user   int64  // tap: who taps (default: the reply's addressed user)
	chat   int64  // tap: chat of the callback (default: the reply's)
	admin  bool   // tap: IsAdmin answers true
	d      time.Duration

	want        TapResult // tap: expected result ("" with notOurs)
	notOurs     bool
	changed     bool
	edits       []int  // replies whose keyboards must be edited (nil: none)
	choice      Choice // policy of the step's conversation afterwards ("" = unchecked)
	conv        *Where // conversation whose policy is checked (default: the step's)
	wantHistory int    // history rows of the conversation afterwards (-1: unchecked)
}

func (h *harness) run(i int, s step) {
	h.t.Helper()
	where := s.where
	if where == (Where{}) {
		where = dm
	}
	var edits []KeyboardEdit
	var changed bool
	checkChanged := true
	switch s.do {
	case "prepare":
		h.prepare(where)
		checkChanged = false
	case "show":
		r := h.shown(h.prepare(where))
		edits, changed = r.Edits, r.Changed
		if !r.Changed || len(r.Events) != 1 || r.Events[0].Type != EventShown {
			h.t.Fatalf("step %d: show events %+v", i, r.Events)
		}
		checkChanged = false
	case "shown":
		r := h.shown(s.reply)
		edits, changed = r.Edits, r.Changed
	case "tap":
		in := TapInput{ChatID: s.chat, MessageID: h.msgs[s.reply], UserID: s.user, LanguageCode: "en", Data: s.data}
		rec, ok, err := h.svc.Store().Nonce(ctx, h.replies[s.reply].Nonce)
		if err != nil || !ok {
			h.t.Fatalf("step %d: nonce lookup: %v %v", i, ok, err)
		}
		if in.ChatID == 0 {
			in.ChatID = rec.Key.ChatID
		}
		if in.UserID == 0 {
			in.UserID = rec.AddressedUserID
		}
		if in.Data == "" {
			in.Data = h.data(s.reply, s.action)
		}
		in.IsAdmin = func(context.Context) (bool, error) { return s.admin, nil }
		out, err := h.svc.Tap(ctx, h.cfg, in)
		if err != nil {
			h.t.Fatalf("step %d: Tap: %v", i, err)
		}
		if out.Ours == s.notOurs {
			h.t.Fatalf("step %d: Ours = %v", i, out.Ours)
		}
		if out.Result != s.want {
			h.t.Fatalf("step %d: tap result %q, want %q (toast %q)", i, out.Result, s.want, out.Toast)
		}
		if out.Ours && out.Toast == "" {
			h.t.Fatalf("step %d: a tap of ours must always get a toast", i)
		}
		if out.Changed != (out.Decision != nil) {
			h.t.Fatalf("step %d: Decision must be set exactly when Changed", i)
		}
		if out.Ours && s.want != TapChosen && !slices.ContainsFunc(out.Events, func(e Event) bool { return e.Type == EventRejected }) {
			h.t.Fatalf("step %d: a rejected tap must report a rejected event: %+v", i, out.Events)
		}
		edits, changed = out.Edits, out.Changed
	case "typed":
		out, err := h.svc.Typed(ctx, h.cfg, TypedInput{Where: where})
		if err != nil {
			h.t.Fatalf("step %d: Typed: %v", i, err)
		}
		edits, changed = out.Edits, out.Changed
	case "advance":
		h.clk.Advance(s.d)
		checkChanged = false
	case "reopen":
		h.reopen()
		checkChanged = false
	case "expire":
		res, err := h.svc.Expire(ctx, h.clk.Now())
		if err != nil {
			h.t.Fatalf("step %d: Expire: %v", i, err)
		}
		for _, c := range res.Changes {
			edits = append(edits, c.Edits...)
		}
		changed = len(res.Changes) > 0
	default:
		h.t.Fatalf("unknown step %q", s.do)
	}
	if checkChanged && changed != s.changed {
		h.t.Fatalf("step %d (%s): changed = %v, want %v", i, s.do, changed, s.changed)
	}
	if got := h.editedReplies(edits); !slices.Equal(got, s.edits) {
		h.t.Fatalf("step %d (%s): edited replies %v, want %v", i, s.do, got, s.edits)
	}
	conv := where
	if s.do == "tap" || s.do == "shown" {
		rec, _, _ := h.svc.Store().Nonce(ctx, h.replies[s.reply].Nonce)
		conv = Where{ChatID: rec.Key.ChatID, ThreadID: rec.Key.ThreadID, UserID: rec.Key.UserID, Kind: KindGroup}
		if rec.Key.UserID == 0 {
			conv.Kind = KindDirect
		}
	}
	if s.conv != nil {
		conv = *s.conv
	}
	key := h.cfg.KeyOf(conv)
	if s.choice != "" {
		d, err := h.svc.Policy(ctx, key)
		if err != nil {
			h.t.Fatalf("step %d: Policy: %v", i, err)
		}
		if d.LastChoice != s.choice {
			h.t.Fatalf("step %d (%s): lastChoice %q, want %q", i, s.do, d.LastChoice, s.choice)
		}
	}
	if s.wantHistory >= 0 && s.do != "advance" && s.do != "reopen" {
		hist, err := h.svc.History(ctx, key, 100)
		if err != nil {
			h.t.Fatal(err)
		}
		if s.wantHistory > 0 && len(hist) != s.wantHistory {
			h.t.Fatalf("step %d (%s): %d history rows, want %d: %+v", i, s.do, len(hist), s.wantHistory, hist)
		}
	}
}

const day = 24 * time.Hour

func TestStateMachine(t *testing.T) {
	signed := BotConfig{BotID: "bot_1", Keys: [][]byte{testKey}}
	cases := []struct {
		name  string
		cfg   BotConfig
		steps []step
	}{
		{"continue", signed, []step{
			{do: "show", choice: ChoiceNone},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceContinue, wantHistory: 1},
		}},
		{"stop", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop, wantHistory: 1},
		}},
		{"double tap records once", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceContinue},
			{do: "tap", action: ActionContinue, want: TapAlreadyChosen, edits: []int{0}, choice: ChoiceContinue, wantHistory: 1},
			{do: "tap", action: ActionStop, want: TapAlreadyChosen, edits: []int{0}, choice: ChoiceContinue, wantHistory: 1},
		}},
		{"tap on the resolved (inert) keyboard", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}},
			{do: "tap", action: ActionNone, want: TapAlreadyChosen, edits: []int{0}, choice: ChoiceStop},
		}},
		{"inert data on a live keyboard is invalid", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionNone, want: TapInvalid, choice: ChoiceNone},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}},
		}},
		{"new reply supersedes the live keyboard; stale tap changes nothing", signed, []step{
			{do: "show"},
			{do: "show", edits: []int{0}},
			{do: "tap", reply: 0, action: ActionContinue, want: TapNotCurrent, edits: []int{0}, choice: ChoiceNone},
			{do: "tap", reply: 1, action: ActionStop, want: TapChosen, changed: true, edits: []int{1}, choice: ChoiceStop},
		}},
		{"a choice survives the next reply until that one is answered", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}},
			{do: "show", choice: ChoiceContinue},
			{do: "tap", reply: 1, action: ActionStop, want: TapChosen, changed: true, edits: []int{1}, choice: ChoiceStop, wantHistory: 2},
		}},
		{"typed message supersedes the pending choice", signed, []step{
			{do: "show"},
			{do: "typed", changed: true, edits: []int{0}, choice: ChoiceSuperseded, wantHistory: 1},
			{do: "tap", reply: 0, action: ActionContinue, want: TapNotCurrent, edits: []int{0}, choice: ChoiceSuperseded},
			{do: "typed", choice: ChoiceSuperseded, wantHistory: 1},
		}},
		{"typed after stop reopens the conversation", signed, []step{
			{do: "show"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop},
			{do: "typed", changed: true, choice: ChoiceSuperseded, wantHistory: 2},
			{do: "tap", action: ActionContinue, want: TapAlreadyChosen, edits: []int{0}, choice: ChoiceSuperseded},
		}},
		{"typed with nothing pending writes nothing", signed, []step{
			{do: "typed", choice: ChoiceNone},
		}},
		{"forged nonce", signed, []step{
			{do: "show"},
			{do: "tap", data: mustEncode(signed, ActionContinue, "zzzzzzzzzzzzzzzzzzzz"), want: TapExpired, choice: ChoiceNone},
		}},
		{"malformed data", signed, []step{
			{do: "show"},
			{do: "tap", data: "rec1:q:abcdefghjk", want: TapInvalid, choice: ChoiceNone},
			{do: "tap", data: "rec7:c:abcdefghjk", want: TapInvalid},
			{do: "tap", data: "rec1:c:" + strings.Repeat("a", 70), want: TapInvalid},
		}},
		{"callback of another plugin passes through", signed, []step{
			{do: "show"},
			{do: "tap", data: "menu:settings", notOurs: true, choice: ChoiceNone},
		}},
		{"bad signature", signed, []step{
			{do: "show"},
			{do: "tap", data: "rec1:c:NONCE:AAAAAAAAAAAAAAAA", want: TapInvalid, choice: ChoiceNone},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}},
		}},
		{"unsigned data when signing is on", signed, []step{
			{do: "show"},
			{do: "tap", data: "rec1:c:NONCE", want: TapInvalid, choice: ChoiceNone},
		}},
		{"unsigned bot", BotConfig{BotID: "bot_1"}, []step{
			{do: "show"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop},
		}},
		{"data replayed in another chat", signed, []step{
			{do: "show"},
			{do: "tap", chat: 101, action: ActionContinue, want: TapInvalid, choice: ChoiceNone},
		}},
		{"other user in a group", signed, []step{
			{do: "show", where: group},
			{do: "tap", user: 8, action: ActionStop, want: TapNotForYou, choice: ChoiceNone},
			{do: "tap", user: 8, admin: true, action: ActionStop, want: TapNotForYou, choice: ChoiceNone},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceContinue},
		}},
		{"admins may choose when configured", BotConfig{BotID: "bot_1", AdminsMayChoose: true}, []step{
			{do: "show", where: group},
			{do: "tap", user: 8, action: ActionStop, want: TapNotForYou},
			{do: "tap", user: 9, admin: true, action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop},
		}},
		{"group message by anyone supersedes the chat-wide keyboard", signed, []step{
			{do: "show", where: group},
			{do: "typed", where: groupBob, changed: true, edits: []int{0}, choice: ChoiceSuperseded},
		}},
		{"per-user keys keep group members apart", BotConfig{BotID: "bot_1", PerUserInGroups: true}, []step{
			{do: "show", where: group},
			{do: "show", where: groupBob},
			{do: "typed", where: groupBob, changed: true, edits: []int{1}, choice: ChoiceSuperseded},
			{do: "tap", reply: 0, action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop},
			{do: "tap", reply: 0, user: 8, action: ActionStop, want: TapNotForYou},
		}},
		{"tap after expiry", signed, []step{
			{do: "show"},
			{do: "advance", d: day + time.Second},
			{do: "tap", action: ActionContinue, want: TapExpired, changed: true, edits: []int{0}, choice: ChoiceExpired, wantHistory: 1},
			{do: "tap", action: ActionStop, want: TapExpired, edits: []int{0}, choice: ChoiceExpired, wantHistory: 1},
		}},
		{"tap just before expiry counts", signed, []step{
			{do: "show"},
			{do: "advance", d: day - time.Millisecond},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceContinue},
		}},
		{"sweeper removes expired keyboards", signed, []step{
			{do: "show"},
			{do: "expire", choice: ChoiceNone},
			{do: "advance", d: day},
			{do: "expire", changed: true, edits: []int{0}, choice: ChoiceExpired, wantHistory: 1},
			{do: "expire", choice: ChoiceExpired},
			{do: "tap", action: ActionContinue, want: TapExpired, edits: []int{0}},
		}},
		{"choices expire", BotConfig{BotID: "bot_1", ChoiceTTL: time.Hour}, []step{
			{do: "show"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}},
			{do: "advance", d: time.Hour, choice: ChoiceExpired},
			{do: "expire", changed: true, choice: ChoiceExpired, wantHistory: 2},
		}},
		{"typed after a choice expired writes nothing", BotConfig{BotID: "bot_1", ChoiceTTL: time.Hour}, []step{
			{do: "show"},
			{do: "tap", action: ActionContinue, want: TapChosen, changed: true, edits: []int{0}},
			{do: "advance", d: 2 * time.Hour},
			{do: "expire", changed: true},
			{do: "typed", choice: ChoiceExpired},
		}},
		{"restart between show and tap", signed, []step{
			{do: "show"},
			{do: "reopen"},
			{do: "tap", action: ActionStop, want: TapChosen, changed: true, edits: []int{0}, choice: ChoiceStop},
			{do: "reopen"},
			{do: "tap", action: ActionStop, want: TapAlreadyChosen, edits: []int{0}, choice: ChoiceStop},
		}},
		{"tap before ReplyShown (race or crash) still counts", signed, []step{
			{do: "show"},
			{do: "prepare"},
			{do: "reopen"},
			{do: "tap", reply: 1, action: ActionContinue, want: TapChosen, changed: true, edits: []int{0, 1}, choice: ChoiceContinue},
			{do: "shown", reply: 1, choice: ChoiceContinue},
			{do: "tap", reply: 0, action: ActionContinue, want: TapNotCurrent, edits: []int{0}},
		}},
		{"ReplyShown twice is idempotent", signed, []step{
			{do: "show"},
			{do: "shown", reply: 0},
		}},
		{"older reply confirmed after a newer one", signed, []step{
			{do: "prepare"},
			{do: "advance", d: time.Millisecond},
			{do: "prepare"},
			{do: "shown", reply: 1, changed: true},
			{do: "shown", reply: 0, changed: true, edits: []int{0}},
			{do: "tap", reply: 0, action: ActionStop, want: TapNotCurrent, edits: []int{0}, choice: ChoiceNone},
			{do: "tap", reply: 1, action: ActionStop, want: TapChosen, changed: true, edits: []int{1}, choice: ChoiceStop},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			storetest.EachDSN(t, func(t *testing.T, dsn string) {
				h := newHarness(t, dsn, c.cfg)
				for i, s := range c.steps {
					if s.data != "" && len(h.replies) > 0 {
						s.data = strings.ReplaceAll(s.data, "NONCE", h.replies[len(h.replies)-1].Nonce)
					}
					h.run(i, s)
				}
			})
		})
	}
}

func mustEncode(cfg BotConfig, a Action, nonce string) string {
	d, err := cfg.Codec().Encode(a, nonce)
	if err != nil {
		panic(err)
	}
	return d
}

// The decision pushed after a tap is the policy a runtime then reads.
func TestTapOutcomeCarriesPolicy(t *testing.T) {
	storetest.EachDSN(t, func(t *testing.T, dsn string) {
		h := newHarness(t, dsn, BotConfig{BotID: "bot_1", Resolve: ResolveDisable})
		i := h.prepare(Where{ChatID: 100, Kind: KindDirect, UserID: 100})
		h.shown(i)
		out, err := h.svc.Tap(ctx, h.cfg, TapInput{ChatID: 100, MessageID: h.msgs[i], UserID: 100, LanguageCode: "zh-hant", Data: h.data(i, ActionStop)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Decision == nil || !out.Decision.Closed || out.Decision.FollowUpAllowed || out.Decision.ReplyID != "msg_r0" || out.Decision.MessageID != h.msgs[i] {
			t.Fatalf("decision %+v", out.Decision)
		}
		if out.Toast != TextsFor(LocaleZhTW).ToastStop {
			t.Fatalf("toast %q, want the zh-TW stop toast", out.Toast)
		}
		if len(out.Edits) != 1 || len(out.Edits[0].Buttons) != 2 || !strings.HasPrefix(out.Edits[0].Buttons[1].Text, "✓ ") ||
			strings.HasPrefix(out.Edits[0].Buttons[0].Text, "✓ ") {
			t.Fatalf("disable-mode edit %+v", out.Edits)
		}
		for _, b := range out.Edits[0].Buttons {
			if cb, v := h.cfg.Codec().Decode(b.Data); v != OK || cb.Action != ActionNone {
				t.Fatalf("resolved button data %q must be inert", b.Data)
			}
		}
		p, err := h.svc.Policy(ctx, out.Key)
		if err != nil {
			t.Fatal(err)
		}
		if p != *out.Decision {
			t.Fatalf("policy %+v differs from pushed decision %+v", p, *out.Decision)
		}
		if len(out.Events) != 1 || out.Events[0].Type != EventChosen || out.Events[0].Choice != ChoiceStop {
			t.Fatalf("events %+v", out.Events)
		}
	})
}

func TestResolveModes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		for _, mode := range []ResolveMode{"", ResolveMark, ResolveRemove} {
			svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
			cfg := BotConfig{BotID: "bot_1", Resolve: mode}
			w := Where{ChatID: int64(len(mode)) + 1, Kind: KindDirect, UserID: 5}
			p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: w, LanguageCode: "zh-cn"})
			if err != nil {
				t.Fatal(err)
			}
			if p.Buttons[0].Text != "A. 继续" {
				t.Fatalf("zh-CN label %q", p.Buttons[0].Text)
			}
			if _, err := svc.ReplyShown(ctx, p.Nonce, 10); err != nil {
				t.Fatal(err)
			}
			out, err := svc.Tap(ctx, cfg, TapInput{ChatID: w.ChatID, MessageID: 10, UserID: 5, Data: p.Buttons[0].Data})
			if err != nil || out.Result != TapChosen || len(out.Edits) != 1 {
				t.Fatalf("mode %q: %+v %v", mode, out, err)
			}
			b := out.Edits[0].Buttons
			if mode == ResolveRemove {
				if b != nil {
					t.Fatalf("remove mode kept buttons %+v", b)
				}
				continue
			}
			if len(b) != 1 || b[0].Text != TextsFor(LocaleZhCN).ResolvedContinue {
				t.Fatalf("mode %q: resolved keyboard %+v (labels come from the reply's locale)", mode, b)
			}
		}
	})
}

func TestPrepareDecidesAttachment(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		cfg := BotConfig{BotID: "bot_1", Scope: ScopeDM}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: group})
		if err != nil || p.Attach || p.Reason != ReasonOutOfScope || p.Nonce != "" {
			t.Fatalf("group under dm scope: %+v %v", p, err)
		}
		p, err = svc.Prepare(ctx, cfg, PrepareInput{Where: dm, NoControls: true})
		if err != nil || p.Attach || p.Reason != ReasonReplyOptOut {
			t.Fatalf("per-reply opt-out: %+v %v", p, err)
		}
		dmKey := cfg.KeyOf(dm)
		if err := svc.SetChatControls(ctx, dmKey, false); err != nil {
			t.Fatal(err)
		}
		p, err = svc.Prepare(ctx, cfg, PrepareInput{Where: dm})
		if err != nil || p.Attach || p.Reason != ReasonChatOff {
			t.Fatalf("chat opted out: %+v %v", p, err)
		}
		// The opt-out covers every thread of the chat.
		if ok, reason, err := svc.ShouldAttach(ctx, cfg, Where{ChatID: dm.ChatID, ThreadID: 9, Kind: KindDirect}); err != nil || ok || reason != ReasonChatOff {
			t.Fatalf("thread of an opted-out chat: %v %s %v", ok, reason, err)
		}
		if err := svc.SetChatControls(ctx, dmKey, true); err != nil {
			t.Fatal(err)
		}
		if p, err = svc.Prepare(ctx, cfg, PrepareInput{Where: dm}); err != nil || !p.Attach {
			t.Fatalf("chat opted back in: %+v %v", p, err)
		}
		// A chat locale beats the user's language code.
		if err := svc.SetChatLocale(ctx, dmKey, LocaleZhTW); err != nil {
			t.Fatal(err)
		}
		if p, err = svc.Prepare(ctx, cfg, PrepareInput{Where: dm, LanguageCode: "en"}); err != nil || p.Locale != LocaleZhTW || p.Buttons[1].Text != "B. 就這樣吧，不需要額外處理" {
			t.Fatalf("chat locale: %+v %v", p, err)
		}
		if err := svc.SetChatLocale(ctx, dmKey, "fr"); protocol.AsError(err) == nil || protocol.AsError(err).FieldErrors["locale"] == "" {
			t.Fatalf("unsupported locale accepted: %v", err)
		}
		// Bad input: structured errors, nothing written.
		if _, err := svc.Prepare(ctx, BotConfig{BotID: "bad id"}, PrepareInput{Where: dm}); protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Fatalf("bad bot id: %v", err)
		}
		if _, err := svc.Prepare(ctx, cfg, PrepareInput{Where: Where{Kind: KindDirect}}); protocol.AsError(err).FieldErrors["chatId"] == "" {
			t.Fatalf("missing chat id: %v", err)
		}
		if _, err := svc.ReplyShown(ctx, "nosuchnonce1", 5); protocol.CodeOf(err) != "replyctl_nonce_not_found" {
			t.Fatalf("unknown nonce: %v", err)
		}
		if _, err := svc.ReplyShown(ctx, p.Nonce, 0); protocol.AsError(err).FieldErrors["messageId"] == "" {
			t.Fatalf("zero message id: %v", err)
		}
	})
}

func TestSeenUpdate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewFake(t0)
		svc := New(NewDBStore(db), Options{Clock: clk})
		steps := []struct {
			bot  string
			id   int64
			dup  bool
			wait time.Duration
		}{
			{"bot_1", 42, false, 0},
			{"bot_1", 42, true, 0},
			{"bot_2", 42, false, 0},
			{"bot_1", 43, false, 0},
			{"bot_1", 42, true, time.Hour},
			// After the retention the id is forgotten (Telegram stopped redelivering long ago).
			{"bot_1", 42, false, 49 * time.Hour},
		}
		for i, s := range steps {
			clk.Advance(s.wait)
			if s.wait > 48*time.Hour {
				if _, err := svc.Expire(ctx, clk.Now()); err != nil {
					t.Fatal(err)
				}
			}
			dup, err := svc.SeenUpdate(ctx, s.bot, s.id)
			if err != nil {
				t.Fatal(err)
			}
			if dup != s.dup {
				t.Fatalf("step %d: SeenUpdate(%s, %d) = %v, want %v", i, s.bot, s.id, dup, s.dup)
			}
		}
		if _, err := svc.SeenUpdate(ctx, "", 1); protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Fatalf("empty bot id: %v", err)
		}
	})
}

func TestPolicyLookup(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewFake(t0)
		svc := New(NewDBStore(db), Options{Clock: clk})
		cfg := BotConfig{BotID: "bot_1"}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: group, ReplyID: "msg_1"})
		if err != nil {
			t.Fatal(err)
		}
		svc.ReplyShown(ctx, p.Nonce, 77)
		if _, err := svc.Tap(ctx, cfg, TapInput{ChatID: group.ChatID, MessageID: 77, UserID: group.UserID, Data: p.Buttons[0].Data}); err != nil {
			t.Fatal(err)
		}
		// The runtime passes userId although the bot keys groups per chat: falls back.
		k, err := KeyFromParams("bot_1", "-500", "3", "", "7")
		if err != nil {
			t.Fatal(err)
		}
		d, err := svc.Policy(ctx, k)
		if err != nil || d.LastChoice != ChoiceContinue || d.Conversation != "bot_1:-500:t3" {
			t.Fatalf("fallback policy %+v %v", d, err)
		}
		// Path form.
		pk, err := ParseKey(d.Conversation)
		if err != nil {
			t.Fatal(err)
		}
		if d2, _ := svc.Policy(ctx, pk); d2 != d {
			t.Fatalf("path-form policy %+v != %+v", d2, d)
		}
		// Another thread of the same chat is its own conversation.
		d3, err := svc.Policy(ctx, Key{BotID: "bot_1", ChatID: -500, ThreadID: 4})
		if err != nil || d3.LastChoice != ChoiceNone || d3.Conversation != "bot_1:-500:t4" {
			t.Fatalf("other thread %+v %v", d3, err)
		}
		if _, err := svc.Policy(ctx, Key{BotID: "bot_1"}); protocol.AsError(err).FieldErrors["chatId"] == "" {
			t.Fatalf("invalid key: %v", err)
		}
		hist, err := svc.History(ctx, pk, 10)
		if err != nil || len(hist) != 1 || hist[0].Choice != ChoiceContinue || hist[0].Source != SourceButton || hist[0].UserID != 7 || hist[0].ReplyID != "msg_1" {
			t.Fatalf("history %+v %v", hist, err)
		}
	})
}

// Concurrent taps on one reply (several users, several nodes' writers)
// record exactly one choice.
func TestConcurrentTapsRecordOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		cfg := BotConfig{BotID: "bot_1", Keys: [][]byte{testKey}}
		w := Where{ChatID: -9, Kind: KindGroup}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: w})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ReplyShown(ctx, p.Nonce, 3); err != nil {
			t.Fatal(err)
		}
		const n = 24
		results := make([]TapOutcome, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				out, err := svc.Tap(ctx, cfg, TapInput{ChatID: -9, MessageID: 3, UserID: int64(i + 1), Data: p.Buttons[i%2].Data})
				if err != nil {
					t.Error(err)
				}
				results[i] = out
			}(i)
		}
		wg.Wait()
		chosen := 0
		for _, r := range results {
			switch r.Result {
			case TapChosen:
				chosen++
			case TapAlreadyChosen:
			default:
				t.Errorf("unexpected result %q", r.Result)
			}
		}
		if chosen != 1 {
			t.Fatalf("%d taps recorded a choice, want exactly 1", chosen)
		}
		hist, _ := svc.History(ctx, cfg.KeyOf(w), 100)
		if len(hist) != 1 {
			t.Fatalf("%d history rows, want 1", len(hist))
		}
	})
}

func TestExpirePrunesNonces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewFake(t0)
		svc := New(NewDBStore(db), Options{Clock: clk, NonceRetention: time.Hour})
		cfg := BotConfig{BotID: "bot_1", NonceTTL: time.Hour}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: dm})
		if err != nil {
			t.Fatal(err)
		}
		svc.ReplyShown(ctx, p.Nonce, 4)
		clk.Advance(90 * time.Minute)
		res, err := svc.Expire(ctx, clk.Now())
		if err != nil || len(res.Changes) != 1 || res.Changes[0].Decision.LastChoice != ChoiceExpired || res.Pruned.Nonces != 0 {
			t.Fatalf("first sweep %+v %v", res, err)
		}
		ev := res.Changes[0].Events
		if len(ev) != 1 || ev[0].Type != EventExpired || ev[0].Reason != "keyboard" {
			t.Fatalf("events %+v", ev)
		}
		clk.Advance(time.Hour)
		res, err = svc.Expire(ctx, clk.Now())
		if err != nil || len(res.Changes) != 0 || res.Pruned.Nonces != 1 {
			t.Fatalf("second sweep %+v %v", res, err)
		}
		// A tap on a pruned nonce is still answered, as expired.
		out, err := svc.Tap(ctx, cfg, TapInput{ChatID: dm.ChatID, MessageID: 4, UserID: dm.UserID, Data: p.Buttons[0].Data})
		if err != nil || out.Result != TapExpired || out.Changed {
			t.Fatalf("tap on pruned nonce %+v %v", out, err)
		}
	})
}

func TestSweepLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewFake(t0)
		svc := New(NewDBStore(db), Options{Clock: clk, SweepLimit: 2})
		cfg := BotConfig{BotID: "bot_1"}
		for i := int64(1); i <= 3; i++ {
			p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: Where{ChatID: i, Kind: KindDirect}})
			if err != nil {
				t.Fatal(err)
			}
			svc.ReplyShown(ctx, p.Nonce, 10)
		}
		clk.Advance(2 * day)
		total := 0
		for round := 0; ; round++ {
			res, err := svc.Expire(ctx, clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			total += len(res.Changes)
			if !res.More {
				break
			}
			if round > 3 {
				t.Fatal("sweep does not finish")
			}
		}
		if total != 3 {
			t.Fatalf("%d conversations expired, want 3", total)
		}
	})
}

func TestStoreErrorsAreWrapped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		db.Close()
		_, err := svc.Prepare(ctx, BotConfig{BotID: "bot_1"}, PrepareInput{Where: dm})
		if err == nil {
			t.Fatal("Prepare on a closed store succeeded")
		}
		if errors.As(err, new(*protocol.Error)) {
			t.Fatalf("a store failure must not look like bad input: %v", err)
		}
	})
}

func TestRetryableErrors(t *testing.T) {
	for msg, want := range map[string]bool{
		"replyctl: lock conversation: ERROR: deadlock detected (SQLSTATE 40P01)":                      true,
		"ERROR: could not serialize access due to concurrent update (SQLSTATE 40001)":                 true,
		"replyctl: write conversation: ERROR: duplicate key value violates unique constraint (23505)": false,
		"store: closed": false,
	} {
		if got := retryable(errors.New(msg)); got != want {
			t.Errorf("retryable(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestTapAdminCheckFailureIsAnswered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		cfg := BotConfig{BotID: "bot_1", AdminsMayChoose: true}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: group})
		if err != nil {
			t.Fatal(err)
		}
		svc.ReplyShown(ctx, p.Nonce, 5)
		out, err := svc.Tap(ctx, cfg, TapInput{ChatID: group.ChatID, MessageID: 5, UserID: 8, Data: p.Buttons[0].Data,
			IsAdmin: func(context.Context) (bool, error) { return true, errors.New("telegram: 502") }})
		if err != nil || out.Result != TapNotForYou || out.Changed || out.Toast == "" {
			t.Fatalf("%+v %v", out, err)
		}
		if len(out.Events) != 1 || out.Events[0].Reason != RejectAdminCheckFailed {
			t.Fatalf("events %+v", out.Events)
		}
	})
}

// Toasts follow the chat's locale setting, found through the nonce's
// conversation even when the transport did not pass the business connection.
func TestTapToastLocale(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		svc := New(NewDBStore(db), Options{Clock: clock.NewFake(t0)})
		cfg := BotConfig{BotID: "bot_1"}
		w := Where{ChatID: 55, Kind: KindDirect, UserID: 55, BusinessConnectionID: "bc_1"}
		if err := svc.SetChatLocale(ctx, cfg.KeyOf(w), LocaleZhCN); err != nil {
			t.Fatal(err)
		}
		p, err := svc.Prepare(ctx, cfg, PrepareInput{Where: w, LanguageCode: "en"})
		if err != nil {
			t.Fatal(err)
		}
		svc.ReplyShown(ctx, p.Nonce, 5)
		out, err := svc.Tap(ctx, cfg, TapInput{ChatID: 55, MessageID: 5, UserID: 55, LanguageCode: "en", Data: p.Buttons[0].Data})
		if err != nil || out.Toast != TextsFor(LocaleZhCN).ToastContinue || out.Locale != LocaleZhCN {
			t.Fatalf("%+v %v", out, err)
		}
		out, err = svc.Tap(ctx, cfg, TapInput{ChatID: 55, UserID: 55, LanguageCode: "zh-tw", Data: "rec1:c:bad"})
		if err != nil || out.Result != TapInvalid || out.Toast != TextsFor(LocaleZhTW).ToastInvalid {
			t.Fatalf("invalid tap: %+v %v", out, err)
		}
	})
}
