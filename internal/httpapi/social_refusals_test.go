package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// socialFixture is a hub with agents, worlds and requests in every state
// the refusal tests need.
type socialFixture struct {
	h                                 *apptest.Hub
	alice, bob, carol, dave, mal, pat client.Account
	ac, bc, cc, dc, mc, pc, ec        *client.Client
	world, closed, inviteOnly         client.World
	pending, active                   client.ChatRequest
}

func newSocialFixture(t *testing.T, h *apptest.Hub) *socialFixture {
	t.Helper()
	ctx := context.Background()
	f := &socialFixture{h: h}
	f.alice, f.ac = ready(t, h, "Alice", "human of alice", "alice likes trails")
	f.bob, f.bc = ready(t, h, "Bob", "human of bob", "bob likes trails")
	f.carol, f.cc = ready(t, h, "Carol", "human of carol", "carol likes coffee")
	f.dave, f.dc = ready(t, h, "Dave", "human of dave", "dave likes maps")
	f.mal, f.mc = ready(t, h, "Mal", "human of mal", "mal likes trouble")
	f.pat, f.pc = ready(t, h, "Pat", "human of pat", "pat likes privacy")
	_, f.ec = onboard(t, h, "Eve") // never fills a profile: not ready
	setPolicy(t, f.bc, social.PolicyApproval)
	setPolicy(t, f.cc, social.PolicyClosed)
	if _, err := f.pc.UpdateAccount(ctx, client.AccountUpdate{Action: "update_chat_policy", VisibilityMode: ptr("private")}); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, mods ...func(*client.WorldInput)) client.World {
		in := client.WorldInput{DisplayName: ptr(name), WorldContextText: ptr("rules of " + name), ParticipantContextText: ptr("owner")}
		for _, m := range mods {
			m(&in)
		}
		w, err := f.ac.CreateWorld(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	f.world = mk("Trails")
	f.closed = mk("Old Trails")
	f.inviteOnly = mk("Secret Trails", func(in *client.WorldInput) { in.JoinPolicy = ptr("invite_only") })
	for _, c := range []*client.Client{f.bc, f.dc, f.mc} {
		for _, w := range []client.World{f.world, f.closed} {
			if _, err := c.JoinWorld(ctx, w.WorldID, client.JoinInput{ParticipantContextText: "I run"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.ac.UpdateWorld(ctx, f.closed.WorldID, client.WorldInput{Action: "close"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ac.BanMember(ctx, f.world.WorldID, client.MemberTarget{Identity: f.mal.Identity, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.pending, err = f.dc.RequestChat(ctx, brief(f.bob, "")); err != nil || f.pending.Status != social.RequestPending {
		t.Fatalf("pending %+v %v", f.pending, err)
	}
	if f.active, err = f.ac.RequestChat(ctx, brief(f.dave, "")); err != nil || f.active.Status != social.RequestAccepted {
		t.Fatalf("active %+v %v", f.active, err)
	}
	return f
}

type refusal struct {
	name, method, path string
	token              *client.Client
	body               string
	status             int
	code, class        string
}

func runRefusals(t *testing.T, h *apptest.Hub, cases []refusal) {
	t.Helper()
	for _, tt := range cases {
		before := socialState(t, h)
		tok := ""
		if tt.token != nil {
			tok = tt.token.Token
		}
		r := call(t, tt.method, h.URL+tt.path, tok, "application/json", []byte(tt.body))
		if r.status != tt.status || r.body["error"] != tt.code {
			t.Errorf("%s: got %d %v, want %d %s\n%s", tt.name, r.status, r.body["error"], tt.status, tt.code, r.raw)
			continue
		}
		if tt.class != "" && r.body["class"] != tt.class {
			t.Errorf("%s: class %v, want %s", tt.name, r.body["class"], tt.class)
		}
		if msg, _ := r.body["message"].(string); msg == "" {
			t.Errorf("%s: no message: %s", tt.name, r.raw)
		}
		if after := socialState(t, h); after != before {
			t.Errorf("%s: the refused call changed state:\nbefore %s\nafter  %s", tt.name, before, after)
		}
	}
}

func j(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Every validation error and refusal of the social layer answers with the
// structured error and changes nothing.
func TestSocialRefusals(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		f := newSocialFixture(t, h)
		unknown := "ZZZZZZ"
		for _, a := range []client.Account{f.alice, f.bob, f.carol, f.dave, f.mal, f.pat} {
			if a.AgentCode == unknown {
				unknown = "YYYYYY"
			}
		}
		req := func(target client.Account, world string) map[string]any {
			return map[string]any{"displayName": target.DisplayName, "agentCode": target.AgentCode, "openingMessage": "say hi", "worldId": world}
		}
		W, C, I := f.world.WorldID, f.closed.WorldID, f.inviteOnly.WorldID
		cases := []refusal{
			// identity rules at onboarding and rename
			{"name required", "POST", "/v1/onboarding/activate", nil, `{"displayName":"  "}`, 400, "display_name_required", "E003"},
			{"name too long", "POST", "/v1/onboarding/activate", nil, j(map[string]string{"displayName": strings.Repeat("n", 41)}), 400, "display_name_too_long", "E003"},
			{"name reserved #", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Al#ice"}`, 400, "display_name_reserved_character", "E003"},
			{"name tab", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Al\tice"}`, 400, "display_name_invalid_whitespace", "E003"},
			{"name control", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Al\u0007ice"}`, 400, "display_name_invalid_character", "E003"},
			{"rename reserved #", "POST", "/v1/account", f.ac, `{"action":"update_identity","displayName":"A#B"}`, 400, "display_name_reserved_character", "E003"},
			{"rename missing", "POST", "/v1/account", f.ac, `{"action":"update_identity"}`, 400, "display_name_required", "E003"},
			// account fields
			{"bad policy", "POST", "/v1/account", f.ac, `{"action":"update_chat_policy","contactPolicy":"sometimes"}`, 400, "invalid_contact_policy", "E003"},
			{"bad visibility", "POST", "/v1/account", f.ac, `{"action":"update_chat_policy","visibilityMode":"hidden"}`, 400, "invalid_visibility_mode", "E003"},
			{"bad action", "POST", "/v1/account", f.ac, `{"action":"explode"}`, 400, "invalid_action", "E003"},
			{"profile too long", "POST", "/v1/account", f.ac, j(map[string]string{"action": "update_profile", "humanProfile": strings.Repeat("x", 2001)}), 400, "validation_failed", "E003"},
			{"email verify by agent", "POST", "/v1/account", f.ac, `{"action":"mark_email_verified"}`, 403, "admin_required", "E001"},
			{"other agent's account", "POST", "/v1/account", f.ac, j(map[string]string{"agentId": f.bob.AgentID, "action": "update_profile", "humanProfile": "x"}), 403, "not_your_agent", "E001"},
			// identity resolution
			{"lookup unknown code", "GET", "/v1/public-profiles/lookup?identity=Alice%23" + unknown, f.bc, "", 404, "agent_not_found", "E002"},
			{"lookup malformed code", "GET", "/v1/public-profiles/lookup?identity=Alice%2312", f.bc, "", 400, "invalid_agent_code", "E003"},
			{"lookup private", "GET", "/v1/public-profiles/lookup?identity=" + strings.Replace(f.pat.Identity, "#", "%23", 1), f.bc, "", 404, "agent_not_found", "E002"},
			{"profile private", "GET", "/v1/public-profiles/" + f.pat.AgentID, f.bc, "", 404, "agent_not_found", "E002"},
			// chat requests
			{"unknown code", "POST", "/v1/chat-requests", f.ac, j(map[string]any{"displayName": "X", "agentCode": unknown, "openingMessage": "hi"}), 404, "agent_not_found", "E002"},
			{"malformed code", "POST", "/v1/chat-requests", f.ac, `{"displayName":"X","agentCode":"bad","openingMessage":"hi"}`, 400, "invalid_agent_code", "E003"},
			{"no code", "POST", "/v1/chat-requests", f.ac, `{"displayName":"Bob","openingMessage":"hi"}`, 400, "agent_code_required", "E003"},
			{"no brief", "POST", "/v1/chat-requests", f.ac, j(map[string]any{"displayName": "Bob", "agentCode": f.bob.AgentCode, "openingMessage": "  "}), 400, "opening_message_required", "E003"},
			{"brief too long", "POST", "/v1/chat-requests", f.ac, j(map[string]any{"displayName": "Bob", "agentCode": f.bob.AgentCode, "openingMessage": strings.Repeat("b", 4001)}), 400, "opening_message_too_long", "E003"},
			{"closed policy", "POST", "/v1/chat-requests", f.ac, j(req(f.carol, "")), 403, "contact_policy_closed", "E001"},
			{"duplicate active", "POST", "/v1/chat-requests", f.ac, j(req(f.dave, "")), 409, "conversation_already_active", "E003"},
			{"duplicate active reversed", "POST", "/v1/chat-requests", f.dc, j(req(f.alice, "")), 409, "conversation_already_active", "E003"},
			{"duplicate pending", "POST", "/v1/chat-requests", f.dc, j(req(f.bob, "")), 409, "request_already_pending", "E003"},
			{"pending the other way", "POST", "/v1/chat-requests", f.bc, j(req(f.dave, "")), 409, "request_already_pending", "E003"},
			{"to self", "POST", "/v1/chat-requests", f.ac, j(req(f.alice, "")), 409, "cannot_request_self", "E003"},
			{"to private stranger", "POST", "/v1/chat-requests", f.ac, j(req(f.pat, "")), 404, "agent_not_found", "E002"},
			{"sender not ready", "POST", "/v1/chat-requests", f.ec, j(req(f.alice, "")), 409, "account_profile_incomplete", "E003"},
			{"as another agent", "POST", "/v1/chat-requests", f.ac, j(map[string]any{"fromAgentId": f.bob.AgentID, "displayName": "Dave", "agentCode": f.dave.AgentCode, "openingMessage": "hi"}), 403, "not_your_agent", "E001"},
			{"closed world request", "POST", "/v1/chat-requests", f.bc, j(req(f.dave, C)), 409, "world_closed", "E003"},
			{"banned sender", "POST", "/v1/chat-requests", f.mc, j(req(f.bob, W)), 403, "world_member_banned", "E001"},
			{"banned target", "POST", "/v1/chat-requests", f.bc, j(req(f.mal, W)), 409, "target_not_world_member", "E003"},
			{"target not member", "POST", "/v1/chat-requests", f.bc, j(req(f.carol, W)), 409, "target_not_world_member", "E003"},
			{"sender not member", "POST", "/v1/chat-requests", f.cc, j(req(f.bob, W)), 403, "world_membership_required", "E001"},
			{"unknown world", "POST", "/v1/chat-requests", f.bc, j(req(f.dave, "wld_nope")), 404, "world_not_found", "E002"},
			// worlds
			{"join closed world", "POST", "/v1/worlds/" + C + "/join", f.cc, `{"participantContextText":"hi"}`, 409, "world_closed", "E003"},
			{"join banned", "POST", "/v1/worlds/" + W + "/join", f.mc, `{"participantContextText":"let me in"}`, 403, "world_member_banned", "E001"},
			{"join invite-only", "POST", "/v1/worlds/" + I + "/join", f.dc, `{"participantContextText":"hi"}`, 403, "world_invite_required", "E001"},
			{"join without text", "POST", "/v1/worlds/" + W + "/join", f.cc, `{"participantContextText":"   "}`, 400, "participant_context_required", "E003"},
			{"join text too long", "POST", "/v1/worlds/" + W + "/join", f.cc, j(map[string]string{"participantContextText": strings.Repeat("p", 2001)}), 400, "participant_context_too_long", "E003"},
			{"join not ready", "POST", "/v1/worlds/" + W + "/join", f.ec, `{"participantContextText":"hi"}`, 409, "account_profile_incomplete", "E003"},
			{"join as another", "POST", "/v1/worlds/" + W + "/join", f.cc, j(map[string]string{"agentId": f.pat.AgentID, "participantContextText": "hi"}), 403, "not_your_agent", "E001"},
			{"create world no name", "POST", "/v1/worlds", f.bc, `{"worldContextText":"rules"}`, 400, "validation_failed", "E003"},
			{"create world bad enum", "POST", "/v1/worlds", f.bc, `{"displayName":"X","worldContextText":"r","joinPolicy":"maybe"}`, 400, "validation_failed", "E003"},
			{"create world not ready", "POST", "/v1/worlds", f.ec, `{"displayName":"X","worldContextText":"r"}`, 409, "account_profile_incomplete", "E003"},
			{"update by member", "PATCH", "/v1/moderation/worlds/" + W, f.bc, `{"displayName":"Mine now"}`, 403, "world_owner_required", "E001"},
			{"resume closed", "PATCH", "/v1/moderation/worlds/" + C, f.ac, `{"action":"resume"}`, 409, "world_closed", "E003"},
			{"bad world action", "PATCH", "/v1/moderation/worlds/" + W, f.ac, `{"action":"explode"}`, 400, "invalid_action", "E003"},
			{"ban by member", "POST", "/v1/moderation/worlds/" + W + "/members/ban", f.dc, j(map[string]string{"identity": f.bob.Identity}), 403, "world_moderator_required", "E001"},
			{"remove owner", "POST", "/v1/moderation/worlds/" + W + "/members/remove", f.ac, j(map[string]string{"agentId": f.alice.AgentID}), 409, "cannot_remove_owner", "E003"},
			{"invite banned", "POST", "/v1/moderation/worlds/" + W + "/invitations", f.ac, j(map[string]string{"identity": f.mal.Identity}), 409, "world_member_banned", "E003"},
			{"invite active", "POST", "/v1/moderation/worlds/" + W + "/invitations", f.ac, j(map[string]string{"identity": f.bob.Identity}), 409, "already_world_member", "E003"},
			{"invite private stranger", "POST", "/v1/moderation/worlds/" + W + "/invitations", f.ac, j(map[string]string{"identity": f.pat.Identity}), 404, "agent_not_found", "E002"},
			{"revoke no invitation", "POST", "/v1/moderation/worlds/" + W + "/invitations/revoke", f.ac, j(map[string]string{"identity": f.bob.Identity}), 404, "invitation_not_found", "E002"},
			{"owner leaves", "POST", "/v1/worlds/" + W + "/membership/leave", f.ac, "", 409, "world_owner_cannot_leave", "E003"},
			{"candidates not member", "GET", "/v1/worlds/" + W + "/candidates", f.cc, "", 403, "world_membership_required", "E001"},
			{"candidates banned", "GET", "/v1/worlds/" + W + "/candidates", f.mc, "", 403, "world_member_banned", "E001"},
			{"broadcast disabled", "POST", "/v1/worlds/" + W + "/broadcast", f.ac, `{"openingMessage":"hello all"}`, 403, "broadcast_disabled", "E001"},
			{"broadcast by member", "POST", "/v1/worlds/" + W + "/broadcast", f.bc, `{"openingMessage":"hello all"}`, 403, "world_moderator_required", "E001"},
			{"membership update none", "PATCH", "/v1/worlds/" + W + "/membership", f.bc, `{}`, 400, "nothing_to_update", "E003"},
			// answering requests
			{"accept own request", "POST", "/v1/chat-requests/" + f.pending.ChatRequestID + "/accept", f.dc, "", 403, "not_request_recipient", "E001"},
			{"accept stranger's", "POST", "/v1/chat-requests/" + f.pending.ChatRequestID + "/accept", f.ac, "", 404, "chat_request_not_found", "E002"},
			{"accept as another", "POST", "/v1/chat-requests/" + f.pending.ChatRequestID + "/accept", f.dc, j(map[string]string{"actorAgentId": f.bob.AgentID}), 403, "not_your_agent", "E001"},
			{"reject accepted", "POST", "/v1/chat-requests/" + f.active.ChatRequestID + "/reject", f.dc, "", 409, "chat_request_not_pending", "E003"},
			{"unknown request", "POST", "/v1/chat-requests/req_nope/accept", f.bc, "", 404, "chat_request_not_found", "E002"},
			{"close nothing named", "POST", "/v1/chat-requests/conversations/close", f.ac, `{}`, 400, "conversation_required", "E003"},
			{"close stranger's", "POST", "/v1/chat-requests/conversations/close", f.bc, j(map[string]string{"conversationKey": f.active.Conversation.ConversationKey}), 404, "conversation_not_found", "E002"},
			{"close other's session key", "POST", "/v1/chat-requests/conversations/close", f.bc, j(map[string]string{"localSessionKey": f.active.Conversation.SessionKey}), 404, "conversation_not_found", "E002"},
			// listing and search parameters
			{"inbox direction", "GET", "/v1/chat-requests?direction=sideways", f.ac, "", 400, "invalid_direction", "E003"},
			{"inbox status", "GET", "/v1/chat-requests?status=weird", f.ac, "", 400, "invalid_status", "E003"},
			{"inbox other agent", "GET", "/v1/chat-requests?agentId=" + f.bob.AgentID, f.ac, "", 403, "not_your_agent", "E001"},
			{"search scope", "POST", "/v1/search", f.ac, `{"scope":"galaxy"}`, 400, "invalid_scope", "E003"},
			{"search sort", "POST", "/v1/search", f.ac, `{"sort":"random"}`, 400, "invalid_sort", "E003"},
			{"search page", "POST", "/v1/search", f.ac, `{"page":500,"limit":50}`, 400, "invalid_page", "E003"},
		}
		runRefusals(t, h, cases)
	})
}

// Onboarding modes: invite codes are required, checked, counted and
// revocable; closed onboarding refuses everyone; nothing is created by a
// refused activation.
func TestSocialOnboardingModes(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		inv, err := h.Admin.CreateInvite(ctx, client.InviteInput{Uses: 1, Note: "for Zoe"})
		if err != nil || !strings.HasPrefix(inv.Code, "INV-") || inv.Status != "active" {
			t.Fatalf("invite %+v %v", inv, err)
		}
		revoked, _ := h.Admin.CreateInvite(ctx, client.InviteInput{})
		if _, err := h.Admin.RevokeInvite(ctx, revoked.InviteID); err != nil {
			t.Fatal(err)
		}
		_, agentClient := h.NewAgent("Someone")
		runRefusals(t, h, []refusal{
			{"no invite", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Zoe"}`, 400, "invite_code_required", "E003"},
			{"unknown invite", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Zoe","inviteCode":"INV-AAAA-BBBB-CCCC"}`, 403, "invite_code_invalid", "E001"},
			{"revoked invite", "POST", "/v1/onboarding/activate", nil, j(map[string]string{"displayName": "Zoe", "inviteCode": revoked.Code}), 403, "invite_code_invalid", "E001"},
			{"bad name with good invite", "POST", "/v1/onboarding/activate", nil, j(map[string]string{"displayName": "Z#oe", "inviteCode": inv.Code}), 400, "display_name_reserved_character", "E003"},
			{"invites need admin", "POST", "/v1/admin/invites", agentClient, `{}`, 403, "admin_required", "E001"},
			{"invite bad uses", "POST", "/v1/admin/invites", h.Admin, `{"uses":-1}`, 400, "validation_failed", "E003"},
		})
		// Codes are case- and dash-insensitive and single-use by default.
		act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: "Zoe", InviteCode: strings.ToLower(strings.ReplaceAll(inv.Code, "-", " "))})
		if err != nil || act.AppToken == "" {
			t.Fatalf("activate with invite: %+v %v", act, err)
		}
		runRefusals(t, h, []refusal{
			{"used invite", "POST", "/v1/onboarding/activate", nil, j(map[string]string{"displayName": "Zed", "inviteCode": inv.Code}), 403, "invite_code_invalid", "E001"},
		})
		list, err := h.Admin.Invites(ctx)
		if err != nil || len(list) != 2 || list[0].Code != "" {
			t.Fatalf("invites %+v %v", list, err)
		}
		for _, i := range list {
			want := map[string]string{inv.InviteID: "used_up", revoked.InviteID: "revoked"}[i.InviteID]
			if i.Status != want {
				t.Fatalf("invite %s status %s, want %s", i.InviteID, i.Status, want)
			}
		}
	}, func(c *app.Config) { c.Onboarding = "invite" })

	h := apptest.Start(t, "", func(c *app.Config) { c.Onboarding = "closed" })
	runRefusals(t, h, []refusal{
		{"closed onboarding", "POST", "/v1/onboarding/activate", nil, `{"displayName":"Zoe"}`, 403, "onboarding_closed", "E001"},
	})
	// Agents the admin creates still get an account on first use.
	a, c := h.NewAgent("Made By Admin")
	acct, err := c.Account(context.Background(), "")
	if err != nil || acct.AgentID != a.ID || len(acct.AgentCode) != 6 || acct.Identity != "Made By Admin#"+acct.AgentCode {
		t.Fatalf("lazy account %+v %v", acct, err)
	}
}

// A request not answered within 30 days expires: answering it then is
// chat_request_expired and creates no chat; the sweeper expires the rest and
// both parties hear about it.
func TestSocialRequestExpiry(t *testing.T) {
	fake := clock.NewFake(time.Now())
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		rec := &social.Recorder{}
		h.App.Social.SetNotifier(rec)
		alice, ac := ready(t, h, "Alice", "h", "a")
		bob, bc := ready(t, h, "Bob", "h", "b")
		carol, cc := ready(t, h, "Carol", "h", "c")
		setPolicy(t, bc, social.PolicyApproval)
		setPolicy(t, cc, social.PolicyApproval)
		r1, err := ac.RequestChat(ctx, brief(bob, ""))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ac.RequestChat(ctx, brief(carol, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := r1.ExpiresAt.Sub(r1.CreatedAt); got != social.DefaultRequestTTL {
			t.Fatalf("ttl %v", got)
		}
		fake.Advance(social.DefaultRequestTTL + time.Minute)
		rec.Reset()
		if _, err := bc.AcceptChatRequest(ctx, r1.ChatRequestID, ""); client.Code(err) != "chat_request_expired" || client.Status(err) != 410 {
			t.Fatalf("accept expired: %v", err)
		}
		got, _ := bc.ChatRequest(ctx, r1.ChatRequestID, "")
		if got.Status != social.RequestExpired || got.Chat != nil || got.NextAction != social.NextRequestExpired {
			t.Fatalf("after expired accept %+v", got)
		}
		if _, err := bc.AcceptChatRequest(ctx, r1.ChatRequestID, ""); client.Code(err) != "chat_request_expired" {
			t.Fatalf("accept again: %v", err)
		}
		n, err := h.App.Social.ExpireDue(ctx)
		if err != nil || n != 1 {
			t.Fatalf("sweeper expired %d %v", n, err)
		}
		got, _ = cc.ChatRequest(ctx, r2.ChatRequestID, "")
		if got.Status != social.RequestExpired {
			t.Fatalf("swept %+v", got)
		}
		for _, id := range []string{alice.AgentID, bob.AgentID, carol.AgentID} {
			if len(rec.For(id, social.EventRequestUpdated)) == 0 {
				t.Fatalf("%s not told about expiry", id)
			}
		}
		in, _ := ac.ChatInbox(ctx, client.InboxFilters{})
		if in.Counts.Global.Expired != 2 || in.Counts.Global.Pending != 0 {
			t.Fatalf("counts %+v", in.Counts.Global)
		}
	}, func(c *app.Config) { c.Clock = fake })
}
