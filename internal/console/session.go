package console

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Cookie names. The session cookie holds a random id; the sign-in cookie
// holds the CSRF token of the sign-in form (double submit: there is no
// session yet to keep it in).
const (
	SessionCookie = "switchboard_console"
	signInCookie  = "switchboard_console_signin"
	csrfField     = "csrf"
	maxTokenLen   = 512
)

// viewer is the signed-in person: the admin or one agent's owner.
type viewer struct {
	Admin   bool
	AgentID string
	Name    string // the agent's display name ("admin" for the admin)
	idHash  string
	csrf    string
	expires time.Time
}

// Owner is the id that scopes what the viewer sees: "" for the admin.
func (v *viewer) Owner() string {
	if v.Admin {
		return ""
	}
	return v.AgentID
}

// Can reports whether the viewer may see things of agentID.
func (v *viewer) Can(agentID string) bool { return v.Admin || (agentID != "" && v.AgentID == agentID) }

func (c *Console) secure(r *http.Request) bool {
	return c.d.SecureCookies || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
}

// session loads the viewer of a request's session cookie; nil when there
// is none or it ended.
func (c *Console) session(ctx context.Context, r *http.Request) (*viewer, error) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil, nil
	}
	return c.sessionByHash(ctx, hashID(ck.Value))
}

func (c *Console) sessionByHash(ctx context.Context, h string) (*viewer, error) {
	v := &viewer{idHash: h}
	var exp int64
	err := c.d.DB.QueryRow(ctx, `SELECT agent_id, admin, csrf, expires_at FROM console_sessions WHERE id_hash = ?`, h).
		Scan(&v.AgentID, &v.Admin, &v.csrf, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("console session: %w", err)
	}
	v.expires = store.FromMillis(exp)
	if !c.d.Clock.Now().Before(v.expires) {
		return nil, nil
	}
	if v.Admin {
		v.Name = "admin"
		return v, nil
	}
	a, err := c.d.Agents.Get(ctx, v.AgentID)
	if err != nil || a.Disabled {
		// A disabled or deleted agent's sessions end with it.
		return nil, nil
	}
	v.Name = a.DisplayName
	return v, nil
}

// signedIn returns the viewer or answers the request: pages redirect to
// the sign-in form, anything else gets 401.
func (c *Console) signedIn(w http.ResponseWriter, r *http.Request) (*viewer, bool) {
	v, err := c.session(r.Context(), r)
	if err != nil {
		c.renderError(w, r, nil, err)
		return nil, false
	}
	if v != nil {
		return v, true
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		http.Redirect(w, r, Prefix+"/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return nil, false
	}
	c.renderError(w, r, nil, protocol.Unauthenticated("your console session ended; sign in again"))
	return nil, false
}

// sameOrigin refuses cross-site form posts by the headers browsers set:
// Sec-Fetch-Site (same-origin, or none for a typed URL) and Origin (the
// host must be this request's). The CSRF token is the main defense; this
// is the second.
func sameOrigin(r *http.Request) error {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return protocol.Forbidden("cross_site_request", "the console refuses forms posted from another site ("+s+")")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || !strings.EqualFold(u.Host, r.Host) {
			return protocol.Forbidden("cross_site_request", "the console refuses forms posted from another origin ("+o+")")
		}
	}
	return nil
}

func tokenEqual(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// action serves a signed-in form post: same origin and the session's CSRF
// token are required before fn runs.
func (c *Console) action(fn func(w http.ResponseWriter, r *http.Request, v *viewer) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 2<<20)
		if err := sameOrigin(r); err != nil {
			c.renderError(w, r, nil, err)
			return
		}
		v, ok := c.signedIn(w, r)
		if !ok {
			return
		}
		if err := r.ParseForm(); err != nil {
			c.renderError(w, r, v, protocol.Invalid("form", "the form could not be read: "+err.Error()))
			return
		}
		if !tokenEqual(r.PostForm.Get(csrfField), v.csrf) {
			c.renderError(w, r, v, protocol.Forbidden("csrf_token_invalid", "the form's security token is missing or stale; reload the page and try again"))
			return
		}
		if err := fn(w, r, v); err != nil {
			c.renderError(w, r, v, err)
		}
	}
}

// signInView is the sign-in form.
type signInView struct {
	CSRF  string
	Next  string
	Error string
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if v, _ := c.session(r.Context(), r); v != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.renderSignIn(w, r, http.StatusOK, "")
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := protocol.RandomToken("", 24)
	c.setCookie(w, r, signInCookie, tok, 3600)
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostForm.Get("next")
	}
	c.render(w, r, status, "signin", nil, signInView{CSRF: tok, Next: safeNext(next), Error: msg}, "")
}

// safeNext keeps redirects inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return next
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := sameOrigin(r); err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.renderSignIn(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ck, _ := r.Cookie(signInCookie)
	if ck == nil || !tokenEqual(r.PostForm.Get(csrfField), ck.Value) {
		c.renderSignIn(w, r, http.StatusForbidden, "The sign-in form expired. Try again.")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" || len(tok) > maxTokenLen {
		c.renderSignIn(w, r, http.StatusBadRequest, "Paste the admin token or an agent token.")
		return
	}
	p, err := c.d.Auth.Authenticate(r.Context(), tok)
	if err != nil {
		if protocol.AsError(err).HTTPStatus() == http.StatusUnauthorized {
			c.d.Log.Info("console sign-in refused", "remote", r.RemoteAddr)
			c.renderSignIn(w, r, http.StatusUnauthorized, "That token is unknown, rotated or disabled.")
			return
		}
		c.renderError(w, r, nil, err)
		return
	}
	id, err := c.createSession(r.Context(), p)
	if err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	c.setCookie(w, r, signInCookie, "", -1)
	c.setCookie(w, r, SessionCookie, id, int(c.d.SessionTTL/time.Second))
	c.d.Log.Info("console sign-in", "admin", p.Admin, "agentId", p.AgentID())
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// createSession stores a new session for p and returns its id (the
// cookie value). Expired sessions are swept on the way.
func (c *Console) createSession(ctx context.Context, p httpapi.Principal) (string, error) {
	id := protocol.RandomToken("", 32)
	csrf := protocol.RandomToken("", 32)
	now := c.d.Clock.Now()
	err := c.d.DB.Write(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at <= ?`, store.Millis(now)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_sessions (id_hash, agent_id, admin, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			hashID(id), p.AgentID(), p.Admin, csrf, store.Millis(now), store.Millis(now.Add(c.d.SessionTTL)))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("console: create session: %w", err)
	}
	return id, nil
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, v *viewer) error {
	err := c.d.DB.Write(r.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(r.Context(), `DELETE FROM console_sessions WHERE id_hash = ?`, v.idHash)
		return err
	})
	if err != nil {
		return fmt.Errorf("console: sign out: %w", err)
	}
	c.setCookie(w, r, SessionCookie, "", -1)
	http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
	return nil
}
