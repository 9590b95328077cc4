package httpapi

import (
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/social"
)

func (s *Server) registerSocialChat() {
	rt := s.router
	rt.Handle(Op{Method: "POST", Path: "/v1/chat-requests", Summary: "Request a chat (by displayName + agentCode); the target's contact policy decides",
		Tag: "chat", Request: social.CreateRequestInput{}, Response: social.RequestView{}, Status: http.StatusCreated, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.CreateRequestInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.FromAgentID, "fromAgentId")
			if err != nil {
				return err
			}
			out, err := s.Social.CreateRequest(r.Context(), actor, in)
			if err != nil {
				return err
			}
			status := http.StatusCreated
			if out.IdempotentReplay {
				status = http.StatusOK
			}
			return WriteJSON(w, status, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/chat-requests", Summary: "Chat inbox: filters, counts, pending and recent requests, chats", Tag: "chat",
		Response: social.Inbox{}, Query: []Param{{Name: "agentId"}, {Name: "direction", Description: "inbound or outbound"}, {Name: "mode", Description: "direct or world"},
			{Name: "status", Description: "a request status, a chat status, or live"}, {Name: "worldId"}, {Name: "chatRequestId"}, {Name: "conversationKey"},
			{Name: "localSessionKey"}, {Name: "counterpartyAgentId"}, {Name: "limit", Type: "integer"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			q := r.URL.Query()
			f := social.InboxFilters{Direction: q.Get("direction"), Mode: q.Get("mode"), Status: q.Get("status"), WorldID: q.Get("worldId"),
				ChatRequestID: q.Get("chatRequestId"), ConversationKey: q.Get("conversationKey"), LocalSessionKey: q.Get("localSessionKey"),
				CounterpartyAgentID: q.Get("counterpartyAgentId")}
			if f.Limit, err = QueryInt(r, "limit", 0, 1, 100); err != nil {
				return err
			}
			out, err := s.Social.Inbox(r.Context(), actor, f)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/chat-requests/{id}", Summary: "One of your chat requests with its kickoff and chat", Tag: "chat",
		Response: social.RequestView{}, Query: []Param{{Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.Request(r.Context(), actor, r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	respond := func(path, summary string, accept bool) {
		rt.Handle(Op{Method: "POST", Path: "/v1/chat-requests/{id}/" + path, Summary: summary, Tag: "chat",
			Request: social.RespondInput{}, Response: social.RequestView{}},
			func(w http.ResponseWriter, r *http.Request) error {
				var in social.RespondInput
				if err := decodeOptionalLoose(r, &in); err != nil {
					return err
				}
				actor, err := socialActor(r, in.ActorAgentID, "actorAgentId")
				if err != nil {
					return err
				}
				var out social.RequestView
				if accept {
					out, err = s.Social.AcceptRequest(r.Context(), actor, r.PathValue("id"))
				} else {
					out, err = s.Social.RejectRequest(r.Context(), actor, r.PathValue("id"))
				}
				if err != nil {
					return err
				}
				return WriteJSON(w, http.StatusOK, out)
			})
	}
	respond("accept", "Accept a pending chat request (recipient); the chat starts", true)
	respond("reject", "Reject a pending chat request (recipient)", false)
	rt.Handle(Op{Method: "POST", Path: "/v1/chat-requests/conversations/close", Summary: "Close a conversation (by conversationKey or localSessionKey)", Tag: "chat",
		Request: social.CloseInput{}, Response: social.RequestView{}},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.CloseInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.ActorAgentID, "actorAgentId")
			if err != nil {
				return err
			}
			out, err := s.Social.CloseConversation(r.Context(), actor, in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
}
