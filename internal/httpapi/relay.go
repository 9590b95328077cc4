package httpapi

import (
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/relay"
)

// RuntimeAcceptedRequest is the Claworld HTTP fallback of the accepted frame.
type RuntimeAcceptedRequest struct {
	FromAgentID string `json:"fromAgentId,omitempty"`
	SessionKey  string `json:"sessionKey,omitempty"`
	Source      string `json:"source,omitempty"`
}

// RuntimeReplyRequest is the Claworld HTTP fallback of the reply frame.
type RuntimeReplyRequest struct {
	FromAgentID string `json:"fromAgentId,omitempty"`
	Payload     struct {
		Text   string `json:"text"`
		Source string `json:"source,omitempty"`
	} `json:"payload"`
}

// RuntimeKeptSilentRequest is the Claworld HTTP fallback of the kept_silent frame.
type RuntimeKeptSilentRequest struct {
	FromAgentID string `json:"fromAgentId,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Source      string `json:"source,omitempty"`
}

// OrchestrationMessageRequest sends a turn outside a live delivery.
type OrchestrationMessageRequest struct {
	FromAgentID     string `json:"fromAgentId,omitempty"`
	TargetAgentID   string `json:"targetAgentId"`
	ClientMessageID string `json:"clientMessageId"`
	Payload         struct {
		Text string `json:"text"`
	} `json:"payload"`
	Conversation struct {
		ConversationKey string `json:"conversationKey,omitempty"`
		WorldID         string `json:"worldId,omitempty"`
	} `json:"conversation"`
}

// ReportRequest files an owner report.
type ReportRequest struct {
	FromAgentID string `json:"fromAgentId,omitempty"`
	Source      string `json:"source"`
	ReportText  string `json:"reportText"`
	Announce    *bool  `json:"announce,omitempty"`
}

// MountRelay registers the relay's routes once the relay exists (it is
// built after the API, like the social layer).
func (s *Server) MountRelay(r *relay.Service) {
	if s.Relay != nil || r == nil {
		return
	}
	s.Relay = r
	s.registerRelay()
}

func (s *Server) registerRelay() {
	s.router.Handle(Op{Method: "POST", Path: "/v1/runtime-deliveries/{deliveryId}/accepted", Summary: "The runtime took a relay delivery (Claworld HTTP fallback of the accepted frame)",
		Tag: "relay", Request: RuntimeAcceptedRequest{}, Response: map[string]string{}}, s.runtimeAccepted)
	s.router.Handle(Op{Method: "POST", Path: "/v1/runtime-deliveries/{deliveryId}/reply", Summary: "Answer a relay delivery (Claworld HTTP fallback); 409 delivery_not_replyable when already answered",
		Tag: "relay", Request: RuntimeReplyRequest{}, Response: relay.Answer{}}, s.runtimeReply)
	s.router.Handle(Op{Method: "POST", Path: "/v1/runtime-deliveries/{deliveryId}/kept-silent", Summary: "Keep silent on a relay delivery (Claworld HTTP fallback; NO_REPLY)",
		Tag: "relay", Request: RuntimeKeptSilentRequest{}, Response: relay.Answer{}}, s.runtimeKeptSilent)
	s.router.Handle(Op{Method: "POST", Path: "/v1/orchestration/messages", Summary: "Send a turn into a live conversation outside a delivery; idempotent per clientMessageId",
		Tag: "relay", Request: OrchestrationMessageRequest{}, Response: relay.MessageResult{}}, s.orchestrationMessage)
	s.router.Handle(Op{Method: "POST", Path: "/v1/reports", Summary: "File an owner report: delivered to your main session marked announce or ANNOUNCE_SKIP; idempotent per source",
		Tag: "relay", Request: ReportRequest{}, Response: relay.Report{}}, s.fileReport)
	s.router.Handle(Op{Method: "GET", Path: "/v1/conversations/{key}/transcript", Summary: "The transcript of a conversation (participants and the admin)",
		Tag: "relay", Response: relay.Transcript{}, Query: []Param{{Name: "chatRequestId", Description: "only this chat of the conversation"}}}, s.transcript)
}

func (s *Server) runtimeAccepted(w http.ResponseWriter, r *http.Request) error {
	var req RuntimeAcceptedRequest
	if err := decodeOptionalLoose(r, &req); err != nil {
		return err
	}
	agentID, err := PrincipalFrom(r).Self(req.FromAgentID, "fromAgentId")
	if err != nil {
		return err
	}
	id := r.PathValue("deliveryId")
	if err := s.Relay.Accepted(r.Context(), agentID, id); err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]string{"acceptedDeliveryId": id})
}

func (s *Server) runtimeReply(w http.ResponseWriter, r *http.Request) error {
	var req RuntimeReplyRequest
	if err := DecodeLoose(r, &req); err != nil {
		return err
	}
	agentID, err := PrincipalFrom(r).Self(req.FromAgentID, "fromAgentId")
	if err != nil {
		return err
	}
	id := r.PathValue("deliveryId")
	ans, err := s.Relay.Reply(r.Context(), agentID, id, req.Payload.Text, req.Payload.Source)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"repliedDeliveryId": id, "turnId": ans.TurnID, "relayed": ans.Relayed, "chatStatus": ans.ChatStatus, "status": ans.Status, "note": ans.Note})
}

func (s *Server) runtimeKeptSilent(w http.ResponseWriter, r *http.Request) error {
	var req RuntimeKeptSilentRequest
	if err := decodeOptionalLoose(r, &req); err != nil {
		return err
	}
	agentID, err := PrincipalFrom(r).Self(req.FromAgentID, "fromAgentId")
	if err != nil {
		return err
	}
	reason := req.Reason
	if reason == "" {
		reason = "kept_silent"
	}
	id := r.PathValue("deliveryId")
	ans, err := s.Relay.KeptSilent(r.Context(), agentID, id, reason, req.Source)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"keptSilentDeliveryId": id, "chatStatus": ans.ChatStatus, "status": ans.Status})
}

func (s *Server) orchestrationMessage(w http.ResponseWriter, r *http.Request) error {
	var req OrchestrationMessageRequest
	if err := DecodeLoose(r, &req); err != nil {
		return err
	}
	agentID, err := PrincipalFrom(r).Self(req.FromAgentID, "fromAgentId")
	if err != nil {
		return err
	}
	res, err := s.Relay.SendMessage(r.Context(), agentID, req.TargetAgentID, req.ClientMessageID, req.Payload.Text, req.Conversation.ConversationKey, req.Conversation.WorldID)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

func (s *Server) fileReport(w http.ResponseWriter, r *http.Request) error {
	var req ReportRequest
	if err := DecodeLoose(r, &req); err != nil {
		return err
	}
	agentID, err := PrincipalFrom(r).Self(req.FromAgentID, "fromAgentId")
	if err != nil {
		return err
	}
	announce := true
	if req.Announce != nil {
		announce = *req.Announce
	}
	rep, err := s.Relay.FileReport(r.Context(), agentID, req.Source, req.ReportText, announce)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if rep.AlreadyFiled {
		status = http.StatusOK
	}
	return WriteJSON(w, status, rep)
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r)
	t, err := s.Relay.Transcript(r.Context(), p.AgentID(), p.Admin, r.PathValue("key"), r.URL.Query().Get("chatRequestId"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, t)
}
