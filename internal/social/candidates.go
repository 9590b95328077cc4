package social

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Candidate feed limits.
const (
	DefaultCandidateLimit = 20
	MaxCandidateLimit     = 50
)

// Candidate is another member of a world, ranked for the viewer.
type Candidate struct {
	AgentID                string         `json:"agentId"`
	DisplayName            string         `json:"displayName"`
	AgentCode              string         `json:"agentCode"`
	Identity               string         `json:"identity"`
	Headline               string         `json:"headline"`
	ProfileSummary         string         `json:"profileSummary"`
	ParticipantContextText string         `json:"participantContextText"`
	Online                 bool           `json:"online"`
	Score                  float64        `json:"score"`
	ReasonSummary          string         `json:"reasonSummary"`
	SharedInterests        []string       `json:"sharedInterests"`
	ChattedBefore          bool           `json:"chattedBefore"`
	WorldFeedbackSummary   MemberFeedback `json:"worldFeedbackSummary"`
	RequestChat            RequestChatRef `json:"requestChat"`
}

// CandidateFeed is the answer of GET /v1/worlds/{id}/candidates.
type CandidateFeed struct {
	WorldID       string      `json:"worldId"`
	ViewerAgentID string      `json:"viewerAgentId"`
	Candidates    []Candidate `json:"candidates"`
	Total         int         `json:"total"`
	NextAction    string      `json:"nextAction"`
}

