package console

import (
	"fmt"
	"html/template"
	"io/fs"
	"strings"
	"time"
)

// navItem is one link of the navigation bar.
type navItem struct {
	Href, Label string
	Current     bool
}

// agentRef is an agent mention: its id, its display name, and whether the
// viewer may open its page.
type agentRef struct {
	ID, Name string
	Link     bool
}

// dotT carries the page (for the viewer and CSRF token) into a shared
// template alongside its items.
type dotT struct {
	Root  layout
	Items any
	Names map[string]string
}

// docDot is a document section with the anchor its <details> ids derive
// from (stable, so live updates keep sections open or closed).
type docDot struct {
	Anchor string
	Sec    *DocSection
}

// section maps detail pages to the navigation entry they belong to.
var section = map[string]string{"agent": "agents", "delivery": "agents", "conversation": "conversations", "world": "worlds",
	"trace": "traces", "deadletter": "deadletters", "replay": "deadletters", "pipeline": "pipelines", "cancel": "pipelines"}

var funcs = template.FuncMap{
	"nav": func(l layout, page, href, label string) navItem {
		return navItem{Href: href, Label: label, Current: l.Page == page || section[l.Page] == page}
	},
	"agent": func(v *viewer, id, name string) agentRef {
		return agentRef{ID: id, Name: name, Link: v != nil && v.Can(id)}
	},
	"dot": func(root layout, items any, names map[string]string) dotT {
		return dotT{Root: root, Items: items, Names: names}
	},
	"docdot": func(anchor string, s *DocSection) docDot { return docDot{Anchor: anchor, Sec: s} },
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"ts":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"dur":    fmtDuration,
	"rate":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"pct":    func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"list":   func(s ...string) []string { return s },
	"contains": func(list []string, s string) bool {
		return contains(list, s)
	},
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "0 ms"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// parseTemplates builds one template set per page: the layout, the shared
// partials and the page's own file (which defines "content" and, for live
// pages, "live").
func parseTemplates() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" || page == "partials" {
			continue
		}
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		out[page] = t
	}
	return out, nil
}
