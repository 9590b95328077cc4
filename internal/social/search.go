package social

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Search scopes.
const (
	ScopeWorlds  = "worlds"
	ScopeMembers = "world_members"
	ScopePeople  = "people"
	ScopeMixed   = "mixed"
)

// Search sorts.
const (
	SortRelevance = "relevance"
	SortLatest    = "latest"
	SortLikes     = "likes"
	SortActivity  = "activity"
)

// Search limits.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 50
	MaxSearchWindow    = 1000 // page × limit
	maxTerms           = 16
	maxTermLen         = 64
	maxQueryLen        = 500
)

// Hit kinds.
const (
	HitWorld  = "world"
	HitMember = "world_member"
	HitPerson = "person"
)

// SearchInput is the body of POST /v1/search.
type SearchInput struct {
	AgentID  string        `json:"agentId,omitempty"`
	Scope    string        `json:"scope,omitempty"`
	Query    string        `json:"query,omitempty"`
	Keywords []string      `json:"keywords,omitempty"`
	Topics   []string      `json:"topics,omitempty"`
	Sort     string        `json:"sort,omitempty"`
	Limit    int           `json:"limit,omitempty"`
	Page     int           `json:"page,omitempty"`
	WorldID  string        `json:"worldId,omitempty"`
	Filters  SearchFilters `json:"filters,omitzero"`
}

