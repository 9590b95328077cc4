package social

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/store"
)

// Kinds of search documents.
const (
	docWorld  = "world"
	docPerson = "person"
	docMember = "member"
)

// upsertDoc writes one search document; SQLite's FTS5 index follows by
// trigger, PostgreSQL's tsvector is a generated column.
func upsertDoc(ctx context.Context, tx *store.Tx, kind, ref, worldID, title, body, tags string) error {
	_, err := tx.Exec(ctx, `INSERT INTO social_search_docs (kind, ref, world_id, title, body, tags) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, ref) DO UPDATE SET world_id = excluded.world_id, title = excluded.title, body = excluded.body, tags = excluded.tags`,
		kind, ref, worldID, title, body, tags)
	if err != nil {
		return fmt.Errorf("index %s %s: %w", kind, ref, err)
	}
	return nil
}

func deleteDoc(ctx context.Context, tx *store.Tx, kind, ref string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM social_search_docs WHERE kind = ? AND ref = ?`, kind, ref); err != nil {
		return fmt.Errorf("unindex %s %s: %w", kind, ref, err)
	}
	return nil
}

func personDoc(a account) (title, body string) {
	return a.DisplayName + " " + a.Code, strings.Join(nonEmpty(a.Headline, a.AgentProfile, a.HumanProfile), "\n")
}

// indexAccount refreshes an account's person document and the member
// documents of its active memberships (they carry its name and profile).
func (s *Service) indexAccount(ctx context.Context, tx *store.Tx, a account) error {
	title, body := personDoc(a)
	if err := upsertDoc(ctx, tx, docPerson, a.AgentID, "", title, body, ""); err != nil {
		return err
	}
	ms, err := s.membershipsOfAgent(ctx, tx, a.AgentID, []string{MemberActive})
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := s.indexMembership(ctx, tx, m, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) indexWorld(ctx context.Context, tx *store.Tx, w worldRow) error {
	body := strings.Join(nonEmpty(w.ContextText, w.Field.Label, w.Field.Description), "\n")
	return upsertDoc(ctx, tx, docWorld, w.ID, w.ID, w.DisplayName, body, strings.Join(w.Tags, " "))
}

// indexMembership indexes an active membership (its world profile plus the
// member's global profile); any other status removes it from search.
func (s *Service) indexMembership(ctx context.Context, tx *store.Tx, m memberRow, a account) error {
	if m.Status != MemberActive || m.Banned {
		return deleteDoc(ctx, tx, docMember, m.ID)
	}
	body := strings.Join(nonEmpty(m.Text, a.Headline, a.AgentProfile), "\n")
	return upsertDoc(ctx, tx, docMember, m.ID, m.WorldID, a.DisplayName+" "+a.Code, body, "")
}

func nonEmpty(ss ...string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}