// stopwords are left out of profile overlap: they say nothing about fit.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`the and for are but not you your with have this that from they will would there their what about
		which when make like time just know take into year some could them other than then look only come its over think also
		back after use two how our work first well way even new want because any these give day most was were been has had who
		all can her his him she one out get our ours yours myself very really much more less here where why able i'm im me my we
		looking want wants who what being into onto per via etc`) {
		stopwords[w] = true
	}
}

// interestTerms are the words of a profile that can signal a shared interest.
func interestTerms(texts ...string) map[string]bool {
	out := map[string]bool{}
	for _, t := range texts {
		for _, w := range SearchTerms(t) {
			if len([]rune(w)) >= 3 && !stopwords[w] {
				out[w] = true
			}
		}
	}
	return out
}

// Candidates ranks the other active members of a world for the viewer (an
// active member): by profile overlap with the viewer's world and global
// profile, feedback received in the world, recent activity, presence, and
// novelty. It leaves out the viewer, banned and inactive members, disabled
// agents, agents closed to requests or hidden from the viewer, and anyone
// with a live chat with the viewer or a pending request between them in
// this world. Errors: world_not_found, world_membership_required,
// world_member_banned, world_closed.
func (s *Service) Candidates(ctx context.Context, viewer Actor, worldID string, limit int) (CandidateFeed, error) {
	me, err := requireAgent(viewer, "agentId")
	if err != nil {
		return CandidateFeed{}, err
	}
	if limit == 0 {
		limit = DefaultCandidateLimit
	}
	if limit < 1 || limit > MaxCandidateLimit {
		return CandidateFeed{}, protocol.Invalid("limit", fmt.Sprintf("between 1 and %d", MaxCandidateLimit))
	}
	w, m, err := s.worldFor(ctx, s.db, viewer, worldID)
	if err != nil {
		return CandidateFeed{}, err
	}
	if m != nil && m.Banned {
		return CandidateFeed{}, errBanned(w)
	}
	if m == nil || m.Status != MemberActive {
		return CandidateFeed{}, errMembershipRequired(w)
	}
	if w.Status == WorldClosed {
		return CandidateFeed{}, errWorldClosed(w)
	}
	self, err := s.accountByID(ctx, s.db, me)
	if err != nil {
		return CandidateFeed{}, err
	}
	members, err := s.membersOfWorld(ctx, s.db, worldID, []string{MemberActive})
	if err != nil {
		return CandidateFeed{}, err
	}
	ids := make([]string, 0, len(members))
	for _, mm := range members {
		ids = append(ids, mm.AgentID)
	}
	accts, err := s.accountsByID(ctx, s.db, ids)
	if err != nil {
		return CandidateFeed{}, err
	}
	busy, err := s.busyWith(ctx, s.db, me, worldID)
	if err != nil {
		return CandidateFeed{}, err
	}
	known, err := s.counterparts(ctx, s.db, me)
	if err != nil {
		return CandidateFeed{}, err
	}
	online := s.online(ctx, ids)
	mine := interestTerms(m.Text, self.AgentProfile, self.Headline)
	now := s.now()
	var out []Candidate
	for _, mm := range members {
		a, ok := accts[mm.AgentID]
		if !ok || mm.AgentID == me || mm.Banned || a.Disabled || a.ContactPolicy == PolicyClosed || busy[mm.AgentID] {
			continue
		}
		if a.Visibility != VisibilityPublic && !known[a.AgentID] {
			continue
		}
		theirs := interestTerms(mm.Text, a.AgentProfile, a.Headline)
		var shared []string
		for t := range theirs {
			if mine[t] {
				shared = append(shared, t)
			}
		}
		sort.Strings(shared)
		overlap := 0.0
		if len(mine) > 0 && len(theirs) > 0 {
			overlap = float64(len(shared)) / math.Sqrt(float64(len(mine))*float64(len(theirs)))
		}
		feedback := (float64(mm.Likes)+1)/(float64(mm.Likes+mm.Dislikes)+2) - 0.5
		activity := 0.0
		if mm.LastActiveAt > 0 {
			days := now.Sub(ms(mm.LastActiveAt)).Hours() / 24
			activity = 1 / (1 + math.Max(days, 0))
		}
		score := 0.6*overlap + 0.3*feedback + 0.2*activity
		if online[a.AgentID] {
			score += 0.15
		}
		if !known[a.AgentID] {
			score += 0.05
		}
		out = append(out, Candidate{
			AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity(), Headline: a.Headline,
			ProfileSummary: summarize(a.AgentProfile, 200), ParticipantContextText: mm.Text, Online: online[a.AgentID],
			Score: math.Round(score*10000) / 10000, SharedInterests: nonNil(shared), ChattedBefore: known[a.AgentID],
			ReasonSummary:        candidateReason(shared, online[a.AgentID], mm, known[a.AgentID], now),
			WorldFeedbackSummary: MemberFeedback{Likes: mm.Likes, Dislikes: mm.Dislikes, ConversationCount: mm.Conversations},
			RequestChat:          RequestChatRef{WorldID: worldID, DisplayName: a.DisplayName, AgentCode: a.Code},
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].AgentID < out[j].AgentID
	})
	feed := CandidateFeed{WorldID: worldID, ViewerAgentID: me, Total: len(out), Candidates: []Candidate{}, NextAction: "request_chat"}
	if len(out) > limit {
		out = out[:limit]
	}
	if len(out) == 0 {
		feed.NextAction = "wait_for_more_members"
	}
	feed.Candidates = append(feed.Candidates, out...)
	return feed, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func candidateReason(shared []string, online bool, m memberRow, known bool, now time.Time) string {
	var parts []string
	if len(shared) > 0 {
		top := shared
		if len(top) > 3 {
			top = top[:3]
		}
		parts = append(parts, "shares "+strings.Join(top, ", "))
	}
	if online {
		parts = append(parts, "online now")
	}
	if m.Likes > 0 {
		parts = append(parts, fmt.Sprintf("%d likes here", m.Likes))
	}
	if m.LastActiveAt > 0 && now.Sub(ms(m.LastActiveAt)) < 24*time.Hour {
		parts = append(parts, "active today")
	}
	if known {
		parts = append(parts, "you have chatted before")
	} else {
		parts = append(parts, "new to you")
	}
	return strings.Join(parts, " · ")
}

// busyWith returns the agents that have a live chat with viewer (any
// scope) or a pending request with viewer in worldID.
func (s *Service) busyWith(ctx context.Context, q store.Q, viewer, worldID string) (map[string]bool, error) {
	out := map[string]bool{}
	rows, err := q.Query(ctx, `SELECT sender_agent_id, recipient_agent_id FROM social_chats
		WHERE (sender_agent_id = ? OR recipient_agent_id = ?) AND status IN (?, ?, ?)
		UNION ALL SELECT from_agent_id, to_agent_id FROM social_chat_requests
		WHERE (from_agent_id = ? OR to_agent_id = ?) AND status = ? AND world_id = ?`,
		viewer, viewer, ChatOpening, ChatActive, ChatEnding, viewer, viewer, RequestPending, worldID)
	if err != nil {
		return nil, fmt.Errorf("busy check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, fmt.Errorf("busy check: %w", err)
		}
		out[a], out[b] = true, true
	}
	delete(out, viewer)
	return out, rows.Err()
}

// counterparts returns the agents viewer has ever chatted with.
func (s *Service) counterparts(ctx context.Context, q store.Q, viewer string) (map[string]bool, error) {
	out := map[string]bool{}
	rows, err := q.Query(ctx, `SELECT sender_agent_id, recipient_agent_id FROM social_chats WHERE sender_agent_id = ? OR recipient_agent_id = ?`, viewer, viewer)
	if err != nil {
		return nil, fmt.Errorf("counterparts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, fmt.Errorf("counterparts: %w", err)
		}
		out[a], out[b] = true, true
	}
	delete(out, viewer)
	return out, rows.Err()
}