// SearchFilters narrow a search. Status applies to worlds (enabled,
// paused, closed, or all; default: not closed); Tags keeps worlds with any
// of them; WorldID restricts member hits to one world.
type SearchFilters struct {
	WorldID    string   `json:"worldId,omitempty"`
	Status     string   `json:"status,omitempty"`
	JoinPolicy string   `json:"joinPolicy,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Joined     bool     `json:"joined,omitempty"`
	Owned      bool     `json:"owned,omitempty"`
}

// SearchHit is one result. World hits carry the world's fields; member and
// person hits carry the agent's identity and how to request a chat.
type SearchHit struct {
	Kind                   string          `json:"kind"`
	Score                  float64         `json:"score"`
	ReasonSummary          string          `json:"reasonSummary"`
	DisplayName            string          `json:"displayName"`
	WorldID                string          `json:"worldId,omitempty"`
	WorldDisplayName       string          `json:"worldDisplayName,omitempty"`
	Summary                string          `json:"summary,omitempty"`
	Tags                   []string        `json:"tags,omitempty"`
	Status                 string          `json:"status,omitempty"`
	JoinPolicy             string          `json:"joinPolicy,omitempty"`
	Stats                  *WorldStats     `json:"stats,omitempty"`
	ViewerMembershipStatus string          `json:"viewerMembershipStatus,omitempty"`
	AgentID                string          `json:"agentId,omitempty"`
	AgentCode              string          `json:"agentCode,omitempty"`
	Identity               string          `json:"identity,omitempty"`
	Headline               string          `json:"headline,omitempty"`
	Online                 *bool           `json:"online,omitempty"`
	ProfileSummary         string          `json:"profileSummary,omitempty"`
	WorldFeedbackSummary   *MemberFeedback `json:"worldFeedbackSummary,omitempty"`
	AccountStats           *AccountStats   `json:"accountStats,omitempty"`
	RequestChat            *RequestChatRef `json:"requestChat,omitempty"`
	ExactIdentity          bool            `json:"exactIdentity,omitempty"`

	sortKey int64
	world   worldRow
}

// SearchResult is the answer of POST /v1/search.
type SearchResult struct {
	Scope   string      `json:"scope"`
	Query   string      `json:"query"`
	Terms   []string    `json:"terms"`
	Sort    string      `json:"sort"`
	Page    int         `json:"page"`
	Limit   int         `json:"limit"`
	HasMore bool        `json:"hasMore"`
	Results []SearchHit `json:"results"`
}

// searchPlan is a normalized search: terms and the full-text expression.
type searchPlan struct {
	terms  []string
	match  string // dialect-specific full-text query; "" without terms
	offset int
}

// SearchTerms extracts the search terms of a free query plus keywords and
// topics: runs of letters and digits, lower-cased, de-duplicated, at most
// 16. Only such terms reach the full-text engines, so no query syntax of
// either engine can be injected.
func SearchTerms(query string, extra ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if len([]rune(f)) < 2 && f < "\u0080" {
				continue
			}
			if r := []rune(f); len(r) > maxTermLen {
				f = string(r[:maxTermLen])
			}
			if !seen[f] && len(out) < maxTerms {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	add(query)
	for _, list := range extra {
		for _, s := range list {
			add(s)
		}
	}
	return out
}

// stem strips a common English inflection so that a prefix query on the
// stem finds the other forms ("trails" → "trail*", "hiking" → "hik*").
// Neither engine stems here (both index with a language-neutral tokenizer),
// so this keeps matching symmetric between SQLite and PostgreSQL.
func stem(t string) string {
	n := len([]rune(t))
	switch {
	case n >= 6 && strings.HasSuffix(t, "ing"):
		return t[:len(t)-3]
	case n >= 5 && (strings.HasSuffix(t, "ed") || strings.HasSuffix(t, "es")):
		return t[:len(t)-2]
	case n >= 4 && strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss"):
		return t[:len(t)-1]
	}
	return t
}

// matchExpr builds the full-text query: any term's stem, as a prefix.
func matchExpr(d store.Dialect, terms []string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		t = stem(t)
		if d == store.Postgres {
			parts[i] = t + ":*"
		} else {
			parts[i] = `"` + t + `"*`
		}
	}
	if d == store.Postgres {
		return strings.Join(parts, " | ")
	}
	return strings.Join(parts, " OR ")
}

func (s *Service) normalizeSearch(in *SearchInput) (searchPlan, error) {
	in.Scope = strings.ToLower(strings.TrimSpace(in.Scope))
	if in.Scope == "" {
		in.Scope = ScopeMixed
	}
	switch in.Scope {
	case ScopeWorlds, ScopeMembers, ScopePeople, ScopeMixed:
	case "members", "world_member":
		in.Scope = ScopeMembers
	case "person", "agents":
		in.Scope = ScopePeople
	default:
		return searchPlan{}, protocol.Invalid("scope", "one of worlds, world_members, people, mixed")
	}
	in.Sort = strings.ToLower(strings.TrimSpace(in.Sort))
	if in.Sort == "" {
		in.Sort = SortRelevance
	}
	switch in.Sort {
	case SortRelevance, SortLatest, SortLikes, SortActivity:
	default:
		return searchPlan{}, protocol.Invalid("sort", "one of relevance, latest, likes, activity")
	}
	if in.Limit <= 0 {
		in.Limit = DefaultSearchLimit
	}
	if in.Limit > MaxSearchLimit {
		in.Limit = MaxSearchLimit // tolerant: the contract caps limit at 50
	}
	if in.Page <= 0 {
		in.Page = 1
	}
	if in.Page*in.Limit > MaxSearchWindow {
		return searchPlan{}, protocol.Invalid("page", fmt.Sprintf("page × limit must stay within %d results; refine the query instead", MaxSearchWindow))
	}
	fe := protocol.FieldErrors{}
	checkText(fe, "query", in.Query, maxQueryLen, true)
	if len(in.Keywords) > 20 {
		fe.Add("keywords", "at most 20")
	}
	if len(in.Topics) > 20 {
		fe.Add("topics", "at most 20")
	}
	st := strings.ToLower(in.Filters.Status)
	if st != "" && st != "all" && st != WorldEnabled && st != WorldPaused && st != WorldClosed {
		fe.Add("filters.status", "one of enabled, paused, closed, all")
	}
	in.Filters.Status = st
	if jp := in.Filters.JoinPolicy; jp != "" && jp != JoinOpen && jp != JoinInviteOnly {
		fe.Add("filters.joinPolicy", "one of open, invite_only")
	}
	if in.Filters.WorldID == "" {
		in.Filters.WorldID = in.WorldID
	}
	in.Filters.Tags = normTags(fe, in.Filters.Tags)
	if err := fe.Err(); err != nil {
		return searchPlan{}, err
	}
	terms := SearchTerms(in.Query, in.Keywords, in.Topics)
	p := searchPlan{terms: terms, offset: (in.Page - 1) * in.Limit}
	if len(terms) > 0 {
		p.match = matchExpr(s.db.Dialect(), terms)
	}
	return p, nil
}

// ftsParts returns the dialect's full-text fragments for docs of kind
// joined on refExpr: the score expression (with its args), the join and the
// condition (with its args).
func (s *Service) ftsParts(kind, refExpr, match string) (score string, scoreArgs []any, join, cond string, condArgs []any) {
	if match == "" {
		return "0.0", nil, "", "", nil
	}
	join = ` JOIN social_search_docs d ON d.kind = '` + kind + `' AND d.ref = ` + refExpr
	if s.db.Dialect() == store.Postgres {
		return `ts_rank_cd(d.tsv, to_tsquery('simple', ?))`, []any{match}, join, ` AND d.tsv @@ to_tsquery('simple', ?)`, []any{match}
	}
	join += ` JOIN social_search_fts ON social_search_fts.rowid = d.id`
	return `-bm25(social_search_fts, 10.0, 1.0, 5.0)`, nil, join, ` AND social_search_fts MATCH ?`, []any{match}
}

// worldVisibleCond limits worlds (alias w) to those the viewer may see.
func worldVisibleCond(viewer Actor) (string, []any) {
	if viewer.AgentID == "" {
		return "1 = 1", nil
	}
	return `(w.visibility = 'public' OR w.owner_agent_id = ? OR EXISTS (SELECT 1 FROM social_memberships vm
		WHERE vm.world_id = w.id AND vm.agent_id = ? AND vm.status IN ('active', 'invited')))`, []any{viewer.AgentID, viewer.AgentID}
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

type worldHit struct {
	world worldRow
	score float64
	doc   string
}

func (s *Service) searchWorldsWindow(ctx context.Context, viewer Actor, in SearchInput, p searchPlan, offset, limit int) ([]worldHit, bool, error) {
	score, scoreArgs, join, cond, condArgs := s.ftsParts(docWorld, "w.id", p.match)
	docCols := ", ''"
	if p.match != "" {
		docCols = ", d.title || ' ' || d.body || ' ' || d.tags"
	}
	vis, visArgs := worldVisibleCond(viewer)
	where := vis + cond
	args := append(append(append([]any{}, scoreArgs...), visArgs...), condArgs...)
	switch in.Filters.Status {
	case "":
		where += ` AND w.status <> 'closed'`
	case "all":
	default:
		where += ` AND w.status = ?`
		args = append(args, in.Filters.Status)
	}
	if in.Filters.JoinPolicy != "" {
		where += ` AND w.join_policy = ?`
		args = append(args, in.Filters.JoinPolicy)
	}
	if in.Filters.Joined && viewer.AgentID != "" {
		where += ` AND EXISTS (SELECT 1 FROM social_memberships jm WHERE jm.world_id = w.id AND jm.agent_id = ? AND jm.status = 'active')`
		args = append(args, viewer.AgentID)
	}
	if in.Filters.Owned && viewer.AgentID != "" {
		where += ` AND w.owner_agent_id = ?`
		args = append(args, viewer.AgentID)
	}
	if len(in.Filters.Tags) > 0 {
		var ors []string
		for _, t := range in.Filters.Tags {
			ors = append(ors, `w.tags LIKE ? ESCAPE '\'`)
			args = append(args, `%"`+likeEscape(t)+`"%`)
		}
		where += ` AND (` + strings.Join(ors, " OR ") + `)`
	}
	order := map[string]string{
		SortLatest:   `w.created_at DESC`,
		SortLikes:    `w.likes DESC, w.conversation_count DESC`,
		SortActivity: `w.last_activity_at DESC`,
	}[in.Sort]
	if order == "" {
		order = `w.last_activity_at DESC`
		if p.match != "" {
			order = `score DESC, w.last_activity_at DESC`
		}
	}
	q := `SELECT ` + worldCols + `, ` + score + ` AS score` + docCols + ` FROM social_worlds w` + join + ` WHERE ` + where +
		` ORDER BY ` + order + `, w.id LIMIT ? OFFSET ?`
	args = append(args, limit+1, offset)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("search worlds: %w", err)
	}
	defer rows.Close()
	var out []worldHit
	for rows.Next() {
		var h worldHit
		var w worldRow
		var field, bc, pol, tags string
		if err := rows.Scan(append(w.scanDest(&field, &bc, &pol, &tags), &h.score, &h.doc)...); err != nil {
			return nil, false, fmt.Errorf("search worlds: %w", err)
		}
		if err := w.decode(field, bc, pol, tags); err != nil {
			return nil, false, err
		}
		h.world = w
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search worlds: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

type agentHit struct {
	acct   account
	member *memberRow
	world  string // world display name for member hits
	score  float64
	doc    string
}

func (s *Service) searchAgents(ctx context.Context, viewer Actor, in SearchInput, p searchPlan, members bool, offset, limit int) ([]agentHit, bool, error) {
	kind, ref := docPerson, "a.agent_id"
	if members {
		kind, ref = docMember, "m.id"
	}
	score, scoreArgs, join, cond, condArgs := s.ftsParts(kind, ref, p.match)
	docCols := ", ''"
	if p.match != "" {
		docCols = ", d.title || ' ' || d.body"
	}
	sel := accountCols
	from := ` FROM social_accounts a JOIN agents g ON g.id = a.agent_id`
	where := `a.visibility_mode = 'public' AND g.disabled = ?`
	args := append([]any{}, scoreArgs...)
	var whereArgs []any
	whereArgs = append(whereArgs, false)
	if viewer.AgentID != "" {
		where += ` AND a.agent_id <> ?`
		whereArgs = append(whereArgs, viewer.AgentID)
	}
	if members {
		sel = memberCols + `, ` + accountCols + `, w.display_name`
		from = ` FROM social_memberships m JOIN social_worlds w ON w.id = m.world_id JOIN social_accounts a ON a.agent_id = m.agent_id JOIN agents g ON g.id = a.agent_id`
		vis, visArgs := worldVisibleCond(viewer)
		where += ` AND m.status = 'active' AND m.banned = ? AND w.status <> 'closed' AND ` + vis
		whereArgs = append(whereArgs, false)
		whereArgs = append(whereArgs, visArgs...)
		if in.Filters.WorldID != "" {
			where += ` AND m.world_id = ?`
			whereArgs = append(whereArgs, in.Filters.WorldID)
		}
	}
	args = append(append(args, whereArgs...), condArgs...)
	var order string
	likeCol, actCol, newCol := "a.likes_received", "a.last_active_at", "a.created_at"
	if members {
		likeCol, actCol, newCol = "m.likes_received", "m.last_active_at", "m.joined_at"
	}
	switch in.Sort {
	case SortLatest:
		order = newCol + ` DESC`
	case SortLikes:
		order = likeCol + ` DESC`
	case SortActivity:
		order = actCol + ` DESC`
	default:
		order = actCol + ` DESC`
		if p.match != "" {
			order = `score DESC, ` + actCol + ` DESC`
		}
	}
	idCol := "a.agent_id"
	if members {
		idCol = "m.id"
	}
	q := `SELECT ` + sel + `, ` + score + ` AS score` + docCols + from + join + ` WHERE ` + where + cond +
		` ORDER BY ` + order + `, ` + idCol + ` LIMIT ? OFFSET ?`
	args = append(args, limit+1, offset)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("search agents: %w", err)
	}
	defer rows.Close()
	var out []agentHit
	for rows.Next() {
		var h agentHit
		var dest []any
		if members {
			h.member = &memberRow{}
			dest = append(dest, h.member.scanDest()...)
			dest = append(dest, h.acct.scanDest()...)
			dest = append(dest, &h.world)
		} else {
			dest = append(dest, h.acct.scanDest()...)
		}
		dest = append(dest, &h.score, &h.doc)
		if err := rows.Scan(dest...); err != nil {
			return nil, false, fmt.Errorf("search agents: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search agents: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// Search searches worlds, world members and people with full-text relevance
// (FTS5 on SQLite, tsvector on PostgreSQL), filters, sorts and pages. It
// applies visibility: private worlds only for their members, only public
// accounts in listings, and an exact identity (`Name#CODE` or a code as the
// whole query) also finds unlisted accounts. Errors: invalid_scope,
// invalid_sort, invalid_page, validation_failed.
func (s *Service) Search(ctx context.Context, viewer Actor, in SearchInput) (SearchResult, error) {
	p, err := s.normalizeSearch(&in)
	if err != nil {
		return SearchResult{}, err
	}
	hits, more, err := s.search(ctx, viewer, in, p)
	if err != nil {
		return SearchResult{}, err
	}
	res := SearchResult{Scope: in.Scope, Query: in.Query, Terms: p.terms, Sort: in.Sort, Page: in.Page, Limit: in.Limit,
		Results: hits, HasMore: more}
	if res.Terms == nil {
		res.Terms = []string{}
	}
	return res, nil
}

// search returns one page of ranked hits. The engines match and pre-rank;
// the final score is the share of query terms a hit contains plus its
// engine score squashed into [0, 0.5), so scores are comparable across
// kinds and stores. With a query and relevance sort the whole window (up to
// MaxSearchWindow) is ranked, so pages are consistent; other sorts page in
// SQL order.
func (s *Service) search(ctx context.Context, viewer Actor, in SearchInput, p searchPlan) ([]SearchHit, bool, error) {
	window := p.offset + in.Limit
	if in.Sort == SortRelevance && p.match != "" {
		window = MaxSearchWindow
	}
	var hits []SearchHit
	more := false
	mixed := in.Scope == ScopeMixed
	if mixed || in.Scope == ScopeWorlds {
		ws, m, err := s.searchWorldsWindow(ctx, viewer, in, p, 0, window)
		if err != nil {
			return nil, false, err
		}
		more = more || m
		wh, err := s.worldHits(ctx, viewer, in, p, ws)
		if err != nil {
			return nil, false, err
		}
		hits = append(hits, wh...)
	}
	for _, members := range []bool{true, false} {
		if !mixed && !(members && in.Scope == ScopeMembers) && !(!members && in.Scope == ScopePeople) {
			continue
		}
		as, m, err := s.searchAgents(ctx, viewer, in, p, members, 0, window)
		if err != nil {
			return nil, false, err
		}
		more = more || m
		hits = append(hits, s.agentHits(ctx, in, p, as)...)
	}
	if in.Page == 1 && (in.Scope == ScopePeople || mixed) {
		if exact, ok := s.exactIdentityHit(ctx, viewer, in.Query); ok {
			kept := []SearchHit{exact}
			for _, h := range hits {
				if !(h.Kind == HitPerson && h.AgentID == exact.AgentID) {
					kept = append(kept, h)
				}
			}
			hits = kept
		}
	}
	sortHits(hits, in.Sort)
	if len(hits) > p.offset+in.Limit {
		more = true
	}
	if p.offset >= len(hits) {
		return []SearchHit{}, false, nil
	}
	page := hits[p.offset:min(len(hits), p.offset+in.Limit)]
	for i := range page {
		page[i].Score = math.Round(page[i].Score*10000) / 10000
	}
	return page, more, nil
}

// score combines term coverage with the engine's relevance.
func score(terms []string, doc string, engine float64) float64 {
	if len(terms) == 0 {
		return 0
	}
	cov := float64(len(matched(terms, doc))) / float64(len(terms))
	e := math.Max(engine, 0)
	return cov + 0.5*e/(1+e)
}

func sortHits(hits []SearchHit, sortBy string) {
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.ExactIdentity != b.ExactIdentity {
			return a.ExactIdentity
		}
		if sortBy == SortRelevance && a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.sortKey != b.sortKey {
			return a.sortKey > b.sortKey
		}
		return a.Score > b.Score
	})
}

// sortKey is the value a non-relevance sort orders by (activity for
// relevance without a query).
func sortKey(sortBy string, created, likes, activity int64) int64 {
	switch sortBy {
	case SortLatest:
		return created
	case SortLikes:
		return likes
	}
	return activity
}

// matched lists the terms found in a document's text.
func matched(terms []string, doc string) []string {
	doc = strings.ToLower(doc)
	var out []string
	for _, t := range terms {
		if strings.Contains(doc, stem(t)) {
			out = append(out, t)
		}
	}
	return out
}

func reason(terms []string, doc, sortBy string) string {
	if m := matched(terms, doc); len(m) > 0 {
		return "matches " + strings.Join(m, ", ")
	}
	switch sortBy {
	case SortLatest:
		return "newest first"
	case SortLikes:
		return "most liked"
	}
	return "recently active"
}

// summarize returns the first line of text, shortened to n characters.
func summarize(text string, n int) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	if r := []rune(text); len(r) > n {
		return strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return text
}

func (s *Service) worldHits(ctx context.Context, viewer Actor, in SearchInput, p searchPlan, ws []worldHit) ([]SearchHit, error) {
	rows := make([]worldRow, len(ws))
	for i, h := range ws {
		rows[i] = h.world
	}
	views, err := s.worldViews(ctx, s.db, viewer.AgentID, rows)
	if err != nil {
		return nil, err
	}
	out := make([]SearchHit, len(ws))
	for i, h := range ws {
		v := views[i]
		st := v.Stats
		out[i] = SearchHit{Kind: HitWorld, Score: score(p.terms, h.doc, h.score), ReasonSummary: reason(p.terms, h.doc, in.Sort), DisplayName: v.DisplayName,
			WorldID: v.WorldID, WorldDisplayName: v.DisplayName, Summary: summarize(v.WorldContextText, 200), Tags: v.Tags,
			Status: v.Status, JoinPolicy: v.JoinPolicy, Stats: &st,
			sortKey: sortKey(in.Sort, h.world.CreatedAt, int64(h.world.Likes), h.world.LastActivityAt), world: h.world}
		if v.ViewerMembership != nil {
			out[i].ViewerMembershipStatus = v.ViewerMembership.MembershipStatus
		}
	}
	return out, nil
}

func (s *Service) agentHits(ctx context.Context, in SearchInput, p searchPlan, as []agentHit) []SearchHit {
	ids := make([]string, len(as))
	for i, h := range as {
		ids[i] = h.acct.AgentID
	}
	online := s.online(ctx, uniq(ids))
	out := make([]SearchHit, len(as))
	for i, h := range as {
		a := h.acct
		on := online[a.AgentID]
		hit := SearchHit{Kind: HitPerson, Score: score(p.terms, h.doc, h.score), ReasonSummary: reason(p.terms, h.doc, in.Sort), DisplayName: a.DisplayName,
			AgentID: a.AgentID, AgentCode: a.Code, Identity: a.identity(), Headline: a.Headline, Online: &on,
			ProfileSummary: summarize(a.AgentProfile, 200),
			RequestChat:    &RequestChatRef{DisplayName: a.DisplayName, AgentCode: a.Code},
			sortKey:        sortKey(in.Sort, a.CreatedAt, int64(a.Likes), a.LastActiveAt)}
		if h.member != nil {
			m := h.member
			hit.Kind, hit.WorldID, hit.WorldDisplayName = HitMember, m.WorldID, h.world
			hit.ProfileSummary = summarize(m.Text, 200)
			hit.WorldFeedbackSummary = &MemberFeedback{Likes: m.Likes, Dislikes: m.Dislikes, ConversationCount: m.Conversations}
			hit.RequestChat.WorldID = m.WorldID
			hit.sortKey = sortKey(in.Sort, m.JoinedAt, int64(m.Likes), m.LastActiveAt)
		} else {
			hit.AccountStats = &AccountStats{LikesReceived: a.Likes, DislikesReceived: a.Dislikes, ConversationCount: a.Conversations}
		}
		out[i] = hit
	}
	return out
}

// exactIdentityHit finds the account a query names exactly (`Name#CODE`
// or a bare code), when the viewer may reach it by identity.
func (s *Service) exactIdentityHit(ctx context.Context, viewer Actor, query string) (SearchHit, bool) {
	q := strings.TrimSpace(query)
	if q == "" || (!strings.Contains(q, "#") && len(q) != CodeLen) {
		return SearchHit{}, false
	}
	id, err := ParseIdentity(q)
	if err != nil {
		return SearchHit{}, false
	}
	a, err := s.accountByCode(ctx, s.db, id.Code)
	if err != nil || a.AgentID == viewer.AgentID {
		return SearchHit{}, false
	}
	if ok, err := s.visible(ctx, s.db, viewer, a, true); err != nil || !ok {
		return SearchHit{}, false
	}
	on := s.online(ctx, []string{a.AgentID})[a.AgentID]
	return SearchHit{Kind: HitPerson, Score: 2, ReasonSummary: "exact identity", DisplayName: a.DisplayName, AgentID: a.AgentID,
		AgentCode: a.Code, Identity: a.identity(), Headline: a.Headline, Online: &on, ProfileSummary: summarize(a.AgentProfile, 200),
		AccountStats:  &AccountStats{LikesReceived: a.Likes, DislikesReceived: a.Dislikes, ConversationCount: a.Conversations},
		RequestChat:   &RequestChatRef{DisplayName: a.DisplayName, AgentCode: a.Code},
		ExactIdentity: true}, true
}
