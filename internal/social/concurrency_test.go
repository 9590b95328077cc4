package social_test

import (
	"sync"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// Racing callers cannot create two pending requests or two live chats for
// one pair, nor accept one request twice (PostgreSQL runs several writers).
func TestConcurrentRequestsAndAnswers(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		a, b := e.agent("A", policy(social.PolicyApproval)), e.agent("B", policy(social.PolicyApproval))
		var wg sync.WaitGroup
		codes := make(chan string, 16)
		for i := 0; i < 16; i++ {
			from, to := a, b
			if i%2 == 1 {
				from, to = b, a
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.request(from, to, "")
				codes <- protocol.CodeOf(err)
			}()
		}
		wg.Wait()
		close(codes)
		ok := 0
		for c := range codes {
			switch c {
			case "":
				ok++
			case "request_already_pending":
			default:
				t.Fatalf("unexpected error %q", c)
			}
		}
		if ok != 1 {
			t.Fatalf("%d requests created for one pair, want 1", ok)
		}
		in, _ := e.svc.Inbox(e.ctx, social.AgentActor(a.AgentID), social.InboxFilters{})
		if in.Counts.Global.Pending != 1 {
			t.Fatalf("pending %+v", in.Counts.Global)
		}
		req := in.PendingRequests[0]
		answerer := a
		if req.Direction == "outbound" {
			answerer = b
		}
		results := make(chan social.RequestView, 8)
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := e.svc.AcceptRequest(e.ctx, social.AgentActor(answerer.AgentID), req.ChatRequestID)
				if err != nil {
					errs <- err
					return
				}
				results <- v
			}()
		}
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			t.Fatalf("concurrent accept failed: %v", err)
		}
		fresh := 0
		for v := range results {
			if v.Status != social.RequestAccepted || v.Chat == nil {
				t.Fatalf("accept result %+v", v)
			}
			if !v.AlreadyApplied {
				fresh++
			}
		}
		var chats int
		if err := e.db.QueryRow(e.ctx, `SELECT COUNT(*) FROM social_chats`).Scan(&chats); err != nil {
			t.Fatal(err)
		}
		if fresh != 1 || chats != 1 {
			t.Fatalf("%d fresh accepts, %d chats; want 1 and 1", fresh, chats)
		}
	})
}
