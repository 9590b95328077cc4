package httpapi

import "net/http"

// MountConsole serves the web console (HTML pages, its embedded assets and
// its Server-Sent Events) under /console. The console authenticates with
// its own session cookie and CSRF tokens, so its routes are public to the
// router; they are listed in the OpenAPI document as console pages.
func (s *Server) MountConsole(h http.Handler) {
	serve := func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
	for _, op := range []Op{
		{Method: "GET", Path: "/console", Summary: "Web console (HTML; redirects to its overview page)"},
		{Method: "GET", Path: "/console/{path...}", Summary: "Web console pages, assets and live updates (HTML and Server-Sent Events; sign in with the admin token or an agent token)"},
		{Method: "POST", Path: "/console/{path...}", Summary: "Web console forms: sign-in, sign-out and actions (session cookie and CSRF token)"},
	} {
		op.Tag, op.Auth, op.Raw, op.MaxBody = "console", AuthPublic, true, 2<<20
		s.router.Handle(op, serve)
	}
}
