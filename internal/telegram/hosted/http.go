package hosted

import (
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
)

// Removed is the answer to DELETE /v1/replyctl/bots/{bot}.
type Removed struct {
	ID      string `json:"id"`
	Removed bool   `json:"removed"`
}

// Register mounts the host's routes: bot management (admin), replies and
// policies (the bound agent or the admin), and the public webhook.
func (h *Host) Register(rt *httpapi.Router) {
	const tag = "telegram"
	rt.Handle(httpapi.Op{Method: "POST", Path: "/v1/replyctl/bots", Tag: tag, Auth: httpapi.AuthAdmin, Status: http.StatusCreated,
		Summary: "Host a Telegram bot: verify the token (getMe), bind it to a runtime agent, start receiving by webhook or polling",
		Request: AddBotParams{}, Response: Bot{}}, h.httpAdd)
	rt.Handle(httpapi.Op{Method: "GET", Path: "/v1/replyctl/bots", Tag: tag, Response: BotList{},
		Summary: "List hosted bots (the admin sees all, optionally ?agent=; an agent sees the bots bound to it)",
		Query:   []httpapi.Param{{Name: "agent", Description: "only bots bound to this agent (admin)"}}}, h.httpList)
	rt.Handle(httpapi.Op{Method: "GET", Path: "/v1/replyctl/bots/{bot}", Tag: tag, Response: Bot{},
		Summary: "One hosted bot (the admin or its bound agent)"}, h.httpGet)
	rt.Handle(httpapi.Op{Method: "DELETE", Path: "/v1/replyctl/bots/{bot}", Tag: tag, Auth: httpapi.AuthAdmin, Response: Removed{},
		Summary: "Stop hosting a bot (its webhook is deleted at Telegram; conversation state is kept)"}, h.httpRemove)
	rt.Handle(httpapi.Op{Method: "POST", Path: "/v1/replyctl/bots/{bot}/replies", Tag: tag, Request: ReplyParams{}, Response: ReplyResult{},
		Summary: "Send a reply in a chat with Continue / Stop on its last chunk (bound agent or admin); resolves the conversation's previous keyboard",
		MaxBody: 2 * MaxReplyBytes}, h.httpReply)
	rt.Handle(httpapi.Op{Method: "GET", Path: "/v1/replyctl/bots/{bot}/policy", Tag: tag, Response: replyctl.Decision{},
		Summary: "The reply-end decision of a conversation: lastChoice, source, at, followUpAllowed, proactiveAllowed, closed, hint",
		Query: []httpapi.Param{
			{Name: "chatId", Type: "integer", Description: "required"},
			{Name: "threadId", Type: "integer", Description: "forum topic (default 0)"},
			{Name: "businessConnectionId", Description: "business connection (default none)"},
			{Name: "userId", Type: "integer", Description: "the user, for bots with per-user conversations in groups"},
		}}, h.httpPolicy)
	rt.Handle(httpapi.Op{Method: "GET", Path: "/v1/replyctl/conversations/{key}/policy", Tag: tag, Response: replyctl.Decision{},
		Summary: "The reply-end decision of a conversation by its key (conversationKey of telegram.message, conversation of replyctl.choice)"}, h.httpPolicyByKey)
	rt.Handle(httpapi.Op{Method: "POST", Path: "/v1/telegram/webhook/{bot}", Tag: tag, Auth: httpapi.AuthPublic, Raw: true,
		Summary: "Telegram's webhook for a hosted bot; X-Telegram-Bot-Api-Secret-Token must match (401 otherwise)"}, h.httpWebhook)
}

// authorize loads bot id for a caller that must be the admin or the agent
// the bot is bound to; other agents get E001.
func (h *Host) authorize(r *http.Request, id string) (*bot, error) {
	b, err := h.bot(r.Context(), id)
	if err != nil {
		return nil, err
	}
	p := httpapi.PrincipalFrom(r)
	if p.Admin || p.AgentID() == b.rec.AgentID {
		return b, nil
	}
	return nil, &protocol.Error{Class: protocol.ClassPermission, Code: "not_your_bot",
		Message:    "bot " + id + " is bound to another agent; only that agent and the admin may use it",
		NextAction: "use a bot bound to your agent (GET /v1/replyctl/bots lists them)"}
}

func (h *Host) httpAdd(w http.ResponseWriter, r *http.Request) error {
	var p AddBotParams
	if err := httpapi.Decode(r, &p); err != nil {
		return err
	}
	b, err := h.AddBot(r.Context(), p)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusCreated, b)
}

func (h *Host) httpList(w http.ResponseWriter, r *http.Request) error {
	p := httpapi.PrincipalFrom(r)
	agentID := r.URL.Query().Get("agent")
	if !p.Admin {
		if agentID != "" && agentID != p.AgentID() {
			return p.ActAs(agentID, "agent")
		}
		agentID = p.AgentID()
	}
	bots, err := h.Bots(r.Context(), agentID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, BotList{Bots: bots})
}

func (h *Host) httpGet(w http.ResponseWriter, r *http.Request) error {
	b, err := h.authorize(r, r.PathValue("bot"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, h.view(b.rec))
}

func (h *Host) httpRemove(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("bot")
	if err := h.RemoveBot(r.Context(), id); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, Removed{ID: id, Removed: true})
}

func (h *Host) httpReply(w http.ResponseWriter, r *http.Request) error {
	b, err := h.authorize(r, r.PathValue("bot"))
	if err != nil {
		return err
	}
	var p ReplyParams
	if err := httpapi.Decode(r, &p); err != nil {
		return err
	}
	res, err := h.reply(r.Context(), b, p)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Host) httpPolicy(w http.ResponseWriter, r *http.Request) error {
	b, err := h.authorize(r, r.PathValue("bot"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	key, err := replyctl.KeyFromParams(b.rec.ID, q.Get("chatId"), q.Get("threadId"), q.Get("businessConnectionId"), q.Get("userId"))
	if err != nil {
		return err
	}
	d, err := h.Policy(r.Context(), key)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Host) httpPolicyByKey(w http.ResponseWriter, r *http.Request) error {
	key, err := replyctl.ParseKey(r.PathValue("key"))
	if err != nil {
		return err
	}
	if _, err := h.authorize(r, key.BotID); err != nil {
		return err
	}
	d, err := h.Policy(r.Context(), key)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

// httpWebhook hands Telegram's POST to the bot's webhook handler, which
// checks the secret header in constant time before reading the body. An
// unknown bot gets 404 (nothing to authenticate against).
func (h *Host) httpWebhook(w http.ResponseWriter, r *http.Request) error {
	b, err := h.bot(r.Context(), r.PathValue("bot"))
	if err != nil {
		if protocol.CodeOf(err) == "bot_not_found" {
			http.Error(w, "not found", http.StatusNotFound)
			return nil
		}
		return err
	}
	b.hook.ServeHTTP(w, r)
	return nil
}
