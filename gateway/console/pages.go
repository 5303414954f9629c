package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// assetFS serves /console/static/… (CSS, JS): only the static folder, so
// templates are never served as files.
var assetFS fs.FS = staticFS

// page is what the layout renders around a view.
type page struct {
	Title string
	// Nav marks the current page in the navigation ("" on sign-in).
	Nav  string
	By   string
	CSRF string
	Body any
}

// pages holds every view, each parsed with the layout.
type pages struct {
	views map[string]*template.Template
}

var funcs = template.FuncMap{
	"pretty": prettyJSON,
	"utc":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"ms":     func(d time.Duration) string { return d.Round(time.Microsecond * 100).String() },
	"base":   func() string { return Base },
	// visible shows a caller's (or anyone's) text with its invisible and
	// direction-changing characters escaped (Visible).
	"visible": Visible,
}

func mustParsePages() *pages {
	p := &pages{views: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		view := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if view == "layout" || strings.HasPrefix(view, "_") {
			continue
		}
		p.views[view] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return p
}

// render writes view inside the layout; it renders into a buffer first so
// a template error never sends half a page.
func (p *pages) render(w http.ResponseWriter, status int, view string, pg page) {
	var buf bytes.Buffer
	if err := p.views[view].Execute(&buf, pg); err != nil {
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// renderFragment writes one named template alone (the polled pending list).
func (p *pages) renderFragment(w http.ResponseWriter, view, name string, data any) {
	var buf bytes.Buffer
	if err := p.views[view].ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "cannot render the fragment", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// pageFor is the layout data of a signed-in page.
func pageFor(r *http.Request, title, nav string, body any) page {
	s := sessionFrom(r.Context())
	return page{Title: title, Nav: nav, By: s.By, CSRF: s.csrf(), Body: body}
}

// prettyJSON lays canonical arguments out indented for reading; text that
// is not JSON is shown as it is. Invisible and direction-changing
// characters are escaped (Visible): in a JSON string the escape means the
// same character. html/template escapes the result.
func prettyJSON(raw []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return Visible(string(raw))
	}
	return Visible(out.String())
}

// age is a short age ("3m12s") of t at now.
func age(t, now time.Time) string {
	return max(now.Sub(t), 0).Round(time.Second).String()
}
